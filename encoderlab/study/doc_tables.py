"""The tables the docs quote from a study's report.json: the verdicts (``<!-- verdicts: FOLDER -->``
... ``<!-- /verdicts -->``) and the per-variant scores (``<!-- variants: FOLDER -->`` ...
``<!-- /variants -->``), written into docs/results.md and the studies' READMEs by
scripts/verdict_tables.py and checked by tests/test_study_docs.py, so that no number in them is copied
by hand."""

from __future__ import annotations

import numpy as np

from encoderlab.study.claims import plateau_accuracy
from encoderlab.study.config import task_label
from encoderlab.study.measure import one_class_count
from encoderlab.study.metrics import EVAL_DISC_AUC
from encoderlab.study.results import StudyResults


def variant_table(results: StudyResults, names: list[str] | None = None) -> list[str]:
    """One row per variant (``names``: those, in that order; None: every variant): pretraining runs,
    the steps of seed 0's run, its held-out MLM accuracy (an ELECTRA's generator's) and discriminator
    AUC at the last checkpoint, and per task the mean over every pretraining run and fine-tuning seed
    at the last fine-tuned budget; an unshared row where the variant was also fine-tuned unshared; each
    random-init control's mean over its fine-tuning seeds last (the main one, then one per other shape);
    a cell says how many of its fine-tunings collapsed to one class, where any did."""
    V = results.variants
    names = list(V) if names is None else names
    tasks = sorted({t for n in names for t in V[n].seed_scores()})
    lines = ["| variant | runs | steps | held-out MLM acc | disc AUC | " + " | ".join(map(task_label, tasks)) + " |",
             "|---" * (5 + len(tasks)) + "|"]
    for name in names:
        r = V[name]
        steps = max(r.checkpoints.values(), key=lambda c: c.flops).step
        auc = r.final_eval().get(EVAL_DISC_AUC)
        for unshared in (False, True):
            got = r.seed_scores(unshared=unshared)
            if unshared and not got:
                continue
            runs = max((len(x) for x in got.values()), default=0)
            lines.append(f"| {name}{' (unshared)' if unshared else ''} | {runs} | {steps:,} | "
                         f"{_num(plateau_accuracy(r))} | {_num(auc)} | "
                         + " | ".join(_cell(got.get(t), results.baselines.get(t)) for t in tasks) + " |")
    controls = results.controls or {}
    for shape, control in [(controls.get("variant"), controls), *(controls.get("shapes") or {}).items()]:
        ctl = control.get("tasks", {})
        if ctl:
            lines.append(f"| random init ({shape}'s shape) | – | 0 | – | – | " + " | ".join(
                _cell(np.array(ctl[t]["per_seed"]) if t in ctl else None, results.baselines.get(t)) for t in tasks)
                + " |")
    return lines


def _cell(scores, baseline: dict | None) -> str:
    """A task's mean, and how many of its fine-tunings collapsed to one class where any did (an MCC of
    0 there is a classifier answering one class, averaged in with real scores)."""
    if scores is None:
        return "–"
    k = one_class_count(scores, baseline)
    return _num(float(np.mean(scores))) + (f" ({k}/{np.size(scores)} one class)" if k else "")


def _num(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def verdict_table(claims: list) -> list[str]:
    """A Markdown table of a report's verdicts, one row per claim, for the READMEs (a test checks that the
    committed ones match their report.json): each quality claim's first comparison (the one its verdict
    reads), its interval, the difference it could have detected, and its Holm-adjusted p over every
    comparison of the report (printed beside the verdict; the rule does not read it; "–" for a claim of
    matching, whose p would test a difference of zero, not the margin its verdict reads)."""
    lines = ["| claim | verdict | first comparison | difference [95% interval] | detectable | Holm p |",
             "|---|---|---|---|---|---|"]
    sanity = [c for c in claims if c.kind]
    for c in (c for c in claims if not c.kind):
        # The first comparison is the claim's own (the one its verdict reads); where it has no estimate (no
        # task carries signal) the row says so rather than showing a later, secondary comparison's.
        x = c.comparisons[0] if c.comparisons else None
        e = x.estimate if x else None
        # not testable: the same comparison over every task, in parentheses (numbers, not evidence)
        u = next((y.estimate for y in c.untested if x is not None and y.label == x.label), None)
        cells = (["–"] * 4 if x is None else [x.label, f"({u.diff:+.3f} [{u.lo:+.3f}, {u.hi:+.3f}], every task: "
                                                       "not evidence)", f"({u.mdd:.3f})", "–"] if e is None and u
                 else [x.label, "–", "–", "–"] if e is None
                 else [x.label, f"{e.diff:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]", f"{e.mdd:.3f}",
                       "–" if x.holm_p is None or x.kind != "greater" else f"{x.holm_p:.3f}"])
        lines.append(f"| {c.claim}. {c.title} | {c.verdict} | "
                     + " | ".join(cells) + " |")
    if sanity:  # true by construction at these shapes: checks of the setup, not evidence about the families
        lines += ["", "Sanity checks (true by construction at these shapes; not evidence about the families):", "",
                  "| check | result |", "|---|---|"]
        lines += [f"| {c.claim}. {c.title} | {c.verdict} |" for c in sanity]
    return lines
