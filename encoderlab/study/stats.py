"""The statistics behind every quality verdict: a hierarchical bootstrap of the difference between two
variants' scores, its 95% interval, the smallest difference the study could have detected, the
verdict rule, and Holm's adjustment across a report's comparisons.

A variant's scores on one task form a (P, S) array: P pretraining runs (seeds of the whole
pretraining: initialisation and data order) by S fine-tuning seeds. Fine-tuning seed s gives the
classifier head the same initialisation and the examples the same order in every run of every
variant whose classifier has the same shape (eval/finetune.py seeds both from s alone), so the
fine-tuning seeds are crossed with the runs: one resample of them per bootstrap draw applies to every
run of both variants, which is what pairs the comparison. Pretraining runs of two variants share
nothing beyond the seed number and are resampled independently. Tasks are fixed (the claim is about
these tasks): the aggregate is the mean over tasks of each task's mean over runs and seeds.

With one pretraining run per variant the interval covers fine-tuning noise only: it says nothing
about how much another pretraining run would move the score (docs/studies/claims-rope and
claims-rope-sentence: the same recipe, 0.438 and 0.423). With few runs (3) a bootstrap interval is
too narrow (resampling gives (n-1)/n of the unbiased variance): deviations are widened by
sqrt(n/(n-1)) at each level first, but a percentile interval from 3 runs still treats their spread as
known (no t-like widening), so it is approximate; the report says both. Simulated with no true
difference (docs/studies.md): 3 runs x 3 seeds a side, the interval excluded zero in 5.5% of 4,000
studies (5% nominal); 3 runs x 5 seeds, 7.3% of 5,000.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

DRAWS = 2000
LEVEL = 0.95
# 80% power at two-sided alpha 0.05 for a normal estimate: z_0.975 + z_0.80 = 1.96 + 0.84.
MDD_FACTOR = 2.8
RULE = ("Each comparison is the difference of the two variants' mean scores (the mean over tasks of each task's "
        "mean over pretraining runs and fine-tuning seeds), with a 95% percentile interval from a hierarchical "
        f"bootstrap ({DRAWS} draws: pretraining runs resampled per variant, fine-tuning seeds resampled once per "
        "draw and shared by both variants, which pairs them: a seed gives the same head initialisation and example "
        "order to every run; deviations widened by sqrt(n/(n-1)) at each level, so the resampled variance is the "
        "unbiased one). A directional claim holds when the interval lies above zero in the claimed direction, "
        "does not hold when it lies beyond zero in the opposite one, and is inconclusive otherwise. A claim of "
        "matching is 'equivalent within ±m' when the interval lies inside ±m (m: the study's equivalence_margin), "
        "holds (matches or beats) when the interval's lower end is above -m, and does not hold when its upper end "
        "is below -m. 'Detectable' is the smallest difference the comparison would find with 80% power at "
        f"two-sided alpha 0.05 ({MDD_FACTOR} x the bootstrap standard error). Holm's adjustment is applied to the "
        "bootstrap p-values of every comparison in the report.")
Kind = Literal["greater", "at_least"]


@dataclass(frozen=True)
class Estimate:
    """A - B: the point difference, its 95% interval, standard error, detectable difference and
    two-sided bootstrap p-value; how many pretraining runs each side had and the fine-tuning seeds."""

    diff: float
    lo: float
    hi: float
    se: float
    mdd: float
    p: float
    runs: tuple[int, int]
    finetune_seeds: int
    paired: bool

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @property
    def fine_tuning_noise_only(self) -> bool:
        return max(self.runs) == 1


def _stack(scores: dict[str, np.ndarray], tasks: list[str]) -> np.ndarray:
    """(K, P, S): the tasks' (P, S) arrays, cut to the fewest runs and seeds any task has."""
    P = min(np.shape(scores[t])[0] for t in tasks)
    S = min(np.shape(scores[t])[1] for t in tasks)
    return np.stack([np.asarray(scores[t], dtype=float)[:P, :S] for t in tasks])


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """(D, n): how often each of n indices is drawn in each row of idx (D, n), by one bincount (a
    (D, n, n) comparison would not fit for BLiMP's thousands of pairs in the place of seeds)."""
    D = idx.shape[0]
    return np.bincount((idx + n * np.arange(D)[:, None]).ravel(), minlength=D * n).reshape(D, n)


def _resampled_means(X: np.ndarray, runs: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """The mean of X (K, P, S) under each draw's resampled runs (D, P) and seeds (D, S): (D,)."""
    K, P, S = X.shape
    cr = _counts(runs, P)  # (D, P) how often each run is drawn
    cs = _counts(seeds, S)  # (D, S)
    return np.einsum("dp,ds,kps->d", cr, cs, X) / (K * P * S)


def _widened(X: np.ndarray) -> np.ndarray:
    """X (K, P, S) with its deviations widened by sqrt(n / (n - 1)) at each level (runs about the
    task mean, seeds about their run's mean): resampling n values with replacement gives a mean's
    variance (n - 1) / n of the unbiased estimate, which at 3 runs or 5 seeds is a narrow interval."""
    K, P, S = X.shape
    run = X.mean(2, keepdims=True)  # (K, P, 1)
    task = run.mean(1, keepdims=True)  # (K, 1, 1)
    cp = np.sqrt(P / (P - 1)) if P > 1 else 1.0
    cs = np.sqrt(S / (S - 1)) if S > 1 else 1.0
    return task + cp * (run - task) + cs * (X - run)


def bootstrap_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray], *, draws: int = DRAWS,
                   seed: int = 0) -> Estimate | None:
    """A - B over the tasks both have (None when none is shared or a side has no score)."""
    tasks = sorted(t for t in set(a) & set(b) if np.size(a[t]) and np.size(b[t]))
    if not tasks:
        return None
    A, B = _stack(a, tasks), _stack(b, tasks)
    diff = float(A.mean() - B.mean())
    A, B = _widened(A), _widened(B)
    rng = np.random.default_rng(seed)
    (_, Pa, Sa), (_, Pb, Sb) = A.shape, B.shape
    paired = Sa == Sb
    sa = rng.integers(0, Sa, (draws, Sa))
    sb = sa if paired else rng.integers(0, Sb, (draws, Sb))
    d = (_resampled_means(A, rng.integers(0, Pa, (draws, Pa)), sa)
         - _resampled_means(B, rng.integers(0, Pb, (draws, Pb)), sb))
    alpha = (1 - LEVEL) / 2
    lo, hi = np.quantile(d, [alpha, 1 - alpha])
    se = float(d.std(ddof=1)) if draws > 1 else 0.0
    tail = min((d <= 0).sum(), (d >= 0).sum())
    p = min(1.0, 2 * (int(tail) + 1) / (draws + 1))
    return Estimate(diff=diff, lo=float(lo), hi=float(hi), se=se, mdd=MDD_FACTOR * se, p=p,
                    runs=(Pa, Pb), finetune_seeds=min(Sa, Sb), paired=paired)


def verdict(e: Estimate | None, kind: Kind = "greater", margin: float = 0.01) -> str:
    """The rule (RULE): "greater" claims A > B; "at_least" claims A matches or beats B within ±margin."""
    if e is None:
        return "inconclusive"
    if kind == "greater":
        return "holds" if e.lo > 0 else "does not hold" if e.hi < 0 else "inconclusive"
    if e.lo > -margin:
        return f"equivalent within ±{margin:g}" if e.hi < margin else "holds"
    return "does not hold" if e.hi < -margin else "inconclusive"


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out
