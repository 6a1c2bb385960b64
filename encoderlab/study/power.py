"""A design that decides, sized before compute: variance components pooled across a study's variants,
the difference a design of P pretraining runs x S fine-tuning seeds a side can detect, and the P and S
that detect a claim's published effect at 80% power, with what they cost.

The model, per task and variant: score = variant + run + seed-within-run noise, the runs' effects
with variance ``run`` and the fine-tunings' with variance ``seed`` (everything a fine-tuning adds: its
seed, its collapses, the run x seed interaction). Estimator, stated: for each variant with P >= 2
runs of S >= 2 seeds, the one-way ANOVA method of moments, seed = the mean within-run variance,
run = max(0, var(run means) - seed / S); each pooled over the variants weighted by their degrees of
freedom (P(S - 1) and P - 1). The seed variance is never taken below the fine-tuning noise floor
(NOISE_SD, squared). A comparison of two variants, each P runs x S seeds, unpaired runs:

    var(diff) = 2 (run / P + seed / (P S)),  df = 2 (P - 1)

and its detectable difference at two-sided 5% and 80% power is (t_0.975 + t_0.80) x sd(diff). Seeds
are the cheap lever (they divide only the seed part), runs the dear one (they divide both).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from encoderlab.study.results import StudyResults
from encoderlab.study.stats import LEVEL, POWER, t_quantile

NOISE_SD = 0.005  # claims.NOISE_FLOOR: no fine-tuning is reproducible to better than this

# Each headline claim's published effect on the paper's 0-100 scale, divided by 100: the difference a
# design must be able to detect. Applying a base-size GLUE average's difference to one tiny-model task
# is an assumption, stated wherever it is used.
PUBLISHED_EFFECTS: dict[str, tuple[float, str]] = {
    "5a": (0.048, "ELECTRA Table 1: ELECTRA-Small 79.9 against BERT-Small 75.1 GLUE dev"),
    "4": (0.022, "ALBERT Table 2: BERT-base 82.3 against ALBERT-base 80.1, the average over SQuAD1.1, SQuAD2.0, "
                 "MNLI, SST-2 and RACE [from memory, not checked against the paper here]"),
}


@dataclass(frozen=True)
class Components:
    task: str
    run: float  # variance of a pretraining run's effect
    seed: float  # variance of one fine-tuning around its run's mean (floored)
    run_df: int
    seed_df: int
    variants: int

    def sd_diff(self, runs: int, seeds: int) -> float:
        return math.sqrt(2 * (self.run / runs + self.seed / (runs * seeds)))

    def detectable(self, runs: int, seeds: int) -> float:
        """The smallest difference P runs x S seeds a side detect at 80% power (two-sided 5%)."""
        if runs < 2:
            return float("inf")  # one run a side: no run variance to test against
        df = 2 * (runs - 1)
        return (t_quantile((1 + LEVEL) / 2, df) + t_quantile(POWER, df)) * self.sd_diff(runs, seeds)

    def reachable_margin(self, runs: int, seeds: int) -> float:
        """The smallest equivalence margin m the design shows (its 90% interval inside ±m, two one-sided
        tests at 5%) with 80% power when the true difference is zero: (t_0.95 + t_0.90) x sd(diff)."""
        if runs < 2:
            return float("inf")
        df = 2 * (runs - 1)
        return (t_quantile(0.95, df) + t_quantile(1 - (1 - POWER) / 2, df)) * self.sd_diff(runs, seeds)


def components(scores: dict[str, dict[str, np.ndarray]], task: str) -> Components | None:
    """Pooled components of ``task`` from {variant: {task: (P, S) scores}}; None without a variant of
    two runs and two seeds."""
    seed_ss = seed_df = 0.0
    run_terms: list[tuple[float, int, int]] = []  # (var of run means, P - 1, S)
    n = 0
    for by_task in scores.values():
        Y = np.asarray(by_task.get(task, np.zeros((0, 0))), dtype=float)
        if Y.ndim != 2 or Y.shape[0] < 2 or Y.shape[1] < 2:
            continue
        P, S = Y.shape
        seed_ss += float(((Y - Y.mean(1, keepdims=True)) ** 2).sum())
        seed_df += P * (S - 1)
        run_terms.append((float(np.var(Y.mean(1), ddof=1)), P - 1, S))
        n += 1
    if not n:
        return None
    seed = max(seed_ss / seed_df, NOISE_SD ** 2)
    run_df = sum(k for _, k, _ in run_terms)
    run = max(0.0, sum(k * (v - seed / S) for v, k, S in run_terms) / run_df)
    return Components(task, run, seed, int(run_df), int(seed_df), n)


@dataclass(frozen=True)
class Design:
    runs: int
    seeds: int
    detectable: float
    core_hours: float


def needed(c: Components, effect: float, *, pretrain_core_h: float, finetune_core_h: float, max_runs: int = 30,
           max_seeds: int = 30) -> Design | None:
    """The cheapest (P, S) a side, for two variants, whose detectable difference is at most ``effect``;
    cost = 2 sides x P x (a pretraining + S fine-tunings). None when none within the limits does."""
    best = None
    for P in range(2, max_runs + 1):
        for S in range(1, max_seeds + 1):
            d = c.detectable(P, S)
            if d <= effect:
                cost = 2 * P * (pretrain_core_h + S * finetune_core_h)
                if best is None or cost < best.core_hours:
                    best = Design(P, S, d, cost)
                break  # more seeds at this P only cost more
    return best


def seed_scores(results: StudyResults) -> dict[str, dict[str, np.ndarray]]:
    return {n: r.seed_scores() for n, r in results.variants.items()}


def plan(report: Path, *, runs: int, seeds: int, pretrain_core_h: float, finetune_core_h: float) -> dict:
    """Every task's pooled components from a committed report, the detectable difference at (runs,
    seeds), and for each headline claim the cheapest design that detects its published effect."""
    results = StudyResults.from_json(json.loads(Path(report).read_text()))
    scores = seed_scores(results)
    tasks = sorted({t for s in scores.values() for t in s})
    out: dict = {"pilot": str(report), "runs": runs, "seeds": seeds, "tasks": {}}
    for t in tasks:
        c = components(scores, t)
        if c is None:
            continue
        row = {**asdict(c), "detectable": c.detectable(runs, seeds), "margin": c.reachable_margin(runs, seeds),
               "claims": {}}
        for claim, (effect, source) in PUBLISHED_EFFECTS.items():
            d = needed(c, effect, pretrain_core_h=pretrain_core_h, finetune_core_h=finetune_core_h)
            row["claims"][claim] = {"effect": effect, "source": source, "design": asdict(d) if d else None}
        out["tasks"][t] = row
    return out


def markdown(p: dict) -> str:
    lines = [f"Variance components pooled over the variants of {p['pilot']} (one-way ANOVA per variant, weighted "
             f"by degrees of freedom; the seed part floored at {NOISE_SD}²), and the difference {p['runs']} runs x "
             f"{p['seeds']} seeds a side detect at 80% power:", "",
             "| task | run sd | seed sd | variants | detectable at the plan | equivalence margin reachable | "
             + " | ".join(f"claim {c}: P x S a side (core-hours)" for c in PUBLISHED_EFFECTS) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(PUBLISHED_EFFECTS)]
    for t, r in p["tasks"].items():
        cells = []
        for c in PUBLISHED_EFFECTS:
            d = r["claims"][c]["design"]
            cells.append(f"{d['runs']} x {d['seeds']} ({d['core_hours']:.1f})" if d else "beyond 30 x 30")
        lines.append(f"| {t} | {math.sqrt(r['run']):.4f} | {math.sqrt(r['seed']):.4f} | {r['variants']} | "
                     f"{r['detectable']:.3f} | ±{r['margin']:.3f} | " + " | ".join(cells) + " |")
    df = 2 * (p["runs"] - 1)
    need = 0.01 / (t_quantile(0.95, df) + t_quantile(1 - (1 - POWER) / 2, df)) if df > 0 else float("nan")
    lines += ["", "An equivalence margin is reachable when the design's 90% interval falls inside it with 80% power at "
              "a true difference of zero: (t_0.95 + t_0.90) x sd(difference); at this design's "
              f"{df} degrees of freedom ±0.01 needs sd(difference) below {need:.4f}.", ""]
    effects = "; ".join(f"claim {c}: {e:.3f} ({s})" for c, (e, s) in PUBLISHED_EFFECTS.items())
    lines.append("Published effects (the paper's scale / 100, applied to each task as if it were the average: an "
                 f"assumption): {effects}")
    return "\n".join(lines) + "\n"


def measured_costs(report: Path) -> tuple[float, float, float]:
    """(budget FLOPs, pretraining core-hours a run, fine-tuning core-hours a seed and task) of a committed
    report: its runs' mean wall-clock x threads a run; a fine-tuning at 30 core-seconds a task (the
    claims study's measured pair, 59 core-s, halved: docs/benchmarks.md) unless the report records more."""
    data = json.loads(Path(report).read_text())
    cfg = data.get("config", {})
    jobs = cfg.get("pretrain_jobs") or 1
    threads = cfg.get("threads") or max(1, (data.get("environment", {}).get("threads") or jobs) // jobs)
    walls = [v["pretrain"]["wall_s"] for v in data["variants"].values() if (v.get("pretrain") or {}).get("wall_s")]
    return float(cfg.get("budget_flops") or float("nan")), float(np.mean(walls)) * threads / 3600, 30 / 3600
