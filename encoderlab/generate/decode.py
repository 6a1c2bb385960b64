"""Decoding a UniLM-style seq2seq MLM: greedy and beam search.

At each step a [MASK] is appended after the target so far and the MLM's prediction there is the
next token's distribution; decoding stops at [SEP] or after ``max_length`` tokens. The whole
sequence is recomputed each step (no cache of keys and values): titles are a few tokens long, and
an earlier position's token changes from [MASK] to its prediction, so a cache would need that
position recomputed anyway.

The searches are written over a step function, ``step(rows, prefixes) -> log-probs``, so that they
are tested on hand-made distributions as well as on models:

- greedy: the most probable token at each step;
- beam search (as in transformers' ``num_beams`` with early stopping): the 2K best extensions of
  the K live hypotheses are ranked; among the first K of them, one that ends with [SEP] is
  finished, and live hypotheses are filled from the ranking (skipping [SEP]) up to K. An example
  stops when it has K finished hypotheses; at ``max_length`` the live ones are kept unfinished.
  The result is the finished hypothesis with the best log p / length ** length_penalty (length
  counting [SEP]). With K=1 this is exactly greedy (tested).

Neither is guaranteed to find the most probable sequence; beam search is not guaranteed to beat
greedy either (the greedy prefix can fall out of the beam), though it usually does.

Shape letters: R rows (live hypotheses), t target tokens so far, S padded source part, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from encoderlab.errors import DataError
from encoderlab.generate.model import SOURCE, TARGET, hidden_states
from encoderlab.precision import autocast
from encoderlab.tune.data import length_batches

StepFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # rows (R,), prefixes (R, t) -> (R, V)


@dataclass
class Hypothesis:
    tokens: list[int]  # without the final [SEP]
    score: float  # sum of the log-probabilities of the tokens, [SEP] included when finished
    finished: bool  # ended with [SEP] (else cut at max_length)

    def normalized(self, length_penalty: float) -> float:
        return self.score / max(1, len(self.tokens) + self.finished) ** length_penalty


def _no_early_eos(logp: torch.Tensor, t: int, eos: int, min_length: int) -> torch.Tensor:
    if t < min_length:
        logp = logp.clone()
        logp[:, eos] = float("-inf")
    return logp


def greedy(step: StepFn, n: int, *, eos: int, max_length: int, min_length: int = 1) -> list[Hypothesis]:
    """The most probable token at each step, for examples 0..n-1."""
    out: list[Hypothesis | None] = [None] * n
    rows = torch.arange(n)  # examples still running
    prefix = torch.zeros(n, 0, dtype=torch.long)  # (R, t)
    scores = torch.zeros(n, dtype=torch.float64)
    for t in range(max_length):
        logp = _no_early_eos(step(rows, prefix), t, eos, min_length)  # (R, V)
        best, token = logp.max(-1)
        scores = scores + best.double().cpu()
        token = token.cpu()
        ended = token == eos
        for r in ended.nonzero().flatten().tolist():
            out[int(rows[r])] = Hypothesis(prefix[r].tolist(), float(scores[r]), True)
        keep = ~ended
        rows, prefix, scores = rows[keep], torch.cat([prefix, token[:, None]], 1)[keep], scores[keep]
        if len(rows) == 0:
            break
    for r in range(len(rows)):  # cut at max_length
        out[int(rows[r])] = Hypothesis(prefix[r].tolist(), float(scores[r]), False)
    return out


def beam_search(step: StepFn, n: int, *, beam: int, eos: int, max_length: int, length_penalty: float = 1.0,
                min_length: int = 1) -> list[Hypothesis]:
    """The best of ``beam`` hypotheses per example by normalized score (see the module doc)."""
    finished: list[list[Hypothesis]] = [[] for _ in range(n)]
    # Live hypotheses, flat: the example of each row, its tokens and its score.
    rows = torch.arange(n)
    prefix = torch.zeros(n, 0, dtype=torch.long)  # (R, t)
    scores = torch.zeros(n, dtype=torch.float64)  # one live hypothesis per example at the start
    for t in range(max_length):
        logp = _no_early_eos(step(rows, prefix), t, eos, min_length).double().cpu()  # (R, V)
        V = logp.shape[1]
        total = scores[:, None] + logp  # (R, V)
        next_rows, next_prefix, next_scores = [], [], []
        for ex in rows.unique(sorted=True).tolist():
            mine = (rows == ex).nonzero().flatten()  # this example's live rows
            cand = total[mine].flatten()
            top, idx = cand.topk(min(2 * beam, len(cand)))
            kept = 0
            for rank, (s, i) in enumerate(zip(top.tolist(), idx.tolist())):
                if s == float("-inf") or kept == beam:
                    break
                src, token = int(mine[i // V]), i % V
                if token == eos:
                    if rank < beam:  # transformers: a [SEP] ranked below the first K is dropped
                        finished[ex].append(Hypothesis(prefix[src].tolist(), s, True))
                    continue
                next_rows.append(ex)
                next_prefix.append(torch.cat([prefix[src], torch.tensor([token])]))
                next_scores.append(s)
                kept += 1
            if len(finished[ex]) >= beam:  # done: drop its live rows
                while next_rows and next_rows[-1] == ex:
                    next_rows.pop(), next_prefix.pop(), next_scores.pop()
        if not next_rows:
            break
        rows = torch.tensor(next_rows)
        prefix = torch.stack(next_prefix)
        scores = torch.tensor(next_scores, dtype=torch.float64)
    else:  # max_length reached: the live hypotheses compete unfinished
        for r, ex in enumerate(rows.tolist()):
            finished[ex].append(Hypothesis(prefix[r].tolist(), float(scores[r]), False))
    return [max(hs, key=lambda h: h.normalized(length_penalty)) for hs in finished]


# ---- the model's step function -------------------------------------------------------------------
class ModelStep:
    """``step(rows, prefixes)`` for a seq2seq MLM and a batch of encoded sources: the log-probs of
    the token at an appended [MASK] (decoding "mask"), or read at the last token so far (decoding
    "next": the source's [SEP] before the first target token), special tokens other than [SEP]
    excluded (renormalized)."""

    def __init__(self, model, sources: list[list[int]], *, cls_id: int, sep_id: int, mask_id: int, pad_id: int,
                 forbidden: list[int], precision: str = "fp32", decoding: str = "mask"):
        self.model = model
        self.device = next(model.parameters()).device
        self.precision = precision
        S = max(len(s) for s in sources) + 2
        self.source_ids = torch.full((len(sources), S), pad_id, dtype=torch.long)  # (n, S)
        self.source_real = torch.zeros_like(self.source_ids)
        for i, s in enumerate(sources):
            self.source_ids[i, : len(s) + 2] = torch.tensor([cls_id, *s, sep_id])
            self.source_real[i, : len(s) + 2] = 1
        self.source_ids, self.source_real = self.source_ids.to(self.device), self.source_real.to(self.device)
        self.mask_id = mask_id
        self.next_token = decoding == "next"
        self.source_sep = torch.tensor([len(s) + 1 for s in sources], device=self.device)  # (n,)
        self.forbidden = torch.tensor(sorted(forbidden), dtype=torch.long, device=self.device)

    @torch.no_grad()
    def __call__(self, rows: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        rows = rows.to(self.device)
        R, t = prefix.shape
        target = prefix.to(self.device)  # (R, t)
        if not self.next_token:
            target = torch.cat([target, torch.full((R, 1), self.mask_id, device=self.device)], 1)
        ids = torch.cat([self.source_ids[rows], target], 1)  # (R, S + t [+ 1])
        real = torch.cat([self.source_real[rows], torch.ones_like(target)], 1)
        segments = torch.cat([torch.full_like(self.source_ids[rows], SOURCE), torch.full_like(target, TARGET)], 1)
        with autocast(self.precision, self.device):
            hidden = hidden_states(self.model.encoder, ids, segments, real)  # (R, S + t [+ 1], H)
            if self.next_token and t == 0:  # the source's [SEP], before its padding
                last = hidden[torch.arange(R, device=self.device), self.source_sep[rows]]  # (R, H)
            else:
                last = hidden[:, -1]
            logits = self.model.mlm_head(last)  # (R, V)
        logits = logits.float()
        logits[:, self.forbidden] = float("-inf")
        return logits.log_softmax(-1)


# ---- texts in, texts out -------------------------------------------------------------------------
@dataclass
class Decoded:
    text: str
    hypothesis: Hypothesis


def special_ids(tok) -> dict[str, int]:
    """The ids decoding needs; a tokenizer without [MASK] cannot decode this way."""
    if tok.mask_id is None:
        raise DataError(f"{tok.source or 'tokenizer'}: no [MASK] token: UniLM-style decoding predicts at an "
                        "appended [MASK]")
    return {"cls_id": tok.cls_id, "sep_id": tok.sep_id, "mask_id": tok.mask_id, "pad_id": tok.pad_id}


def generate(model, tok, sources: list[str], *, beam: int, max_source_length: int, max_length: int,
             length_penalty: float = 1.0, batch_size: int = 64, precision: str = "fp32",
             decoding: str = "mask") -> list[Decoded]:
    """Decode each source text (truncated to ``max_source_length`` tokens): greedy when beam == 1;
    ``decoding`` as the model was fine-tuned (GenerationConfig.decoding)."""
    ids = special_ids(tok)
    encoded = [s[:max_source_length] for s in tok.encode_batch(list(sources))]
    # Specials other than [SEP], and ids past the tokenizer's vocabulary (a model's table may be larger).
    V = model.mlm_head.bias.shape[0]
    forbidden = [i for i in tok.special_ids if i != tok.sep_id] + list(range(tok.vocab_size, V))
    model.eval()
    out: list[Decoded | None] = [None] * len(sources)
    for idx in length_batches([len(e) for e in encoded], batch_size, None):  # similar lengths together
        step = ModelStep(model, [encoded[i] for i in idx], forbidden=forbidden, precision=precision,
                         decoding=decoding, **ids)
        if beam == 1:
            hyps = greedy(step, len(idx), eos=tok.sep_id, max_length=max_length)
        else:
            hyps = beam_search(step, len(idx), beam=beam, eos=tok.sep_id, max_length=max_length,
                               length_penalty=length_penalty)
        for i, h in zip(idx, hyps):
            out[i] = Decoded(tok.decode(h.tokens), h)
    return out
