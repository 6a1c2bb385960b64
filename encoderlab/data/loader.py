"""A seeded, exactly resumable, rank-sharded batch loader over a :class:`TokenStore`.

Usage by a trainer::

    store = TokenStore(data_dir, "train", tokenizer=tok)
    loader = PretrainLoader(store, LoaderConfig(objective="packed", batch_size=32, seq_len=128),
                            rank=rank, world_size=world_size)
    for step, batch in zip(range(steps), loader):   # endless: epochs follow each other
        ...
        checkpoint["loader"] = loader.state_dict()   # the position of the *next* batch
    loader.load_state_dict(checkpoint["loader"])     # the same batches follow as without the stop

Batches are dicts of torch tensors, B = batch size, T = sequence length: ``input_ids`` (B, T) long,
``token_type_ids`` (B, T) long, ``attention_mask`` (B, T) long, ``word_start`` (B, T) bool and, for
NSP/SOP, ``sentence_label`` (B,) long. Masking is applied afterwards (:mod:`encoderlab.data.masking`).

Order: each epoch draws a permutation of "units" from (seed, epoch): packed windows, or documents
for sentence pairs. Rank r takes every world_size-th unit (the permutation is first cut to a
multiple of world_size, so ranks never overlap and have equal shares). Units are processed in
groups of ``group_size``; the pairs of a group are shuffled with a generator seeded by (seed,
epoch, rank, group). The position is (epoch, group, offset in group), so restoring it rebuilds one
group and continues exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Literal

import numpy as np
import torch

from encoderlab.config import Config, ConfigError
from encoderlab.data.examples import PackedExamples, PairExamples
from encoderlab.data.store import TokenStore


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoaderConfig(Config):
    objective: Literal["packed", "nsp", "sop"] = "packed"  # packed: MLM and ELECTRA
    batch_size: int = 32
    seq_len: int = 128
    seed: int = 0
    short_seq_prob: float = 0.1  # pairs: BERT/ALBERT's share of shorter sequences
    group_size: int = 256  # units per shuffle group (pair examples are shuffled inside a group)

    def validate(self) -> None:
        if self.batch_size < 1 or self.group_size < 1:
            raise ConfigError("batch_size and group_size must be >= 1")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ConfigError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")


class PretrainLoader:
    def __init__(self, store: TokenStore, cfg: LoaderConfig, *, rank: int = 0, world_size: int = 1):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.store, self.cfg, self.rank, self.world_size = store, cfg, rank, world_size
        ids = store.special_ids
        self.vocab_size, self.pad_id, self.mask_id = store.vocab_size, ids["pad"], ids["mask"]
        self.special_ids = tuple(sorted(ids.values()))
        if cfg.objective == "packed":
            self.packed = PackedExamples(store, cfg.seq_len, seed=cfg.seed)
        else:
            self.pairs = PairExamples(store, cfg.seq_len, cfg.objective, cfg.short_seq_prob)
        self.epoch, self.group, self.offset = 0, 0, 0
        self._units: tuple[int, np.ndarray] | None = None  # (epoch, this rank's units)
        self._group: tuple[tuple[int, int], list] | None = None  # ((epoch, group), examples)
        if self._rank_units(0).size == 0:
            hint = (f"; it holds {store.num_documents} document(s): re-run `encoderlab prepare` with --doc-split line "
                    "if a file holds one document per line (or --valid-count N)" if store.split == "valid" else "")
            if store.split == "valid":
                hint += ", or set data.eval_batches=0 to train without a held-out evaluation"
            raise ValueError(f"{store.path} ({store.split}) is too small for one example per rank{hint}")

    # ---- position -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "group": self.group,
            "offset": self.offset,
            "config": self.cfg.to_dict(),
            "rank": self.rank,
            "world_size": self.world_size,
            "tokenizer_hash": self.store.tokenizer_hash,
        }

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        for key in ("config", "rank", "world_size", "tokenizer_hash"):
            if state[key] != mine[key]:
                raise ValueError(f"loader state has {key}={state[key]!r}, this loader has {mine[key]!r}")
        self.epoch, self.group, self.offset = state["epoch"], state["group"], state["offset"]

    # ---- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        while True:
            yield collate([self._next_example() for _ in range(self.cfg.batch_size)])

    def _next_example(self) -> dict[str, np.ndarray]:
        while True:
            examples = self._group_examples(self.epoch, self.group)
            if examples is None:  # past the last group: next epoch
                self.epoch, self.group, self.offset = self.epoch + 1, 0, 0
            elif self.offset >= len(examples):
                self.group, self.offset = self.group + 1, 0
            else:
                self.offset += 1
                return examples[self.offset - 1]

    def _group_examples(self, epoch: int, group: int) -> list | None:
        if self._group is not None and self._group[0] == (epoch, group):
            return self._group[1]
        units = self._rank_units(epoch)
        G = self.cfg.group_size
        if group * G >= len(units):
            return None
        chunk = units[group * G : (group + 1) * G]
        if self.cfg.objective == "packed":
            examples = [self.packed.example(int(i), epoch) for i in chunk]
        else:
            rng = np.random.default_rng([self.cfg.seed, epoch, self.rank, group])
            examples = self.pairs.from_documents(chunk, rng)
            examples = [examples[i] for i in rng.permutation(len(examples))]
        self._group = ((epoch, group), examples)
        return examples

    def _rank_units(self, epoch: int) -> np.ndarray:
        if self._units is None or self._units[0] != epoch:
            n = self.packed.num_examples(epoch) if self.cfg.objective == "packed" else len(self.store)
            perm = np.random.default_rng([self.cfg.seed, epoch]).permutation(n)
            perm = perm[: n - n % self.world_size]
            self._units = (epoch, perm[self.rank :: self.world_size])
        return self._units[1]


def collate(examples: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Stack examples into a batch of torch tensors: (B, T) each, sentence_label (B,)."""
    batch = {}
    for key in examples[0]:
        arr = np.stack([e[key] for e in examples])
        batch[key] = torch.from_numpy(arr if key == "word_start" else arr.astype(np.int64))
    return batch
