"""The study's pictures. Per claim: a forest plot (every comparison's difference with its 95%
interval, the aggregate and each task in its own metric, every axis naming its unit, one x scale per
metric; the zero line and, for claims of matching, the equivalence margin) and small multiples of the
learning curves (one panel per claim, only the variants it compares, shared axes). For the study:
held-out loss and zero-shot accuracy against FLOPs (the count models' and chance's levels named under
their panel), downstream scores with a panel per task in its metric and the task's references drawn
across (random-init controls, bag-of-words, majority class), speed and memory bars. Legends sit
outside the data."""

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


# The metrics a fine-tuning's summary holds (eval/metrics.METRICS), as an axis names them.
METRIC_NAMES = {"acc": "accuracy", "mcc": "MCC", "f1": "F1", "pearson": "Pearson", "spearman": "Spearman"}
# The claims whose comparisons read a probe, not the fine-tuning scores: (what a row's difference is
# of, its axis label). claims.generation_start, claims.robustness, claims_arms.discriminator_prompting.
PROBE_UNITS = {12: ("token F1", "difference in token F1 (greedy decodes, generation task)"),
               13: ("accuracy drop", "difference in accuracy drop under synonym substitution"),
               17: ("prompted accuracy", "difference in prompted accuracy (mean over the prompted tasks)")}


def metric_name(metrics) -> str:
    """A task's score as an axis names it: its one metric, or the mean of its metrics (the task's
    GLUE number, eval/metrics.task_score): "MCC", "accuracy", "Pearson/Spearman mean"."""
    names = [METRIC_NAMES.get(m, m) for m in metrics]
    return "score" if not names else names[0] if len(names) == 1 else "/".join(names) + " mean"


def task_label(task: str) -> str:
    """A task's printed name (the built-ins' GLUE spelling: "CoLA", "SST-2", "STS-B")."""
    from encoderlab.eval.tasks import BUILTIN

    return BUILTIN[task].subdir or task if task in BUILTIN else task


def task_metric(task: str, summary: dict | None = None) -> str:
    """The metric name of a task's score: from a fine-tuning's summary where there is one (its keys are
    the metrics), else from the built-in task's spec; "score" for a task neither names."""
    if summary:
        return metric_name(summary)
    from encoderlab.eval.tasks import BUILTIN

    return metric_name(BUILTIN[task].metrics) if task in BUILTIN else "score"


def _zero_shot(row: str) -> bool:
    """BLiMP dev's signal test (its key: blimp.label) or its per-task row beside the tasks (the label and
    ", zero-shot": judge.Judge.compare), not a fine-tuning task."""
    return row.startswith("BLiMP ") or row.endswith("zero-shot")


def _aggregate_unit(c: Claim) -> tuple[str, str]:
    """(quantity, axis label) of a claim's aggregate rows. A probe claim's its probe's; a fine-tuning claim's
    the mean over the tasks that enter it (judge.Judge.mean: those its variants learn beyond the control,
    every task without one), which is that task's metric when one task enters."""
    if c.claim in PROBE_UNITS:
        return PROBE_UNITS[c.claim]
    tasks = [t for t, (ok, _) in c.signal.items() if ok and not _zero_shot(t)] if c.signal else \
        list(dict.fromkeys(t for x in c.comparisons for t in x.per_task if not _zero_shot(t)))
    if len(tasks) == 1:
        t = tasks[0]
        only = " (only fine-tuned task beyond the control)" if c.signal else ""
        return t, f"difference in {task_label(t)} {task_metric(t)}{only}"
    listed = ", ".join(f"{task_label(t)} {task_metric(t)}" for t in tasks) if tasks else "each in its metric"
    return "task mean", f"difference in task-mean score ({listed})"


def _row_unit(task: str) -> tuple[str, str, str]:
    """(quantity, axis label, title) of a comparison's per-task row."""
    if _zero_shot(task):
        return "zero-shot", "difference in accuracy on minimal pairs", task
    return task, f"difference in {task_label(task)} {task_metric(task)}", f"on {task_label(task)}"


def forest_plot(claims: list[Claim], out: Path, margin: float, name: str = "claims_forest.png") -> str | None:
    """A row of panels per claim with comparisons, one row per comparison in each: its first panel the
    aggregate difference the verdict reads (95% interval, coloured by verdict), the next ones its per-task
    rows in their own metrics (lighter: beside the verdict). Every panel's x axis names its unit; panels
    of one metric share their limits, so their zero lines and widths compare at a glance. The zero line,
    and ±margin shaded where a comparison is a claim of matching. None when no claim has a comparison."""
    plt = _pyplot()

    panels = [c for c in claims if any(x.estimate for x in c.comparisons)]
    if not panels:
        return None
    layout = []  # per claim: [(quantity, axis label, title, [(row, estimate, verdict, aggregate)])]
    for c in panels:
        q, unit = _aggregate_unit(c)
        cells: dict[str, tuple[str, str, list]] = {q: (unit, f"Claim {c.claim}: {c.verdict}", [])}
        for i, x in enumerate(c.comparisons):
            if x.estimate is not None:
                cells[q][2].append((i, x.estimate, x.verdict, True))
            for task, (e, verdict) in x.per_task.items():
                if e is not None:
                    tq, tunit, title = _row_unit(task)
                    cells.setdefault(tq, (tunit, f"beside the verdict: {title}", []))[2].append((i, e, verdict, False))
        layout.append([(q, u, t, rows) for q, (u, t, rows) in cells.items() if rows])
    # One x range per quantity over every claim: the interval ends, zero, and the margin where it is shaded.
    limits: dict[str, list[float]] = {}
    for c, cells in zip(panels, layout):
        matching = any(x.kind in ("at_least", "at_most") for x in c.comparisons)
        for q, _, _, rows in cells:
            ends = [0.0] + [v for _, e, _, _ in rows for v in (e.lo, e.hi)] + ([-margin, margin] if matching else [])
            lim = limits.setdefault(q, [min(ends), max(ends)])
            lim[:] = [min(lim[0], *ends), max(lim[1], *ends)]
    for lim in limits.values():
        pad = 0.06 * (lim[1] - lim[0] or 1.0)
        lim[:] = [lim[0] - pad, lim[1] + pad]

    ncols = max(len(cells) for cells in layout)
    heights = [len(c.comparisons) for c in panels]
    fig = plt.figure(figsize=(2.8 + 3.4 * ncols, 0.3 * sum(heights) + 1.05 * len(panels)))
    grid = fig.add_gridspec(len(panels), ncols, height_ratios=heights)
    for r, (c, cells) in enumerate(zip(panels, layout)):
        n = len(c.comparisons)
        matching = any(x.kind in ("at_least", "at_most") for x in c.comparisons)
        for col, (q, unit, title, rows) in enumerate(cells):
            ax = fig.add_subplot(grid[r, col])
            for i, e, verdict, agg in rows:
                ax.errorbar(e.diff, -i, xerr=[[e.diff - e.lo], [e.hi - e.diff]], fmt="o", color=_colour(verdict),
                            alpha=1.0 if agg else 0.6, markersize=6 if agg else 4.5, capsize=2,
                            linewidth=2 if agg else 1.2)
            ax.axvline(0, color="black", linewidth=0.8)
            if matching:
                ax.axvspan(-margin, margin, color="tab:blue", alpha=0.1)
            ax.set_xlim(*limits[q])
            ax.set_ylim(-n + 0.5, 0.5)
            ax.set_yticks([-i for i in range(n)], [x.label for x in c.comparisons] if col == 0 else [], fontsize=7)
            ax.tick_params(axis="x", labelsize=7)
            ax.set_xlabel(unit, fontsize=7)
            # the claim and its verdict; a per-task panel's rows are evidence beside the verdict, not in it
            ax.set_title(title, fontsize=9 if col == 0 else 7, loc="left", color="black" if col == 0 else "dimgrey")
    handles = [plt.Line2D([], [], color=col, marker="o", linestyle="", label=v) for v, col in
               [("holds", COLOURS["holds"]), ("does not hold", COLOURS["does not hold"]),
                ("inconclusive", COLOURS["inconclusive"]), ("equivalent within the margin", "tab:blue")]]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="tab:blue", alpha=0.1, label=f"±{margin:g} equivalence margin"))
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(handles), fontsize=7,
               frameon=False, title="difference A - B with its 95% interval; verdict:", title_fontsize=7,
               alignment="left")
    return _save(plt, fig, out, name)


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
        # The references as lines named in a legend under their panel: a name written at the line sat
        # under the curves that cross it.
        refs: list[list] = [[], []]
        for what, dash in (("unigram", ":"), ("bigram", "--")):
            if (level := (results.mlm_baselines or {}).get(what)) is not None:
                refs[0].append(ax[0].axhline(level, color="black", linestyle=dash, linewidth=1, zorder=1,
                                             label=f"{what} count model"))
        refs[1].append(ax[1].axhline(0.5, color="black", linestyle=":", linewidth=1, zorder=1, label="chance (0.5)"))
        ax[0].set(ylabel="held-out MLM accuracy (ELECTRA: generator)", title="Held-out MLM accuracy")
        ax[1].set(ylabel="accuracy (a tie counts as wrong)", title="Minimal pairs at every checkpoint")
        for a, r in zip(ax, refs):
            if r:  # an artist of its own: the variants' legend, which _flops_axes gives the last panel, stays
                legend = a.add_artist(a.legend(handles=r, fontsize=7, loc="upper center", ncol=len(r),
                                               bbox_to_anchor=(0.5, -0.14), frameon=False))
                legend.set_clip_on(False)  # add_artist clips it to the panel, and the saved canvas left it out
        _flops_axes(ax, skip={h.get_label() for r in refs for h in r})
        files.append(_save(plt, fig, out, "zeroshot_vs_flops.png"))

    if any(r.fine_tunings() for r in V.values()):
        files.append(task_scores(results, out))

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


# At most this many variants against FLOPs, each its own colour and marker (tab10, MARKERS).
MAX_SHOWN = 8
MARKERS = "osD^v<>p"
# Each shown variant's points sit this many decades of FLOPs beside the next one's: variants at one
# budget otherwise draw their median and interval over one another.
NUDGE = 0.018


def task_scores(results: StudyResults, out: Path, name: str = "score_vs_flops.png") -> str | None:
    """Downstream scores, one panel per task, each in its own metric (its axis names it), with the task's
    references drawn across: the random-init control of each shown variant's architecture, the
    bag-of-words baseline and the majority class. Scores are the first pretraining run's median over the
    fine-tuning seeds, bars the min-max (the report's task table). Where some variant was fine-tuned at
    several budgets: against pretraining FLOPs, those variants and the study's bert, albert and electra
    (a subset a reader can tell apart; every variant is in the report's table and claims_forest.png); at
    one budget, FLOPs say nothing: every variant, a row each, at that budget. None without fine-tunings."""
    plt = _pyplot()
    V = results.variants
    order = [t.get("name") for t in results.config.get("tasks") or [] if isinstance(t, dict)]
    done = {k.task for r in V.values() for k in r.fine_tunings()}
    tasks = [t for t in dict.fromkeys(order) if t in done] + sorted(done - set(order))
    if not tasks:
        return None
    summary = {t: next(ft.get("summary") for r in V.values() for k, ft in r.fine_tunings().items() if k.task == t)
               for t in tasks}
    at_flops = len({k.fraction for r in V.values() for k in r.fine_tunings()}) > 1
    fig = (_scores_against_flops if at_flops else _scores_at_one_budget)(plt, results, tasks)
    for ax, t in zip(fig.axes, tasks):  # the panels, in task order (the legends are no axes)
        ax.set_title(task_label(t), fontsize=9)
        (ax.set_ylabel if at_flops else ax.set_xlabel)(task_metric(t, summary[t]), fontsize=8)
    return _save(plt, fig, out, name)


def _score(ft: dict) -> tuple[float, float, float]:
    s = ft["score"]
    return s["median"], s.get("min", s["median"]), s.get("max", s["median"])


def _references(results: StudyResults, task: str, names: list[str]) -> list[tuple[str, float, dict, str | None]]:
    """(legend label, score, line style, the variant of ``names`` a control stands for) of a task's
    references: the random-init control of each of ``names``' architectures (judge.control_of), the
    bag-of-words baseline and the majority class."""
    from encoderlab.study.judge import control_of

    out, controls, base = [], results.controls, results.baselines.get(task) or {}
    if controls:
        shapes = {}  # architecture's variant -> the first of ``names`` it stands for
        for n in names:
            shapes.setdefault((controls.get("of") or {}).get(n) or controls.get("variant"), n)
        for shape, n in shapes.items():
            ctl = control_of(controls, n).get("tasks", {}).get(task)
            if ctl:
                label = f"random init, {shape}'s architecture" if len(shapes) > 1 else "random-init control"
                out.append((label, ctl["score"]["median"], {"linestyle": "--", "linewidth": 1.2}, n))
    if base.get("bow") is not None:
        out.append(("bag-of-words baseline", base["bow"], {"color": "black", "linestyle": "-.", "linewidth": 1},
                    None))
    if base.get("ngram") is not None:
        out.append(("n-gram baseline (scikit-learn)", base["ngram"], {"color": "black", "linestyle": ":",
                                                                      "linewidth": 1.2}, None))
    if base.get("majority") is not None:
        # wide and pale: a control or the bag-of-words at the same score (an MCC of 0) draws over it, not out
        out.append(("majority class (regression: a constant)", base["majority"],
                    {"color": "silver", "linestyle": "-", "linewidth": 4, "alpha": 0.6}, None))
    return out


def _shown(results: StudyResults) -> list[str]:
    """The variants drawn against FLOPs: the study's bert, albert and electra, then every variant
    fine-tuned at several budgets (a study with neither: its first variants), at most MAX_SHOWN."""
    from encoderlab.study.config import ClaimRoles

    V = results.variants
    roles = ClaimRoles.from_dict(results.config.get("roles") or {})
    several = [n for n, r in V.items() if len(r.finetuned_fractions()) > 1]
    tuned = [n for n, r in V.items() if r.fine_tunings()]
    names = [n for n in dict.fromkeys([roles.bert, roles.albert, roles.electra, *several]) if n in tuned]
    return (names or tuned)[:MAX_SHOWN]


def _scores_against_flops(plt, results: StudyResults, tasks: list[str]):
    V = results.variants
    names = _shown(results)
    colour = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks) + 2.4, 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for label, y, kw, of in _references(results, task, names):
            ax.axhline(y, label=label, zorder=1, **kw, **({"color": colour[of]} if of else {}))
        for i, n in enumerate(names):
            r = V[n]
            pts = sorted((r.checkpoints[k.fraction].flops * 10 ** (NUDGE * (i - (len(names) - 1) / 2)), *_score(ft))
                         for k, ft in r.fine_tunings().items() if k.task == task and k.fraction in r.checkpoints)
            if pts:
                x, med, lo, hi = map(list, zip(*pts))
                ax.errorbar(x, med, yerr=[[m - a for m, a in zip(med, lo)], [b - m for m, b in zip(med, hi)]],
                            color=colour[n], marker=MARKERS[i % len(MARKERS)], markersize=5, capsize=2,
                            linewidth=1.2, label=n, zorder=3)
        flops_axis(ax)
        ax.set_xlabel("pretraining FLOPs" + (" (points nudged apart)" if len(names) > 1 else ""), fontsize=8)
    handles: dict = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    variants = {k: h for k, h in handles.items() if k in names}
    refs = {k: h for k, h in handles.items() if k not in names}
    legend = axes[0, -1].legend(variants.values(), variants.keys(), fontsize=7, loc="upper left", frameon=False,
                                bbox_to_anchor=(1.02, 1.0), title="variant", title_fontsize=7, alignment="left")
    if refs:
        axes[0, -1].add_artist(legend)
        axes[0, -1].legend(refs.values(), refs.keys(), fontsize=7, loc="lower left", frameon=False,
                           bbox_to_anchor=(1.02, 0.0), title="references", title_fontsize=7, alignment="left")
    which = "" if len(names) == len(V) else (
        f": {len(names)} of {len(V)} variants (the bert, albert and electra roles and those fine-tuned at several "
        "budgets; every variant: the report's task table)")
    fig.suptitle(f"Downstream score against pretraining compute{which}\nfirst pretraining run: median over "
                 "fine-tuning seeds, bars min-max", fontsize=9)
    return fig


def _scores_at_one_budget(plt, results: StudyResults, tasks: list[str]):
    """A row per variant (best task mean on top), a panel per task; each variant's own random-init
    control marked on its row, the bag-of-words baseline and the majority class as lines."""
    from encoderlab.study.judge import control_of

    V = results.variants
    rows = sorted((n for n, r in V.items() if r.final_score()), key=lambda n: V[n].final_score()["median"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks) + 2.6, 0.26 * len(rows) + 1.6),
                             sharey=True, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for i, n in enumerate(rows):
            ft = next((f for k, f in V[n].fine_tunings().items() if k.task == task), None)
            if ft:
                med, lo, hi = _score(ft)
                ax.plot([lo, hi], [i, i], color="tab:blue", linewidth=2, alpha=0.45)
                ax.plot(med, i, "o", color="tab:blue", markersize=5, label="variant (median; line: min-max)")
            ctl = control_of(results.controls, n).get("tasks", {}).get(task) if results.controls else None
            if ctl:
                ax.plot(ctl["score"]["median"], i, "|", color="tab:red", markersize=9, markeredgewidth=1.5,
                        label="random init, the variant's architecture")
        for label, y, kw, _ in _references(results, task, []):
            ax.axvline(y, label=label, zorder=1, **kw)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.set_ylim(-0.7, len(rows) - 0.3)
    handles: dict = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    axes[0, -1].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       frameon=False)
    fig.suptitle("Downstream score at the study's one fine-tuned budget (first pretraining run)", fontsize=9)
    return fig


def _flops_axes(axes, skip=()) -> None:
    """FLOPs on the x axis of each, and a legend beside the axes (outside the data) where something was
    drawn (but the labels in ``skip``): the claims study has 17 variants, whose legend inside covered
    half a panel."""
    handles: dict = {}
    for a in axes:
        flops_axis(a)
        for h, label in zip(*a.get_legend_handles_labels()):
            if label not in skip:
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
