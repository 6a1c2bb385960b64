"""The frontier's pictures, in each task's own units: one panel per task, the pretrained network's
mean dev score against pretraining FLOPs (error bars: the interval of pretrained - random, placed on
the random-init mean, so a bar clear of the random-init line is a task that transfers), the
random-init twin, the linear probes, the n-gram baseline and the majority class as lines."""

from __future__ import annotations

from pathlib import Path

from encoderlab.study.plots import _pyplot, flops_axis
from encoderlab.transfer.protocol import DEFAULT_SIZE

FAMILY_COLOURS = {"bert": "tab:blue", "electra": "tab:orange", "albert": "tab:green"}
METRIC = {"cola": "MCC", "sst2": "accuracy", "mrpc": "mean of accuracy and F1", "stsb": "mean of Pearson and Spearman",
          "rte": "accuracy"}


def _task_panels(plt, tasks: list[str]):
    cols = min(3, len(tasks))
    rows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for a in axes.flat[len(tasks):]:
        a.set_visible(False)
    return fig, dict(zip(tasks, axes.flat))


def _lines(a, row: dict, family: str) -> None:
    """The horizontal reference lines of one task (a point's row supplies them)."""
    colour = FAMILY_COLOURS.get(family, "tab:purple")
    if "random" in row:
        a.axhline(row["random"], color=colour, ls="--", lw=1, label=f"{family} random init (fine-tuned)")
        a.axhline(row["probe_random"], color=colour, ls=":", lw=1, label=f"{family} random init (linear probe)")
    if "ngram" in row:
        a.axhline(row["ngram"], color="black", ls="-.", lw=1, label="n-gram baseline")
        a.axhline(row["majority"], color="grey", ls="-", lw=0.8, label="majority class")


def plot_frontier(result: dict, out: Path) -> Path | None:
    """Scores against pretraining FLOPs at the default training-set size; None when nothing to draw."""
    points = [p for p in result["points"] if p["train_examples"] == DEFAULT_SIZE]
    if not points:
        return None
    plt = _pyplot()
    tasks = sorted({t for p in points for t in p["tasks"]})
    fig, axes = _task_panels(plt, tasks)
    for family in sorted({p["family"] for p in points}):
        mine = sorted((p for p in points if p["family"] == family), key=lambda p: p["flops"])
        colour = FAMILY_COLOURS.get(family, "tab:purple")
        for task, a in axes.items():
            have = [p for p in mine if task in p["tasks"]]
            if not have:
                continue
            xs = [p["flops"] for p in have]
            rows = [p["tasks"][task] for p in have]
            ys = [r["pretrained"] for r in rows]
            lo = [r["pretrained"] - (r["random"] + r["low"]) if "low" in r else 0 for r in rows]
            hi = [(r["random"] + r["high"]) - r["pretrained"] if "high" in r else 0 for r in rows]
            a.errorbar(xs, ys, yerr=[lo, hi], color=colour, marker="o", capsize=3,
                       label=f"{family} pretrained (fine-tuned; bar: 95% interval vs random)")
            a.plot(xs, [r["probe"] for r in rows], color=colour, marker="s", ls=":", label=f"{family} linear probe")
            _lines(a, rows[-1], family)
    span = [p["flops"] for p in points]
    for task, a in axes.items():
        flops_axis(a)
        # one x range for every panel: a task measured at fewer budgets (MRPC, RTE) spans less than a
        # factor of 2, where the log locator's fallback labelled every minor tick over the next
        a.set_xlim(min(span) / 1.25, max(span) * 1.25)
        a.set(title=task, ylabel=METRIC.get(task, "score"))
        a.grid(alpha=0.3)
    handles, labels = next(iter(axes.values())).get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"Did pretraining help? Dev scores against pretraining FLOPs ({DEFAULT_SIZE} training examples)")
    fig.tight_layout(rect=(0, 0.1, 1, 0.96))
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def plot_sizes(result: dict, out: Path) -> Path | None:
    """Scores against the number of fine-tuning examples, one panel per task with two sizes or more,
    one line per family and budget; None when no task has two sizes."""
    by_task: dict[str, list[tuple[dict, dict]]] = {}
    for p in result["points"]:
        for task, row in p["tasks"].items():
            by_task.setdefault(task, []).append((p, row))
    by_task = {t: v for t, v in by_task.items() if len({p["train_examples"] for p, _ in v}) > 1}
    if not by_task:
        return None
    plt = _pyplot()
    fig, axes = _task_panels(plt, sorted(by_task))
    for task, a in axes.items():
        groups: dict[tuple[str, float], list[tuple[dict, dict]]] = {}
        for p, row in by_task[task]:
            groups.setdefault((p["family"], p["flops"]), []).append((p, row))
        # One line per (family, budget), a budget's shade darker as it grows; the twin, the n-gram
        # baseline and the majority class do not depend on the budget: drawn once, from the family's
        # points with the most sizes.
        budgets = sorted({flops for _, flops in groups})
        for (family, flops), items in sorted(groups.items()):
            items.sort(key=lambda pr: pr[0]["train_examples"] or 10**9)
            xs = [(p["train_examples"] or 0) * 0.8 for p, _ in items]  # trained on: less the held-out fifth
            shade = 0.45 + 0.55 * (budgets.index(flops) + 1) / len(budgets)
            a.plot(xs, [r["pretrained"] for _, r in items], color=FAMILY_COLOURS.get(family, "tab:purple"),
                   alpha=shade, marker="o", label=f"{family} {flops:.2g} FLOPs, pretrained")
        for family in sorted({f for f, _ in groups}):
            items = max((v for (f, _), v in groups.items() if f == family), key=len)
            xs = [(p["train_examples"] or 0) * 0.8 for p, _ in items]
            colour = FAMILY_COLOURS.get(family, "tab:purple")
            a.plot(xs, [r.get("random", float("nan")) for _, r in items], color=colour, marker="x", ls="--",
                   label=f"{family} random init")
            a.plot(xs, [r.get("ngram", float("nan")) for _, r in items], color="black", ls="-.",
                   label="n-gram baseline")
            a.plot(xs, [r.get("majority", float("nan")) for _, r in items], color="grey", label="majority class")
        a.set(xscale="log", xlabel="fine-tuning examples", ylabel=METRIC.get(task, "score"), title=task)
        sizes = sorted({(p["train_examples"] or 0) * 0.8 for p, _ in by_task[task]})
        a.set_xticks(sizes, [f"{x:,.0f}" for x in sizes])
        a.minorticks_off()
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def plot_curves(records: list[dict], out: Path) -> Path | None:
    """The fine-tuning curves the protocol chose from: per task, each network's mean held-out score
    over its seeds at the end of each epoch, one line per learning rate (solid: the checkpoint at each
    budget; dashed: the random-init twin), the chosen point circled. None when there is no record."""
    by_task: dict[str, list[dict]] = {}
    for rec in records:
        by_task.setdefault(rec["task"], []).append(rec)
    if not by_task:
        return None
    plt = _pyplot()
    fig, axes = _task_panels(plt, sorted(by_task))
    for task, a in axes.items():
        for rec in sorted(by_task[task], key=lambda r: (r["init"], r.get("flops") or 0)):
            fair = rec["fair"]
            colour = "tab:grey" if rec["init"] == "random" else None
            name = "random init" if rec["init"] == "random" else f"{rec['family']} {rec['flops']:.2g}"
            rates = sorted({t["learning_rate"] for t in fair["trials"]})
            for i, lr in enumerate(rates):
                ts = [t for t in fair["trials"] if t["learning_rate"] == lr]
                n = min(len(t["curve"]) for t in ts)
                ys = [sum(t["curve"][e]["score"]["heldout"] for t in ts) / len(ts) for e in range(n)]
                xs = [ts[0]["curve"][e]["epoch"] for e in range(n)]
                line, = a.plot(xs, ys, ls="--" if rec["init"] == "random" else "-", marker="os^"[i % 3],
                               color=colour, alpha=0.9, label=f"{name}, lr {lr:g}")
                colour = line.get_color()
                if lr == fair["chosen"]["learning_rate"]:
                    a.plot([fair["chosen"]["epoch"]], [fair["chosen"]["heldout"]], "o", ms=12, mfc="none",
                           color=colour)
        a.set(title=task, xlabel="epoch", ylabel=f"held-out {METRIC.get(task, 'score')}")
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Fine-tuning curves on the held-out fifth of train (mean over seeds; circle: the point chosen)")
    fig.tight_layout()
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out
