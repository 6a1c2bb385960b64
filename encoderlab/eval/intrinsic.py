"""Intrinsic evaluation: MLM pseudo-log-likelihood and pseudo-perplexity (Salazar et al. 2020),
minimal pairs (BLiMP format), fill-mask and replaced-token detection.

PLL(W) = sum_t log P(w_t | W with w_t masked), over the non-special tokens of W; one masked copy of
the sentence per token. It is batched across sentences: copies of sentences of similar length
share a batch, and the MLM head is evaluated only at the one masked position of each copy
(the sparse head), so a batch of R copies costs one encoder pass and an (R, V) output product.
Pseudo-perplexity of a corpus = exp(-sum PLL / number of scored tokens).

An ELECTRA discriminator scores a sentence by its summed log-probability that every token is
original: sum_t log sigmoid(-logit_t); one pass per sentence.

A network trained only causally (objective kind clm) scores a sentence by its log-likelihood left to
right: LL(W) = sum_t log P(w_t | w_<t), the output at t - 1 under the causal mask it trained with
predicting w_t, over the same non-special tokens ([CLS] stands where a causal LM's BOS would). Its
PLL would measure a network it never was: every position it trained on saw only its left context.

Shape letters: B batch (masked copies), T length, V vocabulary, M scored positions.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.data.tokenizer import Tokenizer
from encoderlab.eval.common import collate
from encoderlab.eval.tasks import TaskDataError, iter_jsonl
from encoderlab.models.networks import Discriminator, EncoderModel, MaskedLM
from encoderlab.models.pairs import ElectraPair, deployed
from encoderlab.objectives.causal import attention_masks, head_positions, next_token_positions
from encoderlab.precision import autocast


class NoSuchHeadError(ValueError):
    """The checkpoint lacks the head a command needs (an MLM head for fill, an RTD head for detect)."""


def mlm_network(model: nn.Module) -> MaskedLM:
    """The MLM of a checkpoint: an ELECTRA pair's generator, else the deployed network when it is one."""
    if isinstance(model, ElectraPair):
        return model.generator
    net = deployed(model)
    if isinstance(net, MaskedLM):
        return net
    if isinstance(net, Discriminator):
        raise NoSuchHeadError("this checkpoint is an ELECTRA discriminator only: it has no MLM head, so it cannot "
                              "fill in or score masked tokens. Use `encoderlab detect` with it, or load the ELECTRA "
                              "pair checkpoint (generator + discriminator) for MLM scoring.")
    if isinstance(net, EncoderModel):
        raise NoSuchHeadError("this checkpoint is a bare encoder (e.g. transformers' BertModel, as in "
                              "sentence-transformers models) with no MLM head: it cannot fill in masked tokens. "
                              "Use a checkpoint with an MLM head (BertForMaskedLM / BertForPreTraining / "
                              "ElectraForMaskedLM, or an encoderlab mlm, pretraining or electra checkpoint).")
    raise NoSuchHeadError(f"a {type(net).__name__} has no MLM head: fill and PLL need an MLM checkpoint")


def discriminator_network(model: nn.Module) -> Discriminator:
    """The discriminator of a checkpoint: the deployed network of an ELECTRA pair or checkpoint."""
    net = deployed(model)
    if isinstance(net, Discriminator):
        return net
    raise NoSuchHeadError(f"this checkpoint ({type(model).__name__}, family {model.config.family}) has no "
                          "replaced-token-detection head: detect needs an ELECTRA discriminator or pair checkpoint")


# ---- pseudo-log-likelihood ---------------------------------------------------------------------
@torch.no_grad()
def pseudo_log_likelihoods(model: nn.Module, tok: Tokenizer, texts: list[str], *, batch_size: int = 128,
                           max_length: int = 128, precision: str = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """(PLL per text, number of scored tokens per text). ``batch_size`` counts masked copies."""
    mlm = mlm_network(model)
    mlm.eval()
    if tok.mask_id is None:
        raise ValueError(f"tokenizer {tok.source} has no mask token")
    enc = tok.encode_inputs(texts, max_length=min(max_length, mlm.encoder.config.max_position_embeddings))
    order = sorted(range(len(enc)), key=lambda s: len(enc[s].ids))  # similar lengths share batches
    jobs = [(s, p) for s in order for p, special in enumerate(enc[s].special) if not special]
    pll = np.zeros(len(texts), dtype=np.float64)
    counts = np.array([sum(not x for x in e.special) for e in enc])
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        batch = collate([enc[s] for s, _ in chunk], tok.pad_id)
        T = batch["input_ids"].shape[1]
        rows = torch.arange(len(chunk))
        pos = torch.tensor([p for _, p in chunk])
        target = batch["input_ids"][rows, pos].clone()  # (B,)
        batch["input_ids"][rows, pos] = tok.mask_id
        with autocast(precision, "cpu"):
            logits = mlm(**batch, positions=rows * T + pos).logits  # (B, V): one position per copy
        logp = F.log_softmax(logits.float(), -1)[rows, target]
        np.add.at(pll, [s for s, _ in chunk], logp.numpy().astype(np.float64))
    return pll, counts


@torch.no_grad()
def causal_log_likelihoods(model: nn.Module, tok: Tokenizer, texts: list[str], *, batch_size: int = 64,
                           max_length: int = 128, precision: str = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """(log-likelihood left to right per text, number of scored tokens per text) of a causally trained
    MLM network (objective kind clm): each non-special token from the output one position before it,
    under the causal mask (objectives/causal.py)."""

    mlm = mlm_network(model)
    mlm.eval()
    enc = tok.encode_inputs(texts, max_length=min(max_length, mlm.encoder.config.max_position_embeddings))
    out = np.zeros(len(texts), dtype=np.float64)
    counts = np.array([sum(not x for x in e.special) for e in enc])
    order = sorted(range(len(enc)), key=lambda s: len(enc[s].ids))  # similar lengths share batches
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate([enc[s] for s in idx], tok.pad_id)
        ids, am = batch["input_ids"], batch["attention_mask"]  # (B, T)
        B, T = ids.shape
        scored = torch.zeros_like(ids, dtype=torch.bool)  # (B, T) the non-special tokens
        for i, s in enumerate(idx):
            scored[i, : len(enc[s].ids)] = ~torch.tensor(enc[s].special)
        rows = torch.ones(B, dtype=torch.bool)
        read = next_token_positions(ids, am, rows)  # (P,) flat b * T + t whose next token is real
        read = read[scored.view(-1)[read + 1]]  # only predictions of non-special tokens
        with autocast(precision, "cpu"):
            logits = mlm(ids, attention_masks(am, rows), batch.get("token_type_ids"),
                         positions=head_positions(mlm, read)).logits  # (P, V)
        logp = F.log_softmax(logits.float(), -1).gather(1, ids.view(-1)[read + 1][:, None])[:, 0]  # (P,)
        np.add.at(out, [idx[int(b)] for b in read // T], logp.numpy().astype(np.float64))
    return out, counts


def pseudo_perplexity(model: nn.Module, tok: Tokenizer, texts: list[str], **kw) -> dict:
    """Corpus pseudo-perplexity: exp(-sum PLL / scored tokens), with the PLL sum and counts."""
    pll, n = pseudo_log_likelihoods(model, tok, texts, **kw)
    total, tokens = float(pll.sum()), int(n.sum())
    return {"pseudo_perplexity": float(np.exp(-total / max(tokens, 1))), "pll": total, "tokens": tokens,
            "sentences": len(texts)}


@torch.no_grad()
def discriminator_log_original(model: nn.Module, tok: Tokenizer, texts: list[str], *, batch_size: int = 64,
                               max_length: int = 128, precision: str = "fp32") -> np.ndarray:
    """Per text: sum over its non-special tokens of log P(original) = log sigmoid(-logit)."""
    disc = discriminator_network(model)
    disc.eval()
    enc = tok.encode_inputs(texts, max_length=min(max_length, disc.encoder.config.max_position_embeddings))
    out = np.zeros(len(texts))
    for start in range(0, len(enc), batch_size):
        chunk = enc[start : start + batch_size]
        batch = collate(chunk, tok.pad_id)
        with autocast(precision, "cpu"):
            logits = disc(**batch).float()  # (B, T)
        keep = torch.zeros_like(logits, dtype=torch.bool)
        for i, e in enumerate(chunk):
            keep[i, : len(e.ids)] = ~torch.tensor(e.special)
        out[start : start + len(chunk)] = (F.logsigmoid(-logits) * keep).sum(1).numpy()
    return out


# ---- minimal pairs -------------------------------------------------------------------------------
def read_minimal_pairs(path: str | Path) -> list[dict]:
    path = Path(path)
    pairs = []
    for line, obj in iter_jsonl(path):
        for key in ("sentence_good", "sentence_bad"):
            if not str(obj.get(key) or "").strip():
                raise TaskDataError(f"{path}:{line}: missing or empty {key!r}")
        pairs.append(obj)
    if not pairs:
        raise TaskDataError(f"{path}: no minimal pairs")
    return pairs


def minimal_pairs_accuracy(model: nn.Module, tok: Tokenizer, path: str | Path, *, method: str = "auto",
                           **kw) -> dict:
    """Accuracy of scoring sentence_good above sentence_bad, overall, per UID and per phenomenon.

    method: "mlm" (PLL; MLMs and an ELECTRA pair's generator), "discriminator" (summed log P(original)),
    "causal" (log-likelihood left to right: a network pretrained with objective kind clm), or "auto":
    the discriminator for ELECTRA checkpoints, else the MLM. A tie counts as wrong.
    """
    pairs = read_minimal_pairs(path)
    if method == "auto":
        method = "discriminator" if isinstance(deployed(model), Discriminator) else "mlm"
    texts = [p["sentence_good"] for p in pairs] + [p["sentence_bad"] for p in pairs]
    if method == "mlm":
        scores = pseudo_log_likelihoods(model, tok, texts, **kw)[0]
    elif method == "discriminator":
        scores = discriminator_log_original(model, tok, texts, **kw)
    elif method == "causal":
        scores = causal_log_likelihoods(model, tok, texts, **kw)[0]
    else:
        raise ValueError(f"method {method!r} is not one of auto, mlm, discriminator, causal")
    n = len(pairs)
    correct = scores[:n] > scores[n:]
    groups: dict[str, dict[str, list[bool]]] = {"by_uid": collections.defaultdict(list),
                                                "by_phenomenon": collections.defaultdict(list)}
    for p, c in zip(pairs, correct):
        groups["by_uid"][str(p.get("UID", "all"))].append(bool(c))
        phen = p.get("linguistics_term") or p.get("phenomenon") or p.get("field")
        if phen:
            groups["by_phenomenon"][str(phen)].append(bool(c))
    out = {"accuracy": float(correct.mean()), "n": n, "method": method}
    for name, g in groups.items():
        out[name] = {k: {"accuracy": float(np.mean(v)), "n": len(v)} for k, v in sorted(g.items())}
    return out


# ---- fill-mask and detection ---------------------------------------------------------------------
@torch.no_grad()
def fill_mask(model: nn.Module, tok: Tokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For every mask token in ``text``: the top-k (token, probability)."""
    mlm = mlm_network(model)
    mlm.eval()
    if tok.mask_token and "[MASK]" in text and tok.mask_token != "[MASK]":
        text = text.replace("[MASK]", tok.mask_token)
    e = tok.encode_input(text, max_length=mlm.encoder.config.max_position_embeddings)
    where = [i for i, t in enumerate(e.ids) if t == tok.mask_id]
    if not where:
        raise ValueError(f"no {tok.mask_token or '[MASK]'} token in {text!r}")
    batch = collate([e], tok.pad_id)
    probs = F.softmax(mlm(**batch, positions=torch.tensor(where)).logits.float(), -1)  # (M, V)
    top = probs.topk(min(top_k, probs.shape[-1]), -1)
    return [[(tok.id_to_token(int(i)), float(p)) for p, i in zip(ps, ids)] for ps, ids in zip(top.values, top.indices)]


@torch.no_grad()
def detect_replaced(model: nn.Module, tok: Tokenizer, text: str) -> list[tuple[str, float]]:
    """The discriminator's probability that each (non-special) token was replaced."""
    disc = discriminator_network(model)
    disc.eval()
    e = tok.encode_input(text, max_length=disc.encoder.config.max_position_embeddings)
    probs = torch.sigmoid(disc(**collate([e], tok.pad_id)).float())[0]  # (T,)
    return [(t, float(p)) for t, p, s in zip(e.tokens, probs, e.special) if not s]


def format_detection(result: list[tuple[str, float]], threshold: float = 0.5) -> str:
    """The text with likely-replaced tokens marked >>like this<<, then one bar per token."""
    marked = " ".join(f">>{t}<<" if p >= threshold else t for t, p in result)
    width = max(len(t) for t, _ in result)
    bars = [f"  {t:<{width}}  {p:6.3f}  {'#' * round(p * 20)}" for t, p in result]
    return "\n".join([marked, f"  (>>token<<: P(replaced) >= {threshold})", *bars])
