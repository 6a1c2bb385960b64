"""Scores of generated text against one reference: exact match, token-overlap F1 and ROUGE-L.

All three compare SQuAD-normalized tokens (Rajpurkar et al. 2016, the official evaluation script):
lowercase, punctuation removed, the articles a/an/the removed, whitespace split. Exact match and F1
are that script's; ROUGE-L is the F-measure (beta = 1) of the longest common subsequence of the two
token lists (Lin 2004), as ``rouge_score``'s ``rougeL`` reports it, but over SQuAD's tokens
rather than its own tokenizer's. Each is in [0, 1]; a corpus score is the mean over examples.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize(prediction) == normalize(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's F1 of the bag of tokens; 1 when both are empty after normalization, 0 when one is."""
    p, r = normalize(prediction).split(), normalize(reference).split()
    if not p or not r:
        return float(p == r)
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, one row at a time)."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev_diag = 0
        for j, y in enumerate(b, 1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge_l(prediction: str, reference: str) -> float:
    p, r = normalize(prediction).split(), normalize(reference).split()
    if not p or not r:
        return float(p == r)
    lcs = lcs_length(p, r)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(r)
    return 2 * precision * recall / (precision + recall)


METRICS = {"exact_match": exact_match, "f1": token_f1, "rouge_l": rouge_l}


def score(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Each metric's mean over the examples."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not references:
        return {name: float("nan") for name in METRICS}
    return {name: sum(f(p, r) for p, r in zip(predictions, references)) / len(references)
            for name, f in METRICS.items()}
