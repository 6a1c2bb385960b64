"""Read-only, memory-mapped access to a token store written by :mod:`encoderlab.data.prepare`.

Indices are global over the split: document ``d`` lives in one shard; its sentences are slices of
that shard's token array. Opening a store maps the files and builds two small per-document arrays;
no token is read until it is used.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


class TokenStore:
    """``TokenStore(path, split)``; pass ``tokenizer_hash`` (or a Tokenizer) to refuse a mismatch."""

    def __init__(
        self, path: str | Path, split: str = "train", *, tokenizer=None, tokenizer_hash: str | None = None
    ):
        self.path = Path(path)
        meta_file = self.path / "meta.json"
        if not meta_file.exists():
            if (self.path / "manifest.json").exists():
                raise ValueError(f"{self.path}: prepare did not finish (no meta.json); rerun it to resume")
            raise FileNotFoundError(f"{self.path} is not a token store (no meta.json)")
        if split not in ("train", "valid"):
            raise ValueError(f"split must be 'train' or 'valid', got {split!r}")
        self.meta = json.loads(meta_file.read_text())
        self.split = split
        expected = tokenizer.hash if tokenizer is not None else tokenizer_hash
        if expected is not None and expected != self.tokenizer_hash:
            raise ValueError(
                f"{self.path} was built with tokenizer {self.tokenizer_hash[:12]} but tokenizer "
                f"{expected[:12]} was given: every model in a comparison must use the store's tokenizer "
                f"({self.path / 'tokenizer'})"
            )
        self.tokens: list[np.ndarray] = []
        self.word_start: list[np.ndarray] = []
        self.sent_offsets: list[np.ndarray] = []
        doc_shard, doc_local = [], []
        for i, shard in enumerate(self.meta["shards"]):
            d = self.path / split / shard
            self.tokens.append(np.load(d / "tokens.npy", mmap_mode="r"))
            self.word_start.append(np.load(d / "word_start.npy", mmap_mode="r"))
            self.sent_offsets.append(np.load(d / "sent_offsets.npy", mmap_mode="r"))
            n_docs = len(np.load(d / "doc_offsets.npy", mmap_mode="r")) - 1
            doc_shard.append(np.full(n_docs, i, dtype=np.int32))
            doc_local.append(np.arange(n_docs, dtype=np.int64))
        self.doc_offsets = [np.load(self.path / split / s / "doc_offsets.npy") for s in self.meta["shards"]]
        self._doc_shard = np.concatenate(doc_shard) if doc_shard else np.zeros(0, np.int32)
        self._doc_local = np.concatenate(doc_local) if doc_local else np.zeros(0, np.int64)

    # ---- metadata -----------------------------------------------------------------------------
    @property
    def tokenizer_hash(self) -> str:
        return self.meta["tokenizer_hash"]

    @property
    def tokenizer_dir(self) -> Path:
        return self.path / "tokenizer"

    @property
    def vocab_size(self) -> int:
        return self.meta["vocab_size"]

    @property
    def special_ids(self) -> dict[str, int]:
        return self.meta["special_ids"]

    @property
    def num_documents(self) -> int:
        return len(self._doc_shard)

    @property
    def num_sentences(self) -> int:
        return self.meta["counts"][self.split]["sentences"]

    @property
    def num_tokens(self) -> int:
        return self.meta["counts"][self.split]["tokens"]

    def __len__(self) -> int:
        return self.num_documents

    # ---- documents ----------------------------------------------------------------------------
    def _locate(self, doc: int) -> tuple[int, int, int]:
        """(shard, first sentence, end sentence) of a global document index."""
        if not 0 <= doc < self.num_documents:
            raise IndexError(f"document {doc} out of range [0, {self.num_documents})")
        s, local = int(self._doc_shard[doc]), int(self._doc_local[doc])
        return s, int(self.doc_offsets[s][local]), int(self.doc_offsets[s][local + 1])

    def sentence_lengths(self, doc: int) -> np.ndarray:
        s, a, b = self._locate(doc)
        return np.diff(self.sent_offsets[s][a : b + 1])  # (S_doc,)

    def document_tokens(self, doc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tokens (N,), word_start (N,), sentence offsets (S_doc+1,) starting at 0) of one document."""
        s, a, b = self._locate(doc)
        offs = np.asarray(self.sent_offsets[s][a : b + 1])
        lo, hi = int(offs[0]), int(offs[-1])
        return self.tokens[s][lo:hi], self.word_start[s][lo:hi], offs - lo

    def document(self, doc: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The document as sentences: a list of (token ids (L,), word_start (L,))."""
        toks, ws, offs = self.document_tokens(doc)
        return [(toks[offs[i] : offs[i + 1]], ws[offs[i] : offs[i + 1]]) for i in range(len(offs) - 1)]

    def document_lengths(self) -> np.ndarray:
        """(D,) tokens per document, in global order."""
        out = []
        for s, doc_offs in enumerate(self.doc_offsets):
            sent = np.asarray(self.sent_offsets[s])
            out.append(np.diff(sent[doc_offs]))
        return np.concatenate(out) if out else np.zeros(0, np.int64)
