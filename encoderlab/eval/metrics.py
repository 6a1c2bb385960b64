"""Task metrics in plain numpy (no scikit-learn / scipy at run time; tests compare against both).

GLUE's official metrics: Matthews correlation (CoLA), accuracy, binary F1 of the positive class
(MRPC, QQP), Pearson and Spearman correlation (STS-B). A task's GLUE score is the mean of its
metrics (MRPC: (F1 + acc) / 2, STS-B: (Pearson + Spearman) / 2), as on the GLUE leaderboard.
"""

from __future__ import annotations

import numpy as np


def accuracy(pred, gold) -> float:
    pred, gold = np.asarray(pred), np.asarray(gold)
    return float((pred == gold).mean()) if len(gold) else float("nan")


def f1_binary(pred, gold, positive: int = 1) -> float:
    pred, gold = np.asarray(pred) == positive, np.asarray(gold) == positive
    tp = float(np.sum(pred & gold))
    fp = float(np.sum(pred & ~gold))
    fn = float(np.sum(~pred & gold))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(pred, gold) -> float:
    """Multi-class MCC (Gorodkin's R_K), equal to the binary formula for two classes; 0 when undefined."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    labels = np.union1d(pred, gold)
    idx = {v: i for i, v in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)), dtype=np.float64)
    for p, g in zip(pred, gold):
        cm[idx[g], idx[p]] += 1
    t, p = cm.sum(1), cm.sum(0)  # true and predicted counts per class
    c, s = np.trace(cm), cm.sum()
    denom = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return 0.0 if denom == 0 else float((c * s - t @ p) / denom)


def pearson(x, y) -> float:
    """Pearson's r; 0 when undefined (a constant side: a regression fine-tuning that collapsed to one
    value), as MCC is 0 for one predicted class, so that such a seed scores the floor, not NaN."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x @ x) * (y @ y))
    return 0.0 if denom == 0 else float(x @ y / denom)


def rankdata(x) -> np.ndarray:
    """Ranks from 1, ties given their average rank (scipy.stats.rankdata's default)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x, y) -> float:
    return pearson(rankdata(x), rankdata(y))


METRICS = {"acc": accuracy, "f1": f1_binary, "mcc": matthews_corrcoef, "pearson": pearson, "spearman": spearman}


def compute(names, pred, gold) -> dict[str, float]:
    """Each named metric on predictions (class ids or regression values) and gold labels."""
    return {n: METRICS[n](pred, gold) for n in names}


def task_score(scores: dict[str, float]) -> float:
    """A task's single GLUE number: the mean of its metrics."""
    return float(np.mean(list(scores.values())))
