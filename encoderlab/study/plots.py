"""The claims' pictures: a forest plot (every comparison's difference with its 95% interval, the zero
line and, for claims of matching, the equivalence margin) and small multiples of the learning curves
(one panel per claim, only the variants it compares, shared axes). Legends sit outside the data."""

from __future__ import annotations

from pathlib import Path

from encoderlab.study.claims import Claim, plateau_metric
from encoderlab.study.metrics import FLOPS
from encoderlab.study.results import VariantResult

# Verdict colours: a reader sees at a glance which rows decide and how.
COLOURS = {"holds": "tab:green", "does not hold": "tab:red", "inconclusive": "tab:grey"}


def _colour(verdict: str) -> str:
    return "tab:blue" if verdict.startswith("equivalent") else COLOURS.get(verdict, "tab:grey")


def flops_axis(a) -> None:
    """Log FLOPs axis labelled at 1, 2 and 5 per decade: a study spans about one decade, where
    matplotlib's default labels every minor tick and the labels overlap."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a.set(xlabel="pretraining FLOPs", xscale="log")
    a.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    # two significant digits: a study whose checkpoints all sit near one budget gets distinct labels
    a.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:.2g}".replace("e+", "e")))
    a.xaxis.set_minor_formatter(NullFormatter())


def forest_plot(claims: list[Claim], out: Path, margin: float, name: str = "claims_forest.png") -> str | None:
    """One panel per claim with comparisons: each comparison's difference and interval (aggregate rows
    bold, its per-task rows below it, lighter), the zero line, and ±margin shaded where a comparison is
    a claim of matching. None when no claim has a comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [c for c in claims if any(x.estimate for x in c.comparisons)]
    if not panels:
        return None
    heights = [sum(1 + len(x.per_task) for x in c.comparisons) for c in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.28 * sum(heights) + 0.9 * len(panels)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, c in zip(axes[:, 0], panels):
        labels, y = [], 0
        for x in c.comparisons:
            for task, (e, verdict) in [(None, (x.estimate, x.verdict))] + list(x.per_task.items()):
                if e is not None:
                    ax.errorbar(e.diff, -y, xerr=[[e.diff - e.lo], [e.hi - e.diff]], fmt="o" if task is None else ".",
                                color=_colour(verdict), alpha=1.0 if task is None else 0.55,
                                markersize=6 if task is None else 4, capsize=2, linewidth=2 if task is None else 1)
                labels.append(x.label if task is None else f"on {task}")
                y += 1
        ax.axvline(0, color="black", linewidth=0.8)
        if any(x.kind in ("at_least", "at_most") for x in c.comparisons):
            ax.axvspan(-margin, margin, color="tab:blue", alpha=0.1, label=f"±{margin:g} (equivalence margin)")
        ax.set_yticks([-i for i in range(len(labels))], labels, fontsize=7)
        ax.set_ylim(-len(labels) + 0.5, 0.5)
        ax.set_title(f"Claim {c.claim}: {c.verdict}", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    axes[-1, 0].set_xlabel("difference in mean score (95% interval)", fontsize=8)
    handles = [plt.Line2D([], [], color=col, marker="o", linestyle="", label=v) for v, col in
               [("holds", COLOURS["holds"]), ("does not hold", COLOURS["does not hold"]),
                ("inconclusive", COLOURS["inconclusive"]), ("equivalent within the margin", "tab:blue")]]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.78, 0.995), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 0.77, 1))
    fig.savefig(out / name, dpi=110, bbox_inches="tight")  # a long comparison label widens the canvas, not cut
    plt.close(fig)
    return name


def claim_curves(claims: list[Claim], variants: dict[str, VariantResult], out: Path,
                 name: str = "claims_curves.png") -> str | None:
    """Small multiples: per quality claim, the held-out accuracy its plateau test reads (an ELECTRA's
    generator's) against FLOPs for the variants it compares, on shared axes, legend beside each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(c, [n for n in dict.fromkeys(c.compared) if n in variants]) for c in claims
              if c.comparisons and c.compared]
    panels = [(c, ns) for c, ns in panels if any(_curve(variants[n]) for n in ns)]
    if not panels:
        return None
    cols = min(2, len(panels))  # one claim: one panel, no empty column beside it
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 2.8 * nrows), sharex=True, sharey=True, squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, (c, names) in zip(axes.flat, panels):
        for i, n in enumerate(names):
            pts = _curve(variants[n])
            if pts:
                ax.plot(*zip(*pts), marker="os^Dv"[i % 5], color=cmap(i % 10), label=n, markersize=4)
        ax.set_title(f"Claim {c.claim}", fontsize=9, loc="left")
        flops_axis(ax)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("held-out MLM accuracy\n(ELECTRA: generator)", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _curve(r: VariantResult) -> list[tuple[float, float]]:
    return [(e[FLOPS], acc) for e in r.curve.eval if (acc := plateau_metric(r, e)) is not None and FLOPS in e]
