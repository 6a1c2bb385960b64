"""The study report: report.json (everything) and report.md (tables, claims, the figures of study/plots.py).

Every number comes from the run that wrote it; the report records machine, versions, date and the
resolved config.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from pathlib import Path

import numpy as np
import yaml

from encoderlab.eval.common import versions
from encoderlab.study import runs
from encoderlab.study.blimp import CAUSAL_CONTROL
from encoderlab.study.claims import NOT_TESTABLE, RULE, left_plateau, plateau_accuracy, steady_train
from encoderlab.study.config import ClaimRoles, StudyConfig, task_label
from encoderlab.study.judge import task_signal
from encoderlab.study.measure import one_class, one_class_count
from encoderlab.study.metrics import (
    EVAL_DISC_AUC,
    PEAK_MEMORY_MB,
    TOKENS_PER_S,
)
from encoderlab.study.plan import per_family_settings
from encoderlab.study.plots import claim_curves, forest_plot, gpu_memory, study_figures
from encoderlab.study.results import FinetuneKey, StudyResults, VariantResult
from encoderlab.study.transfer_table import transfer_section
from encoderlab.study.verdicts import evaluate_claims


def environment() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": cpu,
            "threads": torch.get_num_threads(), "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else None, "versions": versions()}


def _fmt(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) >= 1e4 or abs(x) < 1e-2 else f"{x:.3f}"
    return str(x)


def _task_table(V: dict[str, VariantResult], baselines: dict, controls: dict | None = None) -> list[str]:
    """Every fine-tuning's median ± std by task and budget fraction; a cell whose every seed scored
    what a one-class predictor scores is marked, since it says nothing about the encoder."""
    cols = sorted({(k.task, k.fraction) for r in V.values() for k in r.fine_tunings()})
    if not cols:
        return []
    lines = ["Downstream score by task and pretraining budget, of each variant's first pretraining run (median ± "
             "std over its fine-tuning seeds; † every seed scored what a one-class predictor scores; every run's "
             "mean is in the table after it, where a variant has more than one):", "",
             "| variant | " + " | ".join(f"{task_label(t)} @ {f:g}" for t, f in cols) + " |",
             "|---|" + "---|" * len(cols)]
    rows = [(n, False) for n in V] + [(n, True) for n, r in V.items() if r.fine_tunings(unshared=True)]
    for name, unshared in rows:
        cells = []
        for task, frac in cols:
            ft = V[name].finetune.get(FinetuneKey(task, frac, unshared))
            cells.append("" if ft is None else f"{ft['score']['median']:.3f} ± {ft['score']['std']:.3f}"
                         + (" †" if one_class(ft, baselines.get(task)) else ""))
        lines.append(f"| {name}{' (unshared)' if unshared else ''} | " + " | ".join(cells) + " |")
    lines.append("| majority class | " + " | ".join(_fmt(baselines.get(t, {}).get("majority")) for t, _ in cols) + " |")
    if any("bow" in b for b in baselines.values()):
        lines.append("| bag-of-words (logistic; ridge for regression) | "
                     + " | ".join(_fmt(baselines.get(t, {}).get("bow")) for t, _ in cols) + " |")
    if any("ngram" in b for b in baselines.values()):
        lines.append("| n-gram (scikit-learn TF-IDF, logistic; ridge for regression) | "
                     + " | ".join(_fmt(baselines.get(t, {}).get("ngram")) for t, _ in cols) + " |")
    last = max(f for _, f in cols)
    for name, control in _controls(controls):
        ctl = control.get("tasks", {})
        lines.append(f"| random init ({name}'s architecture, no pretraining) | " + " | ".join(
            f"{ctl[t]['score']['median']:.3f} ± {ctl[t]['score']['std']:.3f}" if f == last and t in ctl else ""
            for t, f in cols) + " |")
    return lines + [""] + _run_means(V)


def _run_means(V: dict[str, VariantResult]) -> list[str]:
    """Each pretraining run's mean over its fine-tuning seeds, at the last budget fraction: the runs are
    the claims' unit of replication, so their spread is what an interval reads."""
    multi = {n: r.seed_scores() for n, r in V.items() if r.replicas}
    tasks = sorted({t for s in multi.values() for t in s})
    if not tasks:
        return []
    lines = ["Each pretraining run's mean over its fine-tuning seeds (run 0 first), at the last budget fraction:", "",
             "| variant | " + " | ".join(map(task_label, tasks)) + " |", "|---|" + "---|" * len(tasks)]
    for name, scores in multi.items():
        lines.append(f"| {name} | " + " | ".join(
            " / ".join(f"{m:.3f}" for m in scores[t].mean(1)) if t in scores else "" for t in tasks) + " |")
    return lines + [""]


def _collapses(V: dict[str, VariantResult], baselines: dict) -> list[str]:
    """How many of a variant's last fine-tunings of each task (every pretraining run x fine-tuning seed)
    scored exactly what a one-class predictor scores: an MCC of 0 that is a classifier answering one class,
    not a weak encoder, and a mean that mixes such zeros with real scores (issue 32's review)."""
    tasks = sorted({t for r in V.values() for t in r.seed_scores() if (baselines.get(t) or {}).get("one_class")})
    if not tasks:
        return []
    lines = ["Fine-tunings that collapsed to one class, over every pretraining run and fine-tuning seed (k of n):",
             "", "| variant | " + " | ".join(map(task_label, tasks)) + " |", "|---|" + "---|" * len(tasks)]
    for name, r in V.items():
        got = r.seed_scores()
        cells = [f"{one_class_count(got[t], baselines[t])}/{np.size(got[t])}" if t in got else "" for t in tasks]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def _controls(controls: dict | None) -> list[tuple[str, dict]]:
    """(architecture's variant, control) of every random-init control the study ran, the main one first."""
    if not controls:
        return []
    return [(controls.get("variant"), controls), *(controls.get("shapes") or {}).items()]


def _blimp_table(V: dict[str, VariantResult], controls: dict | None) -> list[str]:
    """BLiMP dev accuracy of each variant's deployed network at every checkpoint (generator beside)."""
    recs = {n: r.measure.blimp for n, r in V.items() if r.measure.blimp}
    if not recs:
        return []
    fracs = sorted({f for rec in recs.values() for f in rec}, key=float)
    some = next(iter(recs.values()))[fracs[-1]]
    lines = [f"{some['label']}, zero-shot ({some['n']} pairs; an MLM's pseudo-log-likelihood, an ELECTRA's "
             "discriminator's log P(original), its generator's PLL in brackets, a causal LM's (objective clm) "
             "log-likelihood left to right; a tie counts as wrong):", "",
             "| variant | " + " | ".join(f"@ {f}" for f in fracs) + " |", "|---|" + "---|" * len(fracs)]
    for n, rec in recs.items():
        cells = []
        for f in fracs:
            r = rec.get(f)
            if r is None:
                cells.append("")
                continue
            gen = r["networks"].get("generator")
            own = r["networks"][r["deployed"]]["accuracy"]
            cells.append(f"{own:.3f}" + (f" ({gen['accuracy']:.3f})" if gen else ""))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    for name, control in _controls(controls):
        for key, how in (("blimp", ""), (CAUSAL_CONTROL, ", left to right")):
            if ctl := control.get(key):
                lines.append(f"| random init ({name}'s architecture{how}) | " + " | ".join(
                    f"{ctl['networks'][ctl['deployed']]['accuracy']:.3f}" if f == fracs[-1] else "" for f in fracs)
                    + " |")
    return lines + [""] + _recreated_note(V)


def _prompt_table(V: dict[str, VariantResult]) -> list[str]:
    """Every prompted variant's accuracy on each prompt task and number of shots (claim 17 reads two
    of them; the others are here so a user sees whether any variant is a prompt learner at all)."""
    recs = {n: r.measure.prompt for n, r in V.items() if r.measure.prompt}
    if not recs:
        return []
    cols = sorted({(t, k) for rec in recs.values() for t, by_k in rec.items() for k in by_k},
                  key=lambda c: (c[0], int(c[1].removeprefix("k="))))
    head = [f"{task_label(t)} {k.removeprefix('k=')}-shot".replace(" 0-shot", " zero-shot") for t, k in cols]
    lines = ["Prompting probe (claim 17's; each run's final checkpoint, its pattern and verbalizer; the mean over "
             "pretraining runs and few-shot draws, accuracy):", "",
             "| variant | prompted through | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(cols)]
    majority = {}
    for n, rec in recs.items():
        cells, method = [], ""
        for t, k in cols:
            r = rec.get(t, {}).get(k)
            if not r or not r.get("per_run"):
                cells.append("")
                continue
            method = r["method"]
            majority.setdefault((t, k), r.get("majority"))
            cells.append(f"{np.mean([a for run in r['per_run'] for a in run]):.3f}")
        lines.append(f"| {n} | {method} | " + " | ".join(cells) + " |")
    lines.append("| majority class | | " + " | ".join(_fmt(majority.get(c)) for c in cols) + " |")
    return lines + [""]


def _skipped_note(skipped: list[str]) -> list[str]:
    """The stages a study with skip_missing_weights left out, the runs whose weights they need first."""
    if not skipped:
        return []
    need = sorted(runs.needed_runs(skipped))
    return [f"**Left out: {len(skipped)} stages** whose runs' weights were not on this machine (skip_missing_weights; "
            f"recreate_weights computes them), needing the runs {', '.join(need)}:", "", "<details><summary>the "
            "stages</summary>", "", *[f"- {s}" for s in skipped], "", "</details>", ""]


def _recreated_note(V: dict[str, VariantResult]) -> list[str]:
    """Which runs' zero-shot scores came from weights pretrained again (recreate_weights), and how far
    those runs' held-out records are from the recorded runs the fine-tunings read."""
    made = {}
    for n, r in V.items():
        for seed, rec in [(0, r.measure.blimp)] + [(x.seed, x.measure.blimp) for x in r.replicas]:
            last = (rec or {}).get(max(rec or {"0": 0}, key=float), {})
            if "recreated" in last:
                made[n + (f"@seed{seed}" if seed else "")] = last["recreated"]
    if not made:
        return []
    same = [n for n, m in made.items() if m.get("identical")]
    other = {n: m for n, m in made.items() if not m.get("identical")}
    lines = [f"Scored on weights pretrained again from the recorded recipe and seed (the recorded runs' checkpoints "
             f"were not on the machine; recreate_weights): {', '.join(made)}."]
    if same:
        lines.append(f"Identical held-out records at every evaluation (the same weights): {', '.join(same)}.")
    for n, m in other.items():
        worst = ", ".join(f"{k} {x:.2g}" for k, x in sorted(m.get("max_abs_diff", {}).items()) if x)
        was, now = (", ".join(m.get("machines", {}).get(k, [])) for k in ("recorded", "here"))
        lines.append(f"{n}: another run of the same recipe and seed (machines recorded {was or 'not recorded'}, "
                     f"here {now}"
                     f"; largest held-out differences {worst or 'none'}"
                     f"{'' if m.get('steps_match') else '; other checkpoint steps'}).")
    return [" ".join(lines), ""]


# Where the figures were measured, from the figures' own records (a study can be resumed on another
# machine, so the one writing the report says nothing about them).
def _gpu_speed(V: dict[str, VariantResult]) -> bool:
    return any(r.speed is not None and r.speed.device == "cuda" for r in V.values())


def _speed_note(cfg: StudyConfig, V: dict[str, VariantResult]) -> str:
    """How the speed figures were taken, from the figures themselves."""
    threads = cfg.threads_per_job()
    text = (f"This run's setting: {cfg.pretrain_jobs} pretraining(s) at once, "
            + (f"{threads} thread(s) each. " if threads else "torch's default threads. "))
    timed = [n for n, r in V.items() if r.speed is not None]
    lat = any(r.measure.latency_ms is not None for r in V.values())
    if timed:
        sp = V[timed[0]].speed
        what = "Training tokens/s" + (" and inference latency" if lat else "")
        text += (f"{what} were measured after pretraining, all variants in one process taking turns (the best "
                 f"of {len(sp.rounds)} rounds, {sp.threads} thread(s)"
                 + (", on the GPU" if _gpu_speed(V) else "") + "); peak memory is "
                 + ("the CUDA allocator's peak in each pretraining process." if gpu_memory(V)
                    else "each pretraining process's max RSS."))
        rest = [n for n in V if n not in timed]
        if rest:
            text += f" Logged pretraining rates (not comparable with the rest): {', '.join(rest)}."
    else:
        text += "Training tokens/s are each pretraining's own log."
    return text


def _per_variant(values: dict[str, set]) -> str:
    """"X for every variant" where all agree, else each variant's own."""
    every = set().union(*values.values()) if values else set()
    if len(every) == 1:
        return f"{next(iter(every))} for every variant"
    return "; ".join(f"{n} {'/'.join(sorted(v)) or '?'}" for n, v in values.items()) or "not recorded"


def _precision_note(cfg: StudyConfig, V: dict[str, VariantResult]) -> str:
    """The precision each part ran in, from the runs' own records (auto resolves per machine), and
    the fine-tuning learning rate (None in the study: by width, so it may differ between variants)."""
    pre = {n: {t["precision"] for t in r.curve.train if "precision" in t} for n, r in V.items()}
    ft = {n: {f["precision"] for f in r.finetune.values() if f and "precision" in f} for n, r in V.items()}
    reasons = [f["precision_reason"] for r in V.values() for f in r.finetune.values() if f and "precision_reason" in f]
    text = (f"Precision (study: {cfg.base.trainer.precision}, fine-tuning: {cfg.finetune.precision}): "
            f"pretraining {_per_variant(pre)}")
    if reasons:
        text += f"; fine-tuning {_per_variant(ft)} ({reasons[0]})"
    fixed = cfg.finetune.learning_rate
    lrs = {n: {f"{f.get('learning_rate', fixed):g}" for f in r.finetune.values()
               if f and f.get("learning_rate", fixed) is not None} for n, r in V.items()}
    if any(lrs.values()):
        text += (f". Fine-tuning learning rate ({'study' if fixed else 'by width'}): {_per_variant(lrs)}")
    return text + "."


def _machines_note(V: dict[str, VariantResult]) -> str:
    """Which kind of machine pretrained each variant's runs (their metrics' run records). A variant's
    runs are its replicates, so they belong on one kind (the study keeps them there unless
    mixed_machines); variants on different kinds differ by the machine as well as by the recipe."""
    kinds = {n: [k for curve in [r.curve] + [x.curve for x in r.replicas] for k in curve.machine_kinds()]
             for n, r in V.items()}
    tuned = sorted({f["machine"] for r in V.values() for x in [r, *r.replicas] for f in x.finetune.values()
                    if f and "machine" in f})
    tuning = f" Fine-tuning on {' and '.join(tuned)}." if tuned else ""
    seen = {k for ks in kinds.values() for k in ks}
    if not seen:
        return "Machines: not recorded (runs written before the record)." + tuning
    if len(seen) == 1:
        return f"Machines: every pretraining run on {next(iter(seen))}." + tuning
    mixed = [n for n, ks in kinds.items() if len(set(ks)) > 1]
    text = "Machines: " + "; ".join(f"{n} {' + '.join(dict.fromkeys(ks)) or 'not recorded'}" for n, ks in kinds.items())
    text += (". **Variants pretrained on more than one kind of machine: " + ", ".join(mixed) + "** (their "
             "runs' spread includes the machine's)" if mixed else "")
    return text + ". A comparison of variants pretrained on different kinds also compares the machines." + tuning


def _claims_section(claims: list, against: dict | None = None) -> list[str]:
    """against: each variant's test against the random-init control ({variant: judge.task_signal of it
    alone}, for reference); None or empty: no control ran, every task enters every aggregate."""
    lines = ["## Claims", "", f"Statistical rule for every comparison below: {RULE}", ""]
    # the fine-tuning comparisons' estimates (the probes' claims 12 and 13 compare stored summaries)
    ests = [x.estimate for c in claims if c.claim not in (12, 13) for x in c.comparisons if x.estimate is not None]
    tested = [c for c in claims if c.signal]
    if not ests and tested and not any(ok for c in tested for ok, _ in c.signal.values()):
        lines += ["**No claim's variants learn a task beyond the random-init control** (each claim's test below it), "
                  "so no comparison has a task to aggregate: every verdict that reads fine-tuning scores is "
                  "inconclusive for want of a task, not of seeds.", ""]
    elif ests and all(e.fine_tuning_noise_only for e in ests):
        lines += ["**Every variant was pretrained once (pretrain_seeds: 1): the intervals cover fine-tuning noise "
                  "only, not the variation between pretraining runs** (the same recipe pretrained twice scored 0.438 "
                  "and 0.423 in docs/studies/claims-rope and claims-rope-sentence), so a verdict here is about these "
                  "pretraining runs, not the families.", ""]
    elif ests:
        runs = sorted({n for e in ests for n in e.runs})
        dfs = sorted(e.df for e in ests if e.df is not None)
        lines += [f"Pretraining runs per variant: {', '.join(map(str, runs))}; the intervals are t intervals at "
                  + (f"{dfs[0]:.1f}-{dfs[-1]:.1f} degrees of freedom" if dfs else "their degrees of freedom")
                  + " (few runs: wide intervals, as they should be).", ""]
    if not against:
        lines += ["Every task enters the aggregates: the study has no random-init control to test which tasks "
                  "carry signal.", ""]
    else:
        tasks = sorted({t for tests in against.values() for t in tests})
        lines += ["A task enters a claim's aggregates only when the variants that claim compares, pooled with equal "
                  "weights (each one's mean over its pretraining runs), beat the randomly initialised encoder of the "
                  "same shape beyond the 95% interval of the difference, paired by fine-tuning seed; each claim "
                  "lists its test. A claim's tasks so depend on its own variants, not on which others the study ran, "
                  "and the equal-weight mean of the compared variants is orthogonal to every difference between "
                  "them, so choosing tasks by it favours neither side. BLiMP dev (zero-shot, two choices a pair) "
                  "must also be above chance (0.5) beyond its interval: a fresh encoder can score far below chance, "
                  "and beating it can mean no more than reaching chance. Each variant against the control, for "
                  "reference (✓ beyond the interval):", "",
                  "| variant | " + " | ".join(map(task_label, tasks)) + " |", "|---|" + "---|" * len(tasks)]
        lines += [f"| {n} | " + " | ".join(_signal_cell(tests.get(t)) for t in tasks) + " |"
                  for n, tests in against.items()]
        lines.append("")
    not_run = [str(c.claim) for c in claims if c.verdict == "not run"]
    if not_run:  # a study of two variants is not 15 sections of "not run" (issue 51)
        lines += [f"Not run, for want of their variants or probes in this study (its first lines said what each "
                  f"needs): claims {', '.join(not_run)}.", ""]
    for c in claims:
        if c.verdict == "not run":
            continue
        lines.append(f"### {c.claim}. {c.title}")
        label = f" ({c.kind})" if c.kind else " (by the rule above)" if c.comparisons else ""
        lines.append(f"**Verdict: {c.verdict}**{label}" + (f" — {c.note}" if c.note else ""))
        if c.signal:
            kept = [t for t, (ok, _) in sorted(c.signal.items()) if ok]
            apart = [t for t, (ok, _) in sorted(c.signal.items()) if not ok]
            lines.append("*Its variants pooled against random init: "
                         + "; ".join(f"{task_label(t)} {_signal_cell(c.signal[t])}" for t in kept + apart)
                         + f". In its aggregates: {', '.join(map(task_label, kept)) or 'no task'}"
                         + (f"; no signal for these variants: {', '.join(map(task_label, apart))}*" if apart else "*"))
        if c.published:
            lines.append(f"*Published: {c.published}.*" + (f" *Compute: {c.compute}.*" if c.compute else ""))
        if c.plateau:
            lines.append(f"*Not yet evidence about the families: {', '.join(c.plateau)} had not left the unigram "
                         "plateau at this budget, so the scores compared come from encoders that learned little from "
                         "context.*")
        if c.comparisons:
            lines += ["", "| comparison | difference | 95% interval | detectable | p | Holm p | verdict |",
                      "|---|---|---|---|---|---|---|"]
            for x in c.comparisons:
                lines.append(_comparison_row(x.label, x.estimate, x.verdict, x.holm_p))
                lines += [_comparison_row(f"… on {task_label(t)}", e, v, None) for t, (e, v) in x.per_task.items()]
            lines.append("")
        if c.untested:
            lines += ["Over every task, though none carries transfer for these variants (numbers, not evidence):", "",
                      "| comparison | difference | 95% interval | detectable | p | Holm p | verdict |",
                      "|---|---|---|---|---|---|---|"]
            lines += [_comparison_row(x.label, x.estimate, "–", None) for x in c.untested] + [""]
        for k, val in c.numbers.items():
            lines.append(f"- {k}: {_fmt(val)}")
        if (plan := _to_decide(c)) is not None:
            lines += ["", f"*To decide: {plan}*"]
        lines.append("")
    return lines


def _to_decide(c) -> str | None:
    """What would settle an undecided claim: a budget that transfers first, or more replicates, sized
    from its first comparison's detectable difference against the difference it found."""
    if c.verdict == NOT_TESTABLE:
        return ("first a pretraining budget at which these variants beat their random-init twins on the tasks "
                "(docs/transfer.md, `encoderlab transfer`); then replicates sized by `encoderlab study-plan`.")
    if c.verdict != "inconclusive" or not c.comparisons or c.comparisons[0].estimate is None:
        return None
    e = c.comparisons[0].estimate
    if not abs(e.diff) > 0 or not math.isfinite(e.mdd):
        return None
    k = (e.mdd / abs(e.diff)) ** 2
    if k <= 1:
        return (f"the difference found ({e.diff:+.3f}) is larger than the detectable {e.mdd:.3f}, yet its interval "
                "crosses zero: the variance was larger than planned; `encoderlab study-plan` on this report sizes "
                "the next design.")
    return (f"the detectable difference ({e.mdd:.3f}) is {e.mdd / abs(e.diff):.1f}x the difference found "
            f"({e.diff:+.3f}); it falls as one over the square root of the replicates, so detecting a difference of "
            f"that size needs about {k:.0f}x the pretraining runs and fine-tuning seeds a side (`encoderlab "
            "study-plan` on this report gives the cheapest design).")


def _signal_cell(test: tuple | None) -> str:
    """A task_signal entry (carries signal, estimate) as "+0.040 [+0.025, +0.062]*" (* beyond the interval)."""
    if test is None:
        return ""
    ok, e = test
    at_chance = not ok and e is not None and e.lo > 0  # beyond the control, not beyond chance (judge.task_signal)
    return ("–" if e is None else f"{e.diff:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]") + (
        " ✓" if ok else " (not above chance)" if at_chance else "")


def _against_control(V: dict[str, VariantResult], controls: dict | None) -> dict:
    """Each variant alone against the random-init control (judge.task_signal), for the report's table."""
    return {n: t for n in V if (t := task_signal(V, controls, names=(n,)))}


def _comparison_row(label: str, e, verdict: str, holm_p: float | None) -> str:
    if e is None:
        return f"| {label} | – | – | – | – | – | {verdict} |"
    return (f"| {label} | {e.diff:+.4f} | [{e.lo:+.4f}, {e.hi:+.4f}] | {e.mdd:.4f} | {e.p:.3f} | "
            f"{_fmt(holm_p) if holm_p is None else f'{holm_p:.3f}'} | {verdict} |")


def resolved_yaml(cfg: StudyConfig) -> str:
    """The study as it ran, each variant's objective as the fields that act on its kind, without base's
    objective (every variant sets its own) and the settings of evaluations the study does not run."""
    d = cfg.to_dict()
    d["base"].pop("objective", None)
    generator = ("generator_multiplier", "generator_by", "embedding_sharing", "generator_layers")
    for v, spec in zip(d["variants"], cfg.variants):
        v["objective"] = spec.objective.applicable()
        # the model's unset options (None: the preset's) and, without a generator, the generator's
        v["model"] = {k: x for k, x in v["model"].items()
                      if x is not None and (spec.objective.kind == "rtd" or k not in generator)}
    no_prompt = not cfg.prompt_tasks
    unused = {"generation": not cfg.generation_task, "robustness": not cfg.robustness_task, "prompt": no_prompt,
              "prompt_shots": no_prompt, "prompt_seeds": no_prompt, "blimp_pairs_per_paradigm": not cfg.blimp}
    for key in [k for k, off in unused.items() if off]:
        d.pop(key, None)
    return yaml.safe_dump(d, sort_keys=False)


def claims_of(config: dict, results: StudyResults, roles: ClaimRoles | None = None) -> list:
    """The claims of a study's results, with the study's equivalence margin and budget; when the study ran
    the random-init control, each claim's aggregates take the tasks its own variants learn (Judge.among)."""
    roles = roles or ClaimRoles.from_dict(config.get("roles") or {})
    return evaluate_claims(results.variants, roles, results.mlm_baselines, controls=results.controls,
                           margin=config.get("equivalence_margin", 0.01), budget_flops=config.get("budget_flops"))


def refresh_claims(folder: Path, roles: ClaimRoles | None = None) -> list[int]:
    """Re-derive the claims of a written report (report.json, report.md's Claims section and the claims'
    figures it has) from its stored results with the present claim code, keeping everything else
    (machine, date, tables), so committed reports follow the claims' definitions without rerunning
    their studies. Returns the numbers of the claims whose verdict, numbers or note changed."""
    report = json.loads((folder / "report.json").read_text())
    results = StudyResults.from_json(report)
    claims = claims_of(report.get("config", {}), results, roles)
    old = {c["claim"]: c for c in report.get("claims", [])}
    new = [c.to_json() for c in claims]
    changed = [c["claim"] for c in new if old.get(c["claim"]) != c]
    report["claims"] = new
    (folder / "report.json").write_text(json.dumps(report, indent=1, default=str))
    md = (folder / "report.md").read_text()
    start, end = md.index("## Claims\n"), md.index("## Plots\n")
    against = _against_control(results.variants, results.controls)
    md = md[:start] + "\n".join(_claims_section(claims, against)) + "\n" + md[end:]
    # "Did pretraining help?" leads: written anew before the variants (a report written before it gets it)
    first = md.index("## Did pretraining help?\n") if "## Did pretraining help?\n" in md else md.index("## Variants\n")
    transfer = transfer_section(results.variants, results.baselines, results.controls)
    (folder / "report.md").write_text(md[:first] + "\n".join(transfer) + ("\n" if transfer else "")
                                      + md[md.index("## Variants\n"):])
    # The claims' figures the report has follow them (a report written before them gets none).
    if (folder / "claims_forest.png").exists():
        forest_plot(claims, folder, report.get("config", {}).get("equivalence_margin", 0.01))
    if (folder / "claims_curves.png").exists():
        claim_curves(claims, results.variants, folder)
    return changed


def write_report(cfg: StudyConfig, results: StudyResults, out: Path) -> dict:
    """report.json (the typed results, round-trippable through StudyResults.from_json), report.md
    and the plots; returns report.json's content."""
    env = environment()
    V, base = results.variants, results.mlm_baselines
    claims = claims_of(cfg.to_dict(), results, cfg.roles)
    report = {"study": cfg.name, "environment": env, **results.to_json(), "claims": [c.to_json() for c in claims]}
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    files = study_figures(results, out)
    if files:  # matplotlib is there
        files += [f for f in (forest_plot(claims, out, cfg.equivalence_margin), claim_curves(claims, V, out)) if f]

    lines = [f"# Study: {cfg.name}", "",
             f"{env['date']} on {env['cpu']} ({env['threads']} threads"
             + (f", {env['cuda']}" if env["cuda"] else "") + f"); torch {env['versions'].get('torch')}.",
             f"Budget {cfg.budget_flops:.3g} FLOPs per variant (analytic, backward = 2x forward); batch "
             f"{cfg.base.data.batch_size} x {cfg.base.data.seq_len}; {cfg.seeds} fine-tuning seed(s); token store "
             f"{results.data['store']} ({_fmt(results.data.get('tokens'))} tokens).",
             _speed_note(cfg, V), _precision_note(cfg, V), _machines_note(V), ""] + _skipped_note(results.skipped)
    chosen = results.data.get("learning_rates") or {}
    if chosen:
        lines += ["Fine-tuning learning rates chosen per family and task on a held-out fifth of the (capped) training "
                  "set, never on dev (the family's first variant, seed 0, one fine-tuning per rate; study/lr.py): "
                  + "; ".join(f"{fam} {task_label(t)} {c['chosen']:g} (held-out "
                              + ", ".join(f"{lr}: {s:.3f}" for lr, s in c["heldout"].items()) + ")"
                              for fam, tasks in chosen.items() for t, c in tasks.items()) + ".", ""]
    own = per_family_settings(cfg)
    lines += (["Per-variant settings beyond model and objective (equal compute holds only where the rest is "
               "equal): " + "; ".join(f"{n}: {', '.join(o)}" for n, o in own.items()) + ".", ""] if own
              else ["Every variant shares the base recipe: only model and objective differ.", ""])
    if results.data.get("demo_task"):
        lines += ["**This is the demo corpus** (the Python standard library's docstrings, ~250k words): it shows the "
                  "pipeline end to end. Conclusions about the families need a real corpus and larger budgets.", ""]
    lines += transfer_section(V, results.baselines, results.controls) + ["## Variants", ""]
    if base:
        lines += [f"Held-out MLM accuracy at the evaluation's masked positions ({base['positions']} of them) of two "
                  f"count models: unigram {base['unigram']:.3f} (always the most frequent token: the plateau tiny "
                  f"models sit on first), bigram {base['bigram']:.3f} (the left neighbour's most frequent "
                  "successor). A variant has left the plateau when its accuracy (an ELECTRA's: its generator's) "
                  "is at least a quarter of the way from the first to the second.", ""]
    lines += ["| variant | params (encoder) | checkpoint MB | steps | train tokens/s | peak MB | held-out MLM acc "
              "| left the plateau | disc AUC | downstream (median ± std) |", "|---" * 10 + "|"]
    for name, r in V.items():
        m, st, ev, fs = r.measure, steady_train(r), r.final_eval(), r.final_score()
        last = max(r.checkpoints.values(), key=lambda c: c.flops)
        left = {True: "yes", False: "no", None: "–"}[left_plateau(r, base)]
        size = (f"{m.params_encoder / 1e6:.2f}M | {m.checkpoint_mb:.1f}" if m.params_encoder is not None
                else "– | –")  # its measure stage left out (skip_missing_weights)
        lines.append(f"| {name} | {size} | {last.step} | "
                     f"{st[TOKENS_PER_S]:.0f} | {st[PEAK_MEMORY_MB]:.0f} | {_fmt(plateau_accuracy(r))} | {left} | "
                     f"{_fmt(ev.get(EVAL_DISC_AUC))} | "
                     + (f"{fs['median']:.3f} ± {fs['std']:.3f}" if fs else "–") + " |")
    lines += [""] + _task_table(V, results.baselines, results.controls) + _collapses(V, results.baselines)
    lines += _blimp_table(V, results.controls) + _prompt_table(V)
    lat_keys = sorted(next(iter(V.values())).measure.latency_ms or {})
    where = "on the CPU; the GPU timed training only" if _gpu_speed(V) else "on the CPU"
    lines += [f"Inference latency (ms, sequence 128, {where}):", "", "| variant | " + " | ".join(lat_keys) + " |",
              "|---|" + "---|" * len(lat_keys)]
    for name, r in V.items():
        lat = r.measure.latency_ms or {}
        lines.append(f"| {name} | " + " | ".join(f"{lat[k]:.1f}" for k in sorted(lat)) + " |")
    lines += [""] + _claims_section(claims, _against_control(V, results.controls))
    lines += ["## Plots", ""] + [f"![{f}]({f})" for f in files]
    lines += ["", "## Resolved config", "", "Each variant's objective shows only the fields that act on its kind "
              "(report.json has every field).", "", "```yaml", resolved_yaml(cfg).rstrip(), "```", ""]
    (out / "report.md").write_text("\n".join(lines))
    return report
