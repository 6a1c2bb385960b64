"""The statistics behind every quality verdict: the difference between two variants' scores, its 95%
t interval, the smallest difference the study could have detected, the verdict rule, and Holm's
adjustment across a report's comparisons.

A variant's scores on one task form a (P, S) array: P pretraining runs (seeds of the whole pretraining:
initialisation and data order) by S fine-tuning seeds. Fine-tuning seed s gives the classifier head the
same initialisation and the examples the same order in every run of every variant whose classifier has
the same shape (eval/finetune.py seeds both from s alone), so the fine-tuning seeds are crossed with the
runs and a seed's effect common to two variants cancels in their difference. Where two variants'
classifiers differ in shape (BERT's pooler and ELECTRA's none), the seed's head initialisation differs
too and its effect is not common: it shows as the seed x variant interaction, which the estimate reads.
Pretraining run seed r is seed r of every variant (study/plan.py), and it fixes the run's data order,
its masking draws and its initialisation (train/trainer.py): runs of two variants with the same seed
number see the same batches, the same masks where their masking is configured alike and the same
initial weights where their networks have the same shapes. The run terms (components()) nonetheless
treat two variants' runs as independent, paired only where both sides are the same checkpoints. Tasks
and their dev sets are fixed (the claim is about these tasks: CoLA's 1,043 dev sentences would add
about 0.03 of sampling error to an MCC near 0, which the intervals leave out): the aggregate is the
mean over tasks of each task's mean over runs and seeds, and each side's (P, S) table of task means is
what the variance is read from.

The variance of a difference has two estimated parts (components()): how the pretraining runs differ,
from each side's run means (P - 1 degrees of freedom a side), and how the shared seeds act on the two
variants differently, from the per-seed differences (S - 1), with the run x seed residual counted once;
the interval is a t interval with Satterthwaite's degrees of freedom (capped: CARRIES). With 3 runs a
side that is about 4 degrees of freedom (t = 2.78, not 1.96). It replaced a hierarchical bootstrap whose
percentile interval treated the spread of 3 runs as known: with no true difference it excluded zero in
12% of 1,000 studies with run-to-run variance dominating and 15% with the seed x variant interaction (5%
nominal), and resampling seeds inside resampled runs counted the residual twice. Simulated with no true
difference (4,000 studies a row, 3 runs x 3 seeds, then x 5; docs/studies.md), the interval excluded
zero in 2.4% / 2.7% of studies with run variance dominating, 1.5% / 2.0% with the residual, 4.3% / 4.1%
with the seed x variant interaction, 2.6% / 2.5% balanced, 1.8% / 1.8% with 40% of scores collapsed to
0: at or under the 5% nominal in every mix, at the price of width (tests/test_study_stats.py checks the
mixes). With one pretraining run a side the interval covers fine-tuning noise only: it says nothing
about how much another pretraining run would move the score (docs/studies/claims-rope and claims-rope-
sentence: the same recipe, 0.438 and 0.423).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

LEVEL = 0.95
POWER = 0.80
# The df of a t interval is Satterthwaite's, capped at the summed df of the terms that carry 30% or
# more of the variance: at 2-4 df the approximation, fed estimated shares, let a noisy small seed term
# lift the df just when the variance was underestimated (6.6% false verdicts for 5% nominal with the
# seed x variant interaction dominating; capped, 4.3%).
CARRIES = 0.3
# A normal interval's detectable difference (80% power, two-sided 0.05): z_0.975 + z_0.80 = 1.96 + 0.84.
MDD_FACTOR = 2.8
RULE = ("Each comparison is the difference of the two variants' mean scores (the mean over tasks of each task's "
        "mean over pretraining runs and fine-tuning seeds), with a 95% t interval whose variance has the design's "
        "components (study/stats.py): how pretraining runs differ (each side's run means, or the runs' paired "
        "differences where both sides are the same checkpoints), and how the shared fine-tuning seeds act on the "
        "two variants differently (a seed gives the same head initialisation and example order to every run, so "
        "its effect common to both cancels), with Satterthwaite's degrees of freedom. A directional claim holds "
        "when the interval lies above zero in the claimed direction, does not hold when it lies beyond zero in "
        "the opposite one, and is inconclusive otherwise. A claim of matching is 'equivalent within ±m' when the "
        "interval lies inside ±m (m: the study's equivalence_margin; with a 95% interval this is two one-sided "
        "tests at 2.5% each), holds (matches or beats) when the interval's lower end is above -m, and does not "
        "hold when its upper end is below -m; a claim that A adds little over B is its mirror image (holds "
        "when the upper end is below +m). 'Detectable' is the smallest difference the comparison would find "
        "with 80% power at two-sided alpha 0.05 by the textbook formula ((t_0.975 + t_0.80) x its standard error at "
        "its degrees of freedom); with 3 runs a side this procedure finds an effect of that size in about two "
        "studies of three (simulated), so read it as a lower bound. Holm's adjustment is applied to the "
        "p-values of every directional comparison in the report; it is printed beside each verdict and does not "
        "decide it.")
Kind = Literal["greater", "at_least", "at_most"]


@dataclass(frozen=True)
class Estimate:
    """A - B: the point difference, its 95% interval, standard error, detectable difference and
    two-sided p-value; how many pretraining runs each side had, the fine-tuning seeds, and the
    degrees of freedom of the t interval (None: a normal interval)."""

    diff: float
    lo: float
    hi: float
    se: float
    mdd: float
    p: float
    runs: tuple[int, int]
    finetune_seeds: int
    paired: bool
    df: float | None = None

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


def _residual_var(Y: np.ndarray) -> float:
    """The run x seed residual variance of one side's (P, S) table (two-way, (P-1)(S-1) df)."""
    P, S = Y.shape
    if P < 2 or S < 2:
        return 0.0
    r = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean()
    return float((r ** 2).sum() / ((P - 1) * (S - 1)))


def components(A: np.ndarray, B: np.ndarray, paired_runs: bool = False) -> list[tuple[float, float]]:
    """The variance of mean(A) - mean(B) for (P, S) tables (runs x fine-tuning seeds), as (term, df)
    pairs to be summed, under scores = variant + run + seed + variant x seed + residual.

    - Runs: each side's run means vary by run effects and residual / S: var / P, P - 1 df (a side with
      one run contributes nothing: its interval covers fine-tuning noise only). Where both sides are the
      same checkpoints (``paired_runs``: ALBERT shared against unshared) the run means' differences.
    - Seeds, shared (equal seed counts): the seed's common effect cancels; the per-seed differences
      (averaged over runs) vary by the variant x seed interaction and residual: var / S, S - 1 df, less
      the residual already counted in the run terms (never below zero). With unequal seed counts
      nothing cancels: each side's seed means, the same way."""
    (Pa, Sa), (Pb, Sb) = A.shape, B.shape
    out: list[tuple[float, float]] = []
    counted = 0.0  # residual variance of the difference already inside the run terms
    if paired_runs and Pa == Pb and Sa == Sb and Pa > 1:
        out.append((float(np.var(A.mean(1) - B.mean(1), ddof=1)) / Pa, Pa - 1))
        counted = (_residual_var(A) + _residual_var(B)) / (Pa * Sa)
    else:
        for Y in (A, B):
            P, S = Y.shape
            if P > 1:
                out.append((float(np.var(Y.mean(1), ddof=1)) / P, P - 1))
                counted += _residual_var(Y) / (P * S)
    if Sa == Sb and Sa > 1:
        d = A.mean(0) - B.mean(0)  # (S,)
        out.append((max(0.0, float(np.var(d, ddof=1)) / Sa - counted), Sa - 1))
    elif Sa != Sb:
        for Y in (A, B):
            P, S = Y.shape
            if S > 1:
                own = _residual_var(Y) / (P * S) if P > 1 else 0.0
                out.append((max(0.0, float(np.var(Y.mean(0), ddof=1)) / S - own), S - 1))
    return out


def t_estimate(diff: float, terms: list[tuple[float, float]], runs: tuple[int, int], seeds: int,
               paired: bool) -> Estimate:
    """The t interval of ``diff`` from its variance components (Satterthwaite's degrees of freedom)."""
    var = sum(v for v, _ in terms)
    se = float(np.sqrt(var))
    if se == 0:  # no spread anywhere: the difference is exact
        return Estimate(diff=diff, lo=diff, hi=diff, se=0.0, mdd=0.0, p=1.0 if diff == 0 else 0.0, runs=runs,
                        finetune_seeds=seeds, paired=paired, df=None)
    df = min(var ** 2 / sum(v ** 2 / k for v, k in terms if v > 0),
             sum(k for v, k in terms if v >= CARRIES * var))
    q = t_quantile((1 + LEVEL) / 2, df)
    p = 2 * (1 - t_cdf(abs(diff) / se, df))
    return Estimate(diff=diff, lo=diff - q * se, hi=diff + q * se, se=se,
                    mdd=(q + t_quantile(POWER, df)) * se, p=min(1.0, p), runs=runs, finetune_seeds=seeds,
                    paired=paired, df=float(df))


def diff_estimate(a: dict[str, np.ndarray], b: dict[str, np.ndarray], *, paired_runs: bool = False
                  ) -> Estimate | None:
    """A - B over the tasks both have (None when none is shared or a side has no score); each side's
    (P, S) table is its tasks' mean, so the aggregate's variance is read as it is."""
    tasks = sorted(t for t in set(a) & set(b) if np.size(a[t]) and np.size(b[t]))
    if not tasks:
        return None
    A, B = _stack(a, tasks).mean(0), _stack(b, tasks).mean(0)  # (P, S) each
    terms = components(A, B, paired_runs)
    return t_estimate(float(A.mean() - B.mean()), terms, (A.shape[0], B.shape[0]), min(A.shape[1], B.shape[1]),
                      A.shape[1] == B.shape[1])


# ---- Student's t, without scipy (a study's dependencies are numpy and matplotlib) ----------------------
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (real, > 0) degrees of freedom."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (bisection on t_cdf; q in (0, 1))."""
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > q:
        lo *= 2
    while t_cdf(hi, df) < q:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def verdict(e: Estimate | None, kind: Kind = "greater", margin: float = 0.01) -> str:
    """The rule (RULE): "greater" claims A > B; "at_least" claims A matches or beats B within ±margin;
    "at_most" claims A adds little over B (A - B below +margin: NSP over no sentence loss)."""
    if e is None:
        return "inconclusive"
    if kind == "greater":
        return "holds" if e.lo > 0 else "does not hold" if e.hi < 0 else "inconclusive"
    if kind == "at_most":
        if e.hi < margin:
            return f"equivalent within ±{margin:g}" if e.lo > -margin else "holds"
        return "does not hold" if e.lo > margin else "inconclusive"
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
