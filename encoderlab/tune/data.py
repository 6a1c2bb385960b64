"""Batches for fine-tuning and scoring: index batches of similar lengths, padding a batch, and the
check that a tokenizer fits a checkpoint.

Shape letters: B batch, T longest length in the batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from encoderlab.data.tokenizer import Encoded, Tokenizer
from encoderlab.models.pairs import deployed


def length_batches(lengths, batch_size: int, rng: np.random.Generator | None, bucket: bool = True,
                   chunk_batches: int = 50) -> list[np.ndarray]:
    """Index batches. Training (rng given): shuffle, sort by length within chunks of ``chunk_batches``
    batches, shuffle the batches. Evaluation (rng None): sorted by length, so padding is minimal."""
    lengths = np.asarray(lengths)
    n = len(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable") if bucket else np.arange(n)
        return [order[i : i + batch_size] for i in range(0, n, batch_size)]
    order = rng.permutation(n)
    if bucket:
        chunk = batch_size * chunk_batches
        chunks = np.split(order, range(chunk, n, chunk))
        order = np.concatenate([c[np.argsort(lengths[c], kind="stable")] for c in chunks])
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    rng.shuffle(batches)
    return batches


def collate(encoded: list[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence (dynamic padding)."""
    T = max(len(e.ids) for e in encoded)
    ids = torch.full((len(encoded), T), pad_id, dtype=torch.long)  # (B, T)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, e in enumerate(encoded):
        n = len(e.ids)
        ids[i, :n] = torch.tensor(e.ids)
        types[i, :n] = torch.tensor(e.type_ids)
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def check_vocab(tok: Tokenizer, model: nn.Module, where: str) -> None:
    """Refuse a tokenizer with more tokens than the model's vocabulary (its ids would index past it)."""
    V = deployed(model).encoder.config.vocab_size
    if tok.vocab_size > V:
        raise ValueError(f"{where}: tokenizer has {tok.vocab_size} tokens but the model's vocabulary is {V}: "
                         "wrong tokenizer for this checkpoint?")


class PaddedSet:
    """Encoded examples padded once to the longest of them, so a batch is a slice rather than
    per-example tensor copies: :meth:`batch` returns exactly what :func:`collate` returns for the
    same examples (padded to the batch's own longest). Tokenize and pad a task once, then draw
    every seed's batches from it.

    Shape letters: N examples, L longest example.
    """

    def __init__(self, encoded: list[Encoded], pad_id: int):
        self.lengths = np.array([len(e.ids) for e in encoded], dtype=np.int64)  # (N,)
        L = int(self.lengths.max()) if len(encoded) else 1
        self.ids = np.full((len(encoded), L), pad_id, dtype=np.int64)  # (N, L)
        self.types = np.zeros_like(self.ids)
        for i, e in enumerate(encoded):
            self.ids[i, : len(e.ids)] = e.ids
            self.types[i, : len(e.ids)] = e.type_ids

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, idx) -> dict[str, torch.Tensor]:
        idx = np.asarray(idx)
        T = int(self.lengths[idx].max())
        ids = torch.from_numpy(self.ids[idx, :T])  # (B, T); fancy indexing copies, so the set is never written
        mask = torch.from_numpy(np.arange(T)[None, :] < self.lengths[idx, None]).long()
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.from_numpy(self.types[idx, :T])}
