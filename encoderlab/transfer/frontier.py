"""The transfer frontier from `transfer run` records: did pretraining help, per task and budget?

A point is a family at a pretraining budget (and a fine-tuning set size): its pretraining runs, each
fine-tuned with several seeds under the fair protocol, against the architecture's random-init twin
under the same protocol. Per task:

- **pretrained - random**, the difference of means, with a 95% Welch t interval. With two or more
  pretraining runs its variance is the run means' (the unit of replication, which carries the
  fine-tuning noise within it) over the runs, plus the twin's; with one run only the fine-tuning
  seeds' variance is known, and the row says so: such an interval is too narrow for a claim about
  the recipe, and right for "did this checkpoint transfer".
- the linear probe of the checkpoint and of the fresh network (seed-free; a mean over runs);
- the n-gram baseline and the majority class, on the same dev split.

A task **transfers** at a point when the interval's lower end is above zero; the point **beats the
n-gram baseline** on a task when the pretrained mean is above it. The frontier's sentence names the
smallest budget at which BERT transfers on at least 3 of the 5 GLUE tasks and beats the n-gram
baseline on STS-B, in core-hours of the CPU kind its runs met.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path

import numpy as np

from encoderlab.study.stats import t_quantile
from encoderlab.transfer.protocol import DEFAULT_SIZE

MIN_TASKS = 3


def load(folders: list[Path]) -> tuple[dict, dict, dict]:
    """(points, controls, baselines): points[(family, flops, train size)][task] = [run records],
    controls[(arch, train size, task)] and baselines[(train size, task)] = a record."""
    points: dict = defaultdict(lambda: defaultdict(list))
    controls, baselines = {}, {}
    for folder in folders:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such records folder (written by `encoderlab transfer run`)")
        for path in sorted(folder.glob("*.json")):
            rec = json.loads(path.read_text())
            size = rec["protocol"]["max_train_examples"]
            if path.name.startswith("baselines__"):
                baselines[(size, rec["task"])] = rec
            elif rec.get("init") == "random":
                controls[(rec["arch"], size, rec["task"])] = rec
            elif rec.get("init") == "pretrained":
                points[(rec["family"], _budget(rec["flops"]), size)][rec["task"]].append(rec)
    return points, controls, baselines


def _budget(flops: float | None) -> float:
    """A run's budget to 3 significant figures (a run stops within a step of it)."""
    return float(f"{flops:.3g}") if flops else float("nan")


def welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): a 95% Welch t interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = float(a.mean() - b.mean())
    va = a.var(ddof=1) / len(a) if len(a) > 1 else float("nan")
    vb = b.var(ddof=1) / len(b) if len(b) > 1 else float("nan")
    se2 = va + vb
    if not math.isfinite(se2) or se2 <= 0:
        return diff, float("nan"), float("nan")
    df = se2 ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0) or 1e-300)
    half = t_quantile(0.975, max(df, 1.0)) * math.sqrt(se2)
    return diff, diff - half, diff + half


def task_row(runs: list[dict], control: dict | None, base: dict | None) -> dict:
    """One task at one point: the means, the difference and its interval, the probes, the baselines,
    the collapses."""
    by_run = [r["fair"]["dev"] for r in runs]
    pooled = [x for xs in by_run for x in xs]
    sample = [float(np.mean(xs)) for xs in by_run] if len(by_run) > 1 else pooled
    row = {"runs": len(runs), "seeds": len(by_run[0]), "pretrained": float(np.mean(pooled)),
           "collapses": sum(sum(r["fair"]["collapsed"]) for r in runs), "fine_tunings": len(pooled),
           "probe": float(np.mean([r["probe"] for r in runs])),
           "interval_over": "pretraining runs" if len(by_run) > 1 else "fine-tuning seeds only (one pretraining run)",
           "chosen": [r["fair"]["chosen"] for r in runs],
           "pretraining_core_hours": float(np.mean([_core_hours(r) for r in runs])),
           "pretraining_core_hours_best": float(np.mean([_core_hours(r, best=True) for r in runs]))}
    if control is not None:
        diff, lo, hi = welch(sample, control["fair"]["dev"])
        row.update(random=float(np.mean(control["fair"]["dev"])), diff=diff, low=lo, high=hi,
                   random_collapses=sum(control["fair"]["collapsed"]), probe_random=control["probe"],
                   random_chosen=control["fair"]["chosen"], transfers=bool(lo > 0))
    if base is not None:
        row.update(ngram=base["ngram"], majority=base["majority"], beats_ngram=bool(row["pretrained"] > base["ngram"]))
    return row


def _core_hours(rec: dict, best: bool = False) -> float:
    """The run's pretraining core-hours as measured (wall-clock x threads; inflated where other jobs
    shared its cores), or with ``best`` at its fastest logged rate (the least-shared stretch)."""
    p = rec.get("pretraining") or {}
    if best:
        if not (p.get("tokens") and p.get("best_tokens_per_s")):
            return float("nan")
        return p["tokens"] / p["best_tokens_per_s"] * (p.get("threads") or 1) / 3600
    if not p.get("elapsed_s"):
        return float("nan")
    return p["elapsed_s"] * (p.get("threads") or 1) / 3600


def frontier(folders: list[Path]) -> dict:
    """{"points": [...], "sentence": ...}: every point's task rows, sorted by family, size, budget."""
    points, controls, baselines = load(folders)
    out = []
    # the frontier's own size first, then the others from the fewest examples (None: the whole set), each by budget
    order = lambda kv: (kv[0][0], kv[0][2] != DEFAULT_SIZE, kv[0][2] or float("inf"), kv[0][1])  # noqa: E731
    for (family, flops, size), tasks in sorted(points.items(), key=order):
        rows = {}
        for task, runs in sorted(tasks.items()):
            rows[task] = task_row(runs, controls.get((runs[0]["arch"], size, task)), baselines.get((size, task)))
        machines = sorted({(r.get("pretraining") or {}).get("machine") or r["machine"] for rs in tasks.values()
                           for r in rs})
        out.append({"family": family, "flops": flops, "train_examples": size, "tasks": rows, "machines": machines,
                    "transfers_on": sorted(t for t, r in rows.items() if r.get("transfers")),
                    "core_hours": float(np.nanmean([r["pretraining_core_hours"] for r in rows.values()])),
                    "core_hours_best": _nanmean([r["pretraining_core_hours_best"] for r in rows.values()])})
    return {"points": out, "sentence": sentence(out)}


def extrapolate(points: list[dict]) -> dict:
    """Where each task would transfer if the measured trend went on: pretrained - random fitted as a
    straight line in log10 FLOPs through the points (least squares), solved for the FLOPs at which it
    reaches the largest point's interval half-width (so its interval would clear zero); for STS-B also
    the FLOPs at which the pretrained score reaches the n-gram baseline. {task: FLOPs or None (no rising
    trend)}; a guess from few points, labelled so wherever it is printed."""
    out: dict = {}
    pts = sorted(points, key=lambda p: p["flops"])
    if len(pts) < 2:
        return out
    x = np.log10([p["flops"] for p in pts])
    for task in pts[-1]["tasks"]:
        rows = [p["tasks"].get(task, {}) for p in pts]
        if any("diff" not in r for r in rows):
            continue
        last = rows[-1]
        half = (last["high"] - last["low"]) / 2 if math.isfinite(last.get("high", float("nan"))) else float("nan")
        out[task] = _solve(x, [r["diff"] for r in rows], half) if last["low"] <= 0 else pts[-1]["flops"]
        if task == "stsb" and all("ngram" in r for r in rows):
            out["stsb above n-gram"] = _solve(x, [r["pretrained"] for r in rows], last["ngram"])
    return out


def _solve(x: np.ndarray, y: list[float], target: float) -> float | None:
    slope, icept = np.polyfit(x, y, 1)
    if not (slope > 1e-6 and math.isfinite(target)):
        return None
    exponent = (target - icept) / slope
    return float(10 ** exponent) if exponent < 30 else None  # beyond 1e30 FLOPs: no trend worth the name


def _nanmean(xs: list[float]) -> float:
    xs = [x for x in xs if math.isfinite(x)]
    return float(np.mean(xs)) if xs else float("nan")


def _hours(p: dict) -> str:
    """A point's pretraining core-hours: as measured, and at its fastest logged rate where lower."""
    best = p.get("core_hours_best", float("nan"))
    extra = (f" as measured beside other jobs ({best:.2f} at its fastest logged rate)"
             if math.isfinite(best) and best < 0.9 * p["core_hours"] else "")
    return f"{p['core_hours']:.2f} core-hours{extra}"


PLAUSIBLE = 1e20  # FLOPs: past this a straight line in log FLOPs says no more than "not at this scale"


def _budget_needed(needs: list[float], rate: float) -> str:
    if len(needs) < 2:
        return ""
    f = max(needs)
    if f > PLAUSIBLE:
        return f"; both conditions only past {PLAUSIBLE:.0e} FLOPs: no budget a CPU (or this model size) reaches"
    return (f"; both conditions at about {f:.3g} FLOPs, {f * rate:.0f} core-hours "
            f"({f * rate / 48:.1f} days of a 2-core machine)")


def sentence(points: list[dict], family: str = "bert") -> str:
    """The frontier's one sentence for ``family`` at the protocol's default training-set size."""
    mine = [p for p in points if p["family"] == family and p["train_examples"] == DEFAULT_SIZE]
    if not mine:
        return f"No {family} point at 4,000 training examples is recorded yet."
    for p in sorted(mine, key=lambda p: p["flops"]):
        stsb = p["tasks"].get("stsb", {})
        if len(p["transfers_on"]) >= MIN_TASKS and stsb.get("beats_ngram"):
            return (f"{family} first beats its random-init twin beyond the 95% interval on {len(p['transfers_on'])} "
                    f"of {len(p['tasks'])} tasks ({', '.join(p['transfers_on'])}) and the n-gram baseline on STS-B "
                    f"at {p['flops']:.3g} FLOPs: {_hours(p)} of pretraining on "
                    f"{', '.join(p['machines'])}.")
    top = max(mine, key=lambda p: p["flops"])
    stsb = top["tasks"].get("stsb", {})
    guess = extrapolate(mine)
    best = top.get("core_hours_best", float("nan"))
    rate = (best if math.isfinite(best) else top["core_hours"]) / top["flops"]  # core-hours a FLOP, least shared
    tasks = sorted((f, t) for t, f in guess.items() if f is not None and t != "stsb above n-gram")
    needs = [f for f in (tasks[MIN_TASKS - 1][0] if len(tasks) >= MIN_TASKS else None,
                         guess.get("stsb above n-gram")) if f is not None]
    trend = ("" if len(mine) < 2 else
             " Extrapolated along a straight line in log FLOPs through the " + str(len(mine)) + " measured points "
             "(a guess, not a measurement): " + ("; ".join(f"{t} at {f:.3g}" for f, t in tasks) or "no task rises")
             + (f"; STS-B above the n-gram baseline at {guess['stsb above n-gram']:.3g}"
                if guess.get("stsb above n-gram") else "; STS-B's pretrained score does not rise toward the n-gram "
                "baseline") + (f"; {MIN_TASKS} tasks at about {tasks[MIN_TASKS - 1][0]:.3g} FLOPs "
                               f"({tasks[MIN_TASKS - 1][0] * rate:.1f} core-hours)" if len(tasks) >= MIN_TASKS else "")
             + _budget_needed(needs, rate) + ".")
    return (f"At no measured budget up to {top['flops']:.3g} FLOPs ({_hours(top)} on "
            f"{', '.join(top['machines'])}) does {family} beat its random-init twin beyond the 95% interval on "
            f"{MIN_TASKS} of the tasks together with the n-gram baseline on STS-B: at {top['flops']:.3g} it transfers "
            f"on {len(top['transfers_on'])} ({', '.join(top['transfers_on']) or 'none'}), and on STS-B it scores "
            f"{_fmt(stsb.get('pretrained'))} against the n-gram baseline's {_fmt(stsb.get('ngram'))}." + trend)


def _fmt(x: float | None, nd: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def table(point: dict) -> str:
    """"Did pretraining help?" for one point: per task, pretrained vs random-init vs n-gram vs majority."""
    head = ("| task | pretrained | random init | pretrained - random [95%] | transfers | probe: pretrained / random "
            "| n-gram | majority | collapses (pt / random) | rate, epoch chosen (pt; random) |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for task, r in point["tasks"].items():
        chosen = "; ".join(f"{c['learning_rate']:g}, {c['epoch']:g}" for c in r["chosen"])
        rc = r.get("random_chosen")
        rc = f"{rc['learning_rate']:g}, {rc['epoch']:g}" if rc else "–"
        lines.append(
            f"| {task} | {_fmt(r['pretrained'])} | {_fmt(r.get('random'))} | {_fmt(r.get('diff'), 3)} "
            f"[{_fmt(r.get('low'))}, {_fmt(r.get('high'))}] | {'yes' if r.get('transfers') else 'no'} "
            f"| {_fmt(r['probe'])} / {_fmt(r.get('probe_random'))} | {_fmt(r.get('ngram'))} "
            f"| {_fmt(r.get('majority'))} | {r['collapses']}/{r['fine_tunings']} / {r.get('random_collapses', '–')}"
            f"/{r['seeds']} | {chosen}; {rc} |")
    return head + "\n".join(lines)


def markdown(result: dict) -> str:
    parts = []
    for p in result["points"]:
        r0 = next(iter(p["tasks"].values()))
        parts.append(f"**{p['family']} at {p['flops']:.3g} FLOPs**, fine-tuned on {p['train_examples'] or 'all'} "
                     f"training examples (less the held-out fifth); {r0['runs']} pretraining run(s) x {r0['seeds']} "
                     f"seeds, interval over {r0['interval_over']}; pretraining {_hours(p)} on "
                     f"{', '.join(p['machines'])}.\n\n{table(p)}\n")
    return "\n".join(parts) + f"\n{result['sentence']}\n"


def write_report(folders: list[Path], out: Path, md: Path | None = None) -> str:
    """transfer.json and the plots in ``out``; with ``md``, its <!-- transfer --> block rewritten."""
    result = frontier(folders)
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    from encoderlab.transfer.plots import plot_curves, plot_frontier, plot_sizes

    plot_frontier(result, out / "frontier_flops.png")
    plot_sizes(result, out / "frontier_sizes.png")
    default = [json.loads(p.read_text()) for f in folders for p in sorted(f.glob("*.json"))
               if not p.name.startswith("baselines__")]
    plot_curves([r for r in default if r["protocol"]["max_train_examples"] == 4000], out / "finetune_curves.png")
    text = markdown(result)
    if md is not None:
        pictures = [(f, t) for f, t in (("frontier_flops.png", "scores against pretraining FLOPs"),
                                        ("frontier_sizes.png", "scores against fine-tuning examples"),
                                        ("finetune_curves.png", "the fine-tuning curves chosen from"))
                    if (out / f).is_file()]
        text += "\n" + "\n\n".join(f"![{t}]({os.path.relpath(out / f, md.parent)})" for f, t in pictures) + "\n"
        body = md.read_text()
        start, end = "<!-- transfer -->", "<!-- /transfer -->"
        if start not in body or end not in body:
            raise ValueError(f"{md}: no {start} ... {end} block to write the tables into")
        md.write_text(body[: body.index(start) + len(start)] + "\n" + text + body[body.index(end):])
    return text
