"""The study's pictures. Per claim: a forest plot (every comparison's difference with its 95%
interval, the zero line and, for claims of matching, the equivalence margin) and small multiples of
the learning curves (one panel per claim, only the variants it compares, shared axes). For the
study: held-out loss, zero-shot and downstream scores against FLOPs, speed and memory bars. Legends
sit outside the data."""

from __future__ import annotations

from pathlib import Path

from encoderlab.study.claims import Claim, plateau_metric, steady_train
from encoderlab.study.metrics import EVAL_DISC_AUC, EVAL_GEN_LOSS, EVAL_MLM_LOSS, FLOPS, PEAK_MEMORY_MB, TOKENS_PER_S
from encoderlab.study.results import StudyResults, VariantResult

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
    plt = _pyplot()

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
    return _save(plt, fig, out, name, rect=(0, 0, 0.77, 1))  # the verdict legend right of the panels


def claim_curves(claims: list[Claim], variants: dict[str, VariantResult], out: Path,
                 name: str = "claims_curves.png") -> str | None:
    """Small multiples: per quality claim, the held-out accuracy its plateau test reads (an ELECTRA's
    generator's) against FLOPs for the variants it compares, on shared axes, legend beside each panel."""
    plt = _pyplot()

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
    return _save(plt, fig, out, name)


def _curve(r: VariantResult) -> list[tuple[float, float]]:
    return [(e[FLOPS], acc) for e in r.curve.eval if (acc := plateau_metric(r, e)) is not None and FLOPS in e]


def gpu_memory(V: dict[str, VariantResult]) -> bool:
    """The trainer logs the CUDA allocator's peak on a GPU, the process's max RSS on a CPU."""
    return any(r.curve.train and r.curve.train[-1].get("device") == "cuda" for r in V.values())


def _eval_loss(rec: dict) -> float | None:
    return rec.get(EVAL_MLM_LOSS, rec.get(EVAL_GEN_LOSS))


def study_figures(results: StudyResults, out: Path) -> list[str]:
    """The study's figures against FLOPs (held-out loss and AUC, zero-shot curves, downstream scores)
    and its speed and memory bars; [] where matplotlib is not installed."""
    try:
        plt = _pyplot()
    except ImportError:
        return []
    files = []
    V = results.variants
    # One colour and marker per variant, the same in every plot: the claims study has 15 variants and
    # the default cycle repeats after 10.
    cmap = plt.get_cmap("tab20")
    style = {n: {"color": cmap(i % 20), "marker": "os^Dv"[i % 5]} for i, n in enumerate(V)}

    # The discriminator panel only when some variant has one: an empty axis reads as a failed run.
    has_disc = any(EVAL_DISC_AUC in e for r in V.values() for e in r.curve.eval)
    fig, ax = plt.subplots(1, 1 + has_disc, figsize=(11 if has_disc else 6.5, 4), squeeze=False)
    ax = ax[0]
    for name, r in V.items():
        ev = [e for e in r.curve.eval if _eval_loss(e) is not None]
        if ev:
            # All-Tokens-MLM's loss averages over every token, copies included: not comparable.
            every = r.objective().get("variant") == "all_tokens_mlm"
            ax[0].plot([e[FLOPS] for e in ev], [_eval_loss(e) for e in ev],
                       label=name + (" (over every token)" if every else ""), **style[name])
        auc = [e for e in r.curve.eval if EVAL_DISC_AUC in e]
        if auc:
            ax[1].plot([e[FLOPS] for e in auc], [e[EVAL_DISC_AUC] for e in auc], label=name, **style[name])
    ax[0].set(ylabel="held-out MLM loss (ELECTRA: generator)", title="Held-out MLM loss")
    if has_disc:
        ax[1].set(ylabel="discriminator ROC AUC", title="ELECTRA discriminators")
    _flops_axes(ax)
    files.append(_save(plt, fig, out, "loss_vs_flops.png"))

    # Zero-shot learning curves at every evaluated checkpoint: held-out MLM accuracy against the
    # unigram and bigram baselines, and minimal pairs (PLL; an ELECTRA discriminator dashed).
    if any(r.measure.zeroshot is not None for r in V.values()):
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for name, r in V.items():
            ev = [(e[FLOPS], acc) for e in r.curve.eval if (acc := plateau_metric(r, e)) is not None]
            if ev:
                ax[0].plot(*zip(*ev), label=name, **style[name])
            zs = sorted((r.measure.zeroshot or {}).values(), key=lambda z: z["flops"])
            for net, ls in (("mlm", "-"), ("generator", "-"), ("discriminator", "--")):
                pts = [(z["flops"], z["minimal_pairs"][net]["accuracy"]) for z in zs if net in z["minimal_pairs"]]
                if pts:
                    ax[1].plot(*zip(*pts), linestyle=ls, label=name + (" (disc.)" if net == "discriminator" else ""),
                               **style[name])
        for level, what in ((results.mlm_baselines or {}).get("unigram"), "unigram"), \
                           ((results.mlm_baselines or {}).get("bigram"), "bigram"):
            if level is not None:
                ax[0].axhline(level, color="grey", linestyle=":", linewidth=1)
                ax[0].annotate(what, (0.01, level), xycoords=("axes fraction", "data"), fontsize=7, color="grey")
        ax[1].axhline(0.5, color="grey", linestyle=":", linewidth=1)
        ax[0].set(ylabel="held-out MLM accuracy (ELECTRA: generator)", title="Held-out MLM accuracy")
        ax[1].set(ylabel="accuracy (a tie counts as wrong)", title="Minimal pairs at every checkpoint")
        _flops_axes(ax)
        files.append(_save(plt, fig, out, "zeroshot_vs_flops.png"))

    fracs = {k.fraction for r in V.values() for k in r.fine_tunings()}
    if len(fracs) == 1:  # one budget: a line per variant would be a point each, all at one x
        files.append(_score_dots(plt, V, style, out))
        fracs = set()
    fig, ax = plt.subplots(figsize=(6.5, 4)) if fracs else (None, None)
    for name, r in (V.items() if fracs else []):
        pts = {}
        for key, ft in r.fine_tunings().items():
            pts.setdefault(r.checkpoints[key.fraction].flops, []).append(ft["score"])
        if pts:
            xs = sorted(pts)
            med = [sum(s["median"] for s in pts[x]) / len(pts[x]) for x in xs]
            lo = [sum(s["min"] for s in pts[x]) / len(pts[x]) for x in xs]
            hi = [sum(s["max"] for s in pts[x]) / len(pts[x]) for x in xs]
            line = ax.plot(xs, med, label=name, **style[name])[0]
            ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color())
    if fracs:
        ax.set(ylabel="downstream score (median; band: min-max over seeds)", title="Downstream score against compute")
        _flops_axes([ax])
        files.append(_save(plt, fig, out, "score_vs_flops.png"))

    names = list(V)
    fig, ax = plt.subplots(1, 3, figsize=(13, 4))
    tps = [steady_train(V[n])[TOKENS_PER_S] for n in names]
    mem = [steady_train(V[n])[PEAK_MEMORY_MB] for n in names]
    colors = [style[n]["color"] for n in names]
    ax[0].bar(names, tps, color=colors)
    ax[0].set(title="training throughput", ylabel="tokens/s")
    ax[1].bar(names, mem, color=colors)
    ax[1].set(title="training peak memory",
              ylabel="MB (" + ("CUDA allocator peak" if gpu_memory(V) else "process max RSS") + ")")
    lat = [V[n].measure.latency_ms or {} for n in names]
    if lat and lat[0]:
        import numpy as np

        x = np.arange(len(names))
        for i, k in enumerate(sorted(lat[0])):
            ax[2].bar(x + i * 0.2, [d[k] for d in lat], width=0.2, label=k)
        ax[2].set_xticks(x + 0.3, names)
        ax[2].set(title="inference latency (seq 128)", ylabel="ms", yscale="log")
        ax[2].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the bars
    for a in ax:
        # Anchor each rotated label's end at its tick, or long names sit under the neighbouring bar.
        plt.setp(a.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor", fontsize=7)
    files.append(_save(plt, fig, out, "speed_memory.png"))
    return files


def _score_dots(plt, V: dict[str, VariantResult], style: dict, out: Path) -> str:
    """Every variant's task-mean downstream score at the study's one fine-tuned budget, best first: the
    median over seeds with the min-max band, the variants named on the axis (no legend to read)."""
    rows = sorted(((n, r.final_score()) for n, r in V.items() if r.final_score()), key=lambda x: x[1]["median"])
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1.2))
    for i, (n, _) in enumerate(rows):
        done = V[n].fine_tunings()
        lo = sum(f["score"].get("min", f["score"]["median"]) for f in done.values()) / len(done)
        hi = sum(f["score"].get("max", f["score"]["median"]) for f in done.values()) / len(done)
        ax.plot([lo, hi], [i, i], color=style[n]["color"], linewidth=2, alpha=0.5)
        ax.plot(rows[i][1]["median"], i, color=style[n]["color"], marker=style[n]["marker"])
    ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=7)
    ax.set(xlabel="downstream score, task mean (median over seeds; line: min-max)",
           title="Downstream score at the full budget")
    return _save(plt, fig, out, "score_vs_flops.png")


def _flops_axes(axes) -> None:
    """FLOPs on the x axis of each, and a legend beside the axes (outside the data) where something was
    drawn: the claims study has 17 variants, whose legend inside covered half a panel."""
    handles: dict = {}
    for a in axes:
        flops_axis(a)
        for h, label in zip(*a.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:  # one legend for the figure, right of its last panel
        axes[-1].legend(handles.values(), handles.keys(), fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        frameon=False, ncol=1 if len(handles) <= 22 else 2)


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files only: no display on a server or in CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, out: Path, name: str, rect: tuple | None = None) -> str:
    """Every figure is saved alike: laid out (within ``rect`` where a legend needs the rest), the canvas
    widened to take what lies outside the axes (legends, a long comparison label), then closed."""
    fig.tight_layout(rect=rect)
    fig.savefig(out / name, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return name
