"""Example builders over a :class:`TokenStore`: packed full sentences (MLM, ELECTRA) and pairs (NSP, SOP).

Every example is a dict of numpy arrays, T = sequence length:

- ``input_ids`` (T,) int64, ``token_type_ids`` (T,) int64, ``attention_mask`` (T,) int64 (1 = real);
- ``word_start`` (T,) bool: True where a word begins (whole-word masking keeps words together);
- ``sentence_label`` () int64, pairs only. NSP: 0 = B continues A, 1 = B is random (HF
  ``next_sentence_label``). SOP: 0 = original order, 1 = swapped (HF ``sentence_order_label``).

Packing (RoBERTa FULL-SENTENCES): documents are laid end to end with a [SEP] after each one, and
example i is window i of length T-2 of that stream, framed as [CLS] ... [SEP]. Windows cut through
sentences and documents, so every position is a real token; the window grid is shifted by an
epoch-dependent offset so each epoch sees different examples. Example i is computed directly from
i (no pass over the data), which makes shuffling and exact resume cheap.

Pairs follow BERT's ``create_instances_from_document``: sentences are gathered up to a target length
(with probability ``short_seq_prob`` a random shorter one), split at a random sentence into A and
B, and truncated from a random end. For SOP a one-sentence chunk is split inside the sentence
(ALBERT would fall back to a random segment, which leaks an NSP signal into SOP).
"""

from __future__ import annotations

import numpy as np

from encoderlab.data.store import TokenStore


class PackedExamples:
    """Full-sentence packed windows; ``example(i, epoch)`` for ``i < num_examples(epoch)``."""

    def __init__(self, store: TokenStore, seq_len: int, seed: int = 0):
        if seq_len < 8:
            raise ValueError(f"seq_len must be >= 8, got {seq_len}")
        self.store, self.seq_len, self.seed = store, seq_len, seed
        self.window = seq_len - 2
        ids = store.special_ids
        self.cls_id, self.sep_id = ids["cls"], ids["sep"]
        # per shard: the exclusive end of each document in the stream, its [SEP] included
        self.doc_ends: list[np.ndarray] = []
        for s, doc_offs in enumerate(store.doc_offsets):
            tok_ends = np.asarray(store.sent_offsets[s])[doc_offs[1:]]  # (D_s,)
            self.doc_ends.append(tok_ends + np.arange(1, len(tok_ends) + 1))
        sizes = [int(e[-1]) if len(e) else 0 for e in self.doc_ends]
        self.shard_starts = np.concatenate([[0], np.cumsum(sizes)])  # (S+1,)
        self.stream_len = int(self.shard_starts[-1])

    def shift(self, epoch: int) -> int:
        return int(np.random.default_rng([self.seed, epoch, 7]).integers(self.window)) if epoch else 0

    def num_examples(self, epoch: int = 0) -> int:
        return max(0, (self.stream_len - self.shift(epoch)) // self.window)

    def example(self, i: int, epoch: int = 0) -> dict[str, np.ndarray]:
        start = self.shift(epoch) + i * self.window
        ids, ws = self._stream(start, start + self.window)
        T = self.seq_len
        input_ids = np.empty(T, dtype=np.int64)
        input_ids[0], input_ids[1:-1], input_ids[-1] = self.cls_id, ids, self.sep_id
        word_start = np.ones(T, dtype=bool)
        word_start[1:-1] = ws
        return {
            "input_ids": input_ids,
            "token_type_ids": np.zeros(T, dtype=np.int64),
            "attention_mask": np.ones(T, dtype=np.int64),
            "word_start": word_start,
        }

    def _stream(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and word starts of stream positions [lo, hi), across shard boundaries."""
        ids, ws = [], []
        s = int(np.searchsorted(self.shard_starts, lo, side="right")) - 1
        while lo < hi:
            end = min(hi, int(self.shard_starts[s + 1]))
            q = np.arange(lo - self.shard_starts[s], end - self.shard_starts[s])  # (n,) stream pos in shard
            doc = np.searchsorted(self.doc_ends[s], q, side="right")  # (n,) document of each position
            is_sep = q == self.doc_ends[s][doc] - 1
            tok = np.where(is_sep, 0, q - doc)  # each earlier document added one [SEP] to the stream
            ids.append(np.where(is_sep, self.sep_id, self.store.tokens[s][tok]))
            ws.append(np.where(is_sep, True, self.store.word_start[s][tok]))
            lo, s = end, s + 1
        return np.concatenate(ids), np.concatenate(ws)


class PairExamples:
    """NSP or SOP sentence pairs; ``from_documents(doc_ids, rng)`` builds all pairs of those documents."""

    def __init__(self, store: TokenStore, seq_len: int, kind: str, short_seq_prob: float = 0.1):
        if kind not in ("nsp", "sop"):
            raise ValueError(f"pair kind must be 'nsp' or 'sop', got {kind!r}")
        if seq_len < 8:
            raise ValueError(f"seq_len must be >= 8, got {seq_len}")
        self.store, self.seq_len, self.kind, self.short_seq_prob = store, seq_len, kind, short_seq_prob
        ids = store.special_ids
        self.cls_id, self.sep_id, self.pad_id = ids["cls"], ids["sep"], ids["pad"]

    def from_documents(self, doc_ids, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
        out = []
        for d in doc_ids:
            out.extend(self._document(int(d), rng))
        return out

    def _document(self, d: int, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
        sents = self.store.document(d)
        max_tokens = self.seq_len - 3  # [CLS] A [SEP] B [SEP]
        target = max_tokens
        if rng.random() < self.short_seq_prob:
            target = int(rng.integers(2, max_tokens + 1))
        out, chunk, length, i = [], [], 0, 0
        while i < len(sents):
            chunk.append(sents[i])
            length += len(sents[i][0])
            if i == len(sents) - 1 or length >= target:
                pair = self._pair(d, chunk, target, rng)
                if pair is not None:
                    a, b, label, unused = pair
                    i -= unused  # sentences not used by a random-next pair are used again
                    out.append(self._frame(a, b, label, max_tokens, rng))
                chunk, length = [], 0
            i += 1
        return out

    def _pair(self, d, chunk, target, rng):
        """(A, B, label, unused sentences) from a chunk of (ids, word_start) sentences, or None."""
        a_end = 1 if len(chunk) < 2 else int(rng.integers(1, len(chunk)))
        a = _join(chunk[:a_end])
        if self.kind == "nsp":
            if len(chunk) == 1 or rng.random() < 0.5:
                b = self._random_segment(d, max(1, target - len(a[0])), rng)
                if b is None:
                    return None
                return a, b, 1, len(chunk) - a_end
            return a, _join(chunk[a_end:]), 0, 0
        if len(chunk) == 1:  # SOP needs two segments: cut the single sentence
            ids, ws = a
            if len(ids) < 2:
                return None
            cut = int(rng.integers(1, len(ids)))
            a, b = (ids[:cut], ws[:cut]), (ids[cut:], ws[cut:])
        else:
            b = _join(chunk[a_end:])
        if rng.random() < 0.5:
            return b, a, 1, 0
        return a, b, 0, 0

    def _random_segment(self, d, target_b, rng):
        n = self.store.num_documents
        if n < 2:
            return None
        r = d
        while r == d:
            r = int(rng.integers(n))
        sents = self.store.document(r)
        start = int(rng.integers(len(sents)))
        picked, length = [], 0
        for s in sents[start:]:
            picked.append(s)
            length += len(s[0])
            if length >= target_b:
                break
        return _join(picked)

    def _frame(self, a, b, label, max_tokens, rng) -> dict[str, np.ndarray]:
        (a_ids, a_ws), (b_ids, b_ws) = _truncate(a, b, max_tokens, rng)
        T, na, nb = self.seq_len, len(a_ids), len(b_ids)
        n = na + nb + 3
        input_ids = np.full(T, self.pad_id, dtype=np.int64)
        input_ids[0], input_ids[na + 1], input_ids[n - 1] = self.cls_id, self.sep_id, self.sep_id
        input_ids[1 : na + 1], input_ids[na + 2 : n - 1] = a_ids, b_ids
        word_start = np.zeros(T, dtype=bool)
        word_start[:n] = True
        word_start[1 : na + 1], word_start[na + 2 : n - 1] = a_ws, b_ws
        token_type_ids = np.zeros(T, dtype=np.int64)
        token_type_ids[na + 2 : n] = 1
        attention_mask = np.zeros(T, dtype=np.int64)
        attention_mask[:n] = 1
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": attention_mask,
            "word_start": word_start,
            "sentence_label": np.int64(label),
        }


def _join(sentences):
    if len(sentences) == 1:
        return sentences[0]
    return np.concatenate([s[0] for s in sentences]), np.concatenate([s[1] for s in sentences])


def _truncate(a, b, max_tokens, rng):
    """Trim the longer segment, from the front or the back at random, until both fit (as BERT does)."""
    a, b = list(a), list(b)
    while len(a[0]) + len(b[0]) > max_tokens:
        longer = a if len(a[0]) >= len(b[0]) else b
        other = b if longer is a else a
        excess = len(a[0]) + len(b[0]) - max_tokens
        k = max(1, min(excess, len(longer[0]) - len(other[0])))
        if rng.random() < 0.5:
            longer[0], longer[1] = longer[0][k:], longer[1][k:]
        else:
            longer[0], longer[1] = longer[0][:-k], longer[1][:-k]
    return a, b
