"""A claim's comparisons: each one the difference of two variants' scores with its estimate
(study/stats.py), verdict and per-task rows; Judge holds what every comparison of a report shares (the
variants, the equivalence margin, the random-init control) and, scoped to one claim (Judge.among),
which tasks enter that claim's aggregates."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from encoderlab.study import stats
from encoderlab.study.blimp import CHANCE, control_for, correct_of, paired_diff
from encoderlab.study.results import VariantResult

V = dict[str, VariantResult]


@dataclass
class Comparison:
    """One comparison of a claim: A - B, its estimate, the verdict by the rule, and per-task rows."""

    label: str
    kind: str  # stats.Kind: "greater" (A > B), "at_least" (matches or beats within the margin), "at_most"
    estimate: stats.Estimate | None
    verdict: str
    per_task: dict[str, tuple[stats.Estimate | None, str]] = field(default_factory=dict)
    holm_p: float | None = None

    def to_json(self) -> dict:
        e = self.estimate
        return {"label": self.label, "kind": self.kind, "verdict": self.verdict,
                **({"estimate": e.to_json()} if e else {}), "holm_p": self.holm_p,
                "per_task": {t: {"verdict": v, **({"estimate": x.to_json()} if x else {})}
                             for t, (x, v) in self.per_task.items()}}


@dataclass
class Judge:
    """What every quality claim compares with: the variants, the equivalence margin, which tasks enter
    the aggregates (``signal``: task -> whether it carries signal; None: every task), and the random-init
    control (``controls``, the study's) from which among() decides ``signal`` per claim."""

    v: V
    margin: float = 0.01
    signal: dict[str, bool] | None = None
    controls: dict | None = None
    _tested: dict = field(default_factory=dict, repr=False)  # variant names -> task_signal, shared by copies

    def among(self, names: list[str | None]) -> tuple[Judge, dict[str, tuple[bool, stats.Estimate | None]]]:
        """The judge of one claim and its signal test: a task enters the claim's aggregates when the
        variants it compares (``names``), pooled with equal weights, beat the random-init control beyond
        the 95% interval. Pooling a claim's own variants, not the study's, keeps a claim's tasks from
        depending on which other variants a study ran (pooled with claim 6's four generator widths, CoLA
        lost the signal that bert and electra alone carry, and claim 5b's verdict with it); and the equal-
        weight mean of the compared variants is orthogonal to every difference between them, so choosing
        tasks by it favours neither side of a comparison (for equal variances). A signal fixed by the
        caller, or no control, leaves the judge as it is ({} as the test)."""
        if self.signal is not None or not self.controls:
            return self, {}
        key = tuple(sorted({n for n in names if n in self.v}))
        if key not in self._tested:
            self._tested[key] = task_signal(self.v, self.controls, names=key)
        tested = self._tested[key]
        return dataclasses.replace(self, signal={t: ok for t, (ok, _) in tested.items()}), tested

    def ran(self, name: str | None) -> bool:
        """Whether a variant was fine-tuned, whichever of its tasks enter the aggregates."""
        r = self.v.get(name) if name is not None else None
        return r is not None and bool(r.seed_scores() or r.final_score())

    def zero_shot(self, name: str) -> tuple[str, np.ndarray] | None:
        """(label, (P, N) per-pair outcomes of each pretraining run that has them) of a variant's BLiMP
        dev at its last checkpoint, when BLiMP dev carries signal (or no control ran to say)."""
        if name not in self.v:
            return None
        r = self.v[name]
        finals = [rec[max(rec, key=float)] for rec in [r.measure.blimp] + [x.measure.blimp
                                                                                  for x in r.replicas] if rec]
        bits = [b for f in finals if (b := correct_of(f)) is not None]
        if not bits or (self.signal is not None and not self.signal.get(finals[0]["label"], False)):
            return None
        return finals[0]["label"], np.stack([b for b in bits if len(b) == len(bits[0])]).astype(float)

    def scores(self, name: str, fraction: float | None = None, unshared: bool = False) -> dict[str, np.ndarray]:
        got = self.v[name].seed_scores(fraction, unshared=unshared) if name in self.v else {}
        return {t: x for t, x in got.items() if self.signal is None or self.signal.get(t, True)}

    def mean(self, name: str, fraction: float | None = None, unshared: bool = False) -> float | None:
        """The aggregate score: mean over tasks of each task's mean over runs and seeds; for results
        stored without per-seed scores, the mean over tasks of the medians."""
        got = self.scores(name, fraction, unshared)
        if got:
            return float(np.mean([x.mean() for x in got.values()]))
        if name not in self.v or fraction is not None or self.v[name].seed_scores(unshared=unshared):
            return None  # per-seed scores, none of whose tasks carries signal: no aggregate
        fs = self.v[name].final_score(unshared=unshared)
        return fs["median"] if fs else None

    def compare(self, label: str, a: str, b: str, *, kind: stats.Kind = "greater", a_fraction: float | None = None,
                b_fraction: float | None = None, a_unshared: bool = False, b_unshared: bool = False,
                a_scores: dict | None = None, b_scores: dict | None = None) -> Comparison:
        """``a_scores`` / ``b_scores``: scores that are no variant's own (claim 7's midpoint of ELECTRA and
        BERT, claim 6's band of generators), in place of ``a``'s / ``b``'s."""
        sa = a_scores if a_scores is not None else self.scores(a, a_fraction, a_unshared)
        sb = b_scores if b_scores is not None else self.scores(b, b_fraction, b_unshared)
        # One variant against itself (ALBERT unshared against shared, two checkpoints of its runs): paired by run.
        same_runs = a_scores is None and b_scores is None and a == b
        e = stats.diff_estimate(sa, sb, paired_runs=same_runs)
        per = {}
        if len(set(sa) & set(sb)) > 1:
            for t in sorted(set(sa) & set(sb)):
                x = stats.diff_estimate({t: sa[t]}, {t: sb[t]}, paired_runs=same_runs)
                per[t] = (x, stats.verdict(x, kind, self.margin))
        za, zb = self.zero_shot(a), self.zero_shot(b)
        own = a_scores is None and b_scores is None and a_fraction is b_fraction is None
        if za and zb and own and not (a_unshared or b_unshared):
            # Zero-shot evidence beside the tasks, not in the aggregate, by the same estimate: the pairs,
            # the same items for every run of both variants, stand where the fine-tuning seeds stand.
            x = stats.diff_estimate({za[0]: za[1]}, {za[0]: zb[1]}) if (
                za[1].shape[1] == zb[1].shape[1]) else None
            per[f"{za[0]}, zero-shot"] = (x, stats.verdict(x, kind, self.margin))
        return Comparison(label, kind, e, stats.verdict(e, kind, self.margin), per)


def task_signal(v: V, controls: dict, names: tuple[str, ...] | None = None
                ) -> dict[str, tuple[bool, stats.Estimate | None]]:
    """Per task with a random-init control: whether the pretrained variants (``names``; None: every
    variant) beat it beyond the 95% interval (signal), and the estimate. The pretrained side pools
    their last fine-tuning of the task (each variant's mean over its pretraining runs, per fine-tuning
    seed, averaged over the variants); the control side pools each variant's own architecture's
    control (control_of) the same way, paired by fine-tuning seed (a paired t over the seeds). The test
    is of these pretraining runs (their spread is not in its interval) on purpose: a screen that read
    the runs' spread would share the comparisons' variance estimate, and choose the studies whose runs
    happen to agree. By simulation (docs/studies.md, no true difference, 3 runs x 3 seeds) the verdicts
    of studies this screen lets a task into are false as often as the others' (2.2% and 2.1%).
    BLiMP dev (zero-shot, two choices per pair; each variant's outcome per pair averaged over its runs,
    as a task's score is) must also clear chance beyond its interval: a fresh
    encoder's preferences can sit far from chance (a 4 x 128 ALBERT's scored 0.434), so beating the
    control alone can mean no more than reaching chance, which is learning nothing of the task."""
    out = {}
    v = v if names is None else {n: v[n] for n in names if n in v}
    for task in (controls or {}).get("tasks", {}):
        pairs = [(x[task].mean(0), ctl["tasks"][task]["per_seed"]) for n, r in v.items()
                 if task in (x := r.seed_scores()) and task in (ctl := control_of(controls, n)).get("tasks", {})
                 and ctl["tasks"][task].get("per_seed")]
        if not pairs:
            continue
        n = min(min(len(a), len(c)) for a, c in pairs)
        pooled = np.mean([a[:n] for a, _ in pairs], axis=0)[None, :]  # (1, S)
        ctl = np.mean([c[:n] for _, c in pairs], axis=0)[None, :]
        e = stats.diff_estimate({task: pooled}, {task: ctl})
        out[task] = (stats.verdict(e) == "holds", e)
    if controls:  # each variant beside its own architecture's control (the main one may have none)
        finals = {n: r.measure.blimp[max(r.measure.blimp, key=float)] for n, r in v.items() if r.measure.blimp}
        rows = [(b, bc) for n, f in finals.items()
                if (bc := correct_of(control_for(control_of(controls, n), f))) is not None
                and (b := _runs_mean(v[n], len(bc))) is not None]
        if rows:  # a zero-shot two-choice score: beyond the control and beyond chance
            pooled = np.mean([b for b, _ in rows], axis=0)  # (N,) each pair's outcome, the variants' mean
            e = paired_diff(pooled, np.mean([c for _, c in rows], axis=0))
            above = paired_diff(pooled, CHANCE)
            out[next(iter(finals.values()))["label"]] = (stats.verdict(e) == "holds" and above.lo > 0, e)
    return out


def _runs_mean(r, n: int) -> np.ndarray | None:
    """(N,) each pair's outcome averaged over the variant's pretraining runs (their last checkpoints'
    BLiMP records with ``n`` pairs, the control's), as a task's score is its mean over the runs; None
    without any."""
    recs = [rec[max(rec, key=float)] for rec in [r.measure.blimp] + [x.measure.blimp for x in r.replicas] if rec]
    bits = [b for f in recs if (b := correct_of(f)) is not None and len(b) == n]
    return np.mean(bits, axis=0) if bits else None


def control_of(controls: dict, name: str) -> dict:
    """The random-init control that stands for variant ``name``: its own architecture's where the study
    ran one (controls["of"], study/runner.random_control), else the main one."""
    shape = (controls.get("of") or {}).get(name)
    return controls["shapes"][shape] if shape else controls


def combined(verdicts: list[str]) -> str:
    """All hold: holds; any does not hold: does not hold; else inconclusive."""
    if verdicts and all(v == "holds" or v.startswith("equivalent") for v in verdicts):
        return "holds"
    return "does not hold" if "does not hold" in verdicts else "inconclusive"


def summary_compare(label: str, a: dict, b: dict) -> Comparison:
    """Probe summaries (median, std, n over the fine-tuning seeds of one pretraining run): Welch's t
    interval, unpaired, on the medians' difference (the seeds' spread standing in for the medians'); it
    covers fine-tuning noise only (runs (1, 1)), and the report says so."""
    na, nb = max(a.get("n", 1), 1), max(b.get("n", 1), 1)
    terms = [(x["std"] ** 2 / n, n - 1) for x, n in ((a, na), (b, nb)) if n > 1]
    e = stats.t_estimate(a["median"] - b["median"], terms, (1, 1), min(na, nb), False)
    return Comparison(label, "greater", e, stats.verdict(e))
