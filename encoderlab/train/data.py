"""Batch sources for the trainer: an iterable of dicts of tensors with exact state_dict() resume.

The trainer needs only this protocol. Each rank of a distributed run gets its own source, which
yields that rank's share of every global batch: micro-batch i of the whole run goes to rank
i % world_size, so a run's data does not depend on how it is split over processes.

Keys: input_ids, attention_mask, token_type_ids (B, T) and, for sentence pairs, sentence_label (B,).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

import torch

from encoderlab.config import ConfigError
from encoderlab.data.loader import LoaderConfig, PretrainLoader
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.train.config import DataConfig


class BatchSource(Protocol):
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


class SyntheticSource:
    """Deterministic patterned batches: micro-batch i depends only on (seed, split, i).

    Row r is CLS, then (start + stride * j) mod (V - S) + S for j = 0..., then SEP; the stride is
    one of 1..4, so a model can learn to fill masked tokens from their neighbours. Rows have
    random real lengths (padding after). With pairs, the two halves are swapped for label 1.
    """

    def __init__(self, cfg: DataConfig, *, split: str = "train", rank: int = 0, world_size: int = 1,
                 seed: int = 0):
        self.cfg, self.s = cfg, cfg.synthetic
        self.rank, self.world = rank, world_size
        self.seed = seed * 1_000_003 + (0 if split == "train" else 7919)
        self.next_index = 0  # micro-batches of this rank already yielded

    def __iter__(self):
        while True:
            i = self.next_index * self.world + self.rank
            self.next_index += 1
            if self.s.delay_s:
                time.sleep(self.s.delay_s)
            yield self.batch(0 if self.s.repeat_one else i)

    def batch(self, i: int) -> dict[str, torch.Tensor]:
        B, T, V, S = self.cfg.batch_size, self.cfg.seq_len, self.s.vocab_size, self.s.num_special
        g = torch.Generator().manual_seed(self.seed + i)
        start = torch.randint(0, V - S, (B, 1), generator=g)
        stride = torch.randint(1, 5, (B, 1), generator=g)
        body = (start + stride * torch.arange(T - 2)) % (V - S) + S  # (B, T-2)
        lengths = torch.randint(max(4, T // 2), T - 1, (B,), generator=g)  # real body lengths
        ids = torch.zeros(B, T, dtype=torch.long)
        tt = torch.zeros(B, T, dtype=torch.long)
        label = torch.randint(0, 2, (B,), generator=g) if self.s.pairs else None
        for r in range(B):
            n = int(lengths[r])
            seq = body[r, :n]
            if self.s.pairs:
                h = n // 2
                a, b = (seq[h:], seq[:h]) if label[r] else (seq[:h], seq[h:])
                row = torch.cat([torch.tensor([1]), a, torch.tensor([2]), b, torch.tensor([2])])
                tt[r, len(a) + 2: len(row)] = 1
            else:
                row = torch.cat([torch.tensor([1]), seq, torch.tensor([2])])
            row = row[:T]
            ids[r, : len(row)] = row
        out = {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": tt}
        if label is not None:
            out["sentence_label"] = label
        return out

    def state_dict(self) -> dict:
        return {"next_index": self.next_index}

    def load_state_dict(self, state: dict) -> None:
        self.next_index = int(state["next_index"])


class ShortFirstSource:
    """Short-sequence warm-up: ``switch_at`` micro-batches from ``short``, then ``full`` for good.

    Both sources keep their own position, so a resume on either side of the switch continues
    exactly; the full-length phase starts at its own first batch, as a fresh run would."""

    def __init__(self, short: BatchSource, full: BatchSource, switch_at: int):
        self.short, self.full, self.switch_at = short, full, switch_at
        self.yielded = 0  # micro-batches of this rank so far, both phases

    def __iter__(self):
        short, full = iter(self.short), None
        while True:
            if self.yielded < self.switch_at:
                batch = next(short)
            else:
                full = full or iter(self.full)
                batch = next(full)
            self.yielded += 1
            yield batch

    def state_dict(self) -> dict:
        return {"yielded": self.yielded, "short": self.short.state_dict(), "full": self.full.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.yielded = int(state["yielded"])
        self.short.load_state_dict(state["short"])
        self.full.load_state_dict(state["full"])


def make_source(cfg: DataConfig, *, split: str, rank: int, world_size: int, seed: int, pairs: str | None,
                grad_accum: int = 1):
    """The batch source of a recipe: a synthetic one, or the token store's loader; pairs is "nsp" or
    "sop" for sentence-pair examples, None for packed full sentences (MLM, ELECTRA). The training
    split starts with the short-sequence warm-up when the recipe has one (each of a step's
    grad_accum micro-batches counts); held-out data is always full length."""
    if split == "train" and cfg.short_seq_steps > 0:
        kw = dict(split=split, rank=rank, world_size=world_size, seed=seed, pairs=pairs)
        return ShortFirstSource(make_source(cfg.short(), **kw), make_source(cfg.replace(short_seq_steps=0), **kw),
                                cfg.short_seq_steps * grad_accum)
    if cfg.kind == "synthetic":
        return SyntheticSource(cfg, split=split, rank=rank, world_size=world_size, seed=seed)
    store = _open_store(cfg, split)
    loader_cfg = LoaderConfig(objective=pairs or "packed", batch_size=cfg.batch_size, seq_len=cfg.seq_len, seed=seed)
    return PretrainLoader(store, loader_cfg, rank=rank, world_size=world_size)


def _open_store(cfg: DataConfig, split: str):
    if cfg.path is None:  # checked here, not in DataConfig: a study's base recipe has no store yet
        raise ConfigError("data.path is required for data.kind: store (a token store directory)")
    tokenizer = load_tokenizer(cfg.tokenizer_dir) if cfg.tokenizer_dir is not None else None
    return TokenStore(cfg.path, split, tokenizer=tokenizer)  # refuses a tokenizer the store was not built with


def describe(cfg: DataConfig) -> dict:
    """vocab_size, mask_token_id, special_token_ids and tokenizer_dir of a recipe's data."""
    if cfg.kind == "synthetic":
        s = cfg.synthetic
        return {"vocab_size": s.vocab_size, "mask_token_id": 3,
                "special_token_ids": tuple(range(s.num_special)), "tokenizer_dir": None}
    store = _open_store(cfg, "train")
    ids = store.special_ids
    return {"vocab_size": store.vocab_size, "mask_token_id": ids["mask"],
            "special_token_ids": tuple(sorted(set(ids.values()))),
            "tokenizer_dir": str(cfg.tokenizer_dir or store.tokenizer_dir)}
