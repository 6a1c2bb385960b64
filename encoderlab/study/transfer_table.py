"""The report's first section: did pretraining help? Per task, the study's BERT against the random-init
twin of its own architecture, the bag-of-words baseline and the majority class, with the interval of
the difference (judge.task_signal: paired by fine-tuning seed over the pretraining runs), how many
variants beat their own twin, and which variants were fine-tuned at another learning rate than their
twin (a comparison then mixes pretraining with the rate; issue 52 found them in the claims study).
"""

from __future__ import annotations

import numpy as np

from encoderlab.study.config import task_label
from encoderlab.study.judge import control_of, task_signal
from encoderlab.study.results import VariantResult

V = dict[str, VariantResult]


def variant_lr(r: VariantResult, task: str) -> float | None:
    """The learning rate a variant's last fine-tuning of ``task`` ran at (None: not recorded)."""
    done = [(k, x) for k, x in r.fine_tunings().items() if k.task == task]
    if not done:
        return None
    return max(done, key=lambda kx: kx[0].fraction)[1].get("learning_rate")


def _f(x, signed: bool = False) -> str:
    return "–" if x is None else f"{x:+.3f}" if signed else f"{x:.3f}"


def transfer_section(v: V, baselines: dict, controls: dict | None, bert: str = "bert") -> list[str]:
    """"## Did pretraining help?" and its table; [] when the study ran no random-init control."""
    if not controls or not controls.get("tasks"):
        return []
    tasks = sorted(controls["tasks"])
    against = {n: task_signal(v, controls, names=(n,)) for n in v}
    lines = ["## Did pretraining help?", "",
             "Before any claim: does pretraining at this budget give an encoder that fine-tunes better than the same "
             "architecture from random weights, and better than a model of the words alone? A task where it does "
             "not can carry no claim about pretraining (its claims are \"not testable at this budget\"). "
             f"{bert} against its random-init twin (95% interval of the difference, paired by fine-tuning seed over "
             "the pretraining runs; ✓ beyond it), the bag-of-words baseline (study/bow.py), the n-gram baseline "
             "(TF-IDF n-grams by language and a linear model, eval/probe.py; – where the study predates it) and "
             "the majority class; "
             "then how many variants beat their own twin:", "",
             f"| task | {bert} (mean) | random init ({bert}'s architecture, mean) | {bert} - random [95%] "
             "| bag-of-words | n-gram (scikit-learn) | majority | variants above their twin (of all) |",
             "|---|---|---|---|---|---|---|---|"]
    for t in tasks:
        b = v[bert].seed_scores().get(t) if bert in v else None
        ok, e = (against.get(bert) or {}).get(t, (False, None))
        diff = "–" if e is None else f"{e.diff:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]" + (" ✓" if ok else "")
        rec = controls["tasks"][t]  # the mean over its seeds, as the variant's column (the median where none kept)
        ctl = float(np.mean(rec["per_seed"])) if rec.get("per_seed") else rec["score"]["median"]
        above = [n for n, tests in against.items() if tests.get(t, (False,))[0]]
        base = baselines.get(t) or {}
        lines.append(f"| {task_label(t)} | {_f(None if b is None else float(np.mean(b)))} | {_f(ctl)} | {diff} | "
                     f"{_f(base.get('bow'))} | {_f(base.get('ngram'))} | {_f(base.get('majority'))} | "
                     f"{len(above)} of {len(against)} |")
    below = [f"{n} on {task_label(t)} {e.diff:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]" for n, tests in against.items()
             for t, (_, e) in sorted(tests.items()) if e is not None and e.hi < 0 and t in tasks]
    if below:  # worse than no pretraining at all: the first thing a reader of the claims must know
        lines += ["", "**Below their own random-init twin beyond the interval** (pretraining at this budget made these "
                  "networks fine-tune worse than fresh weights of their architecture; their claims read them as they "
                  "are): " + "; ".join(below) + "."]
    mismatched = []
    for n, r in v.items():
        ctl = control_of(controls, n)
        for t in tasks:
            a, c = variant_lr(r, t), ((ctl or {}).get("tasks", {}).get(t) or {}).get("learning_rate")
            if a is not None and c is not None and a != c:
                mismatched.append(f"{n} {task_label(t)} {a:g} (twin {c:g})")
    if mismatched:
        lines += ["", "**Fine-tuned at another learning rate than their random-init twin** (the rate was chosen per "
                  "family from the pretrained variant, study/lr.py; its twin's difference then mixes pretraining with "
                  "the rate): " + "; ".join(mismatched) + ". New studies choose each network's rate on its own "
                  "held-out data (encoderlab transfer, docs/transfer.md)."]
    return lines + [""]
