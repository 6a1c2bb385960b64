"""The study's pictures on synthetic results: a forest plot with a row of panels per claim that has
comparisons (the aggregate, then each task in its own metric; every panel's axis names its unit, panels
of one metric share their limits), learning-curve small multiples with only each claim's variants, the
downstream scores with a panel per task in its metric and the task's references drawn across (random-
init controls, bag-of-words, majority class), and the zero-shot baselines named outside the data."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study.results import Checkpoint, Curve, FinetuneKey, Measure, StudyResults, VariantResult
from encoderlab.study.verdicts import evaluate_claims

pytest.importorskip("matplotlib")


def _variant(name, level, acc, rng):
    fts = {}
    for frac in (0.25, 0.5, 1.0):
        for task in ("cola", "stsb"):
            per_seed = list(level * frac ** 0.1 + rng.normal(0, 0.01, 5))
            fts[FinetuneKey(task, frac)] = {"score": {"median": float(np.median(per_seed)), "std": 0.01, "n": 5},
                                            "per_seed": per_seed}
    curve = Curve(eval=[{"flops": f * 1e14, "eval_mlm_accuracy": acc * f ** 0.5} for f in (0.25, 0.5, 1)])
    return VariantResult(name=name, spec={}, run_dir="", finetune=fts, curve=curve,
                         measure=Measure(params_encoder=1000, checkpoint_mb=4.0),
                         checkpoints={f: Checkpoint("", 1, f * 1e14, f) for f in (0.25, 0.5, 1.0)})


def test_forest_plot_and_claim_curves_render(tmp_path):
    from matplotlib.image import imread

    from encoderlab.study.plots import claim_curves, forest_plot

    rng = np.random.default_rng(0)
    v = {n: _variant(n, lvl, acc, rng) for n, lvl, acc in (("bert", 0.45, 0.3), ("electra", 0.47, 0.2),
                                                           ("bert-proposal", 0.46, 0.3), ("albert", 0.42, 0.25))}
    claims = evaluate_claims(v)
    assert forest_plot(claims, tmp_path, 0.01) == "claims_forest.png"
    assert claim_curves(claims, v, tmp_path) == "claims_curves.png"
    forest = imread(tmp_path / "claims_forest.png")
    curves = imread(tmp_path / "claims_curves.png")
    panels = [c for c in claims if c.comparisons]
    assert {str(c.claim) for c in panels} == {"4", "5a", "5b", "11"}
    # a row per comparison, a column of panels per task beside the aggregate: the figure grows with both
    assert forest.shape[0] > 0.3 * 110 * sum(len(c.comparisons) for c in panels)
    assert forest.shape[1] > 3 * 3.4 * 110 * 0.9
    assert curves.shape[0] > 2 * 2.8 * 110 * 0.9  # two rows of panels (4 claims, 2 a row)
    assert forest_plot([c for c in claims if not c.comparisons], tmp_path, 0.01) is None


@pytest.fixture
def drawn(monkeypatch):
    """{file name: the figure} of every figure study/plots.py saves (closed, its artists still there)."""
    from encoderlab.study import plots

    figures, save = {}, plots._save

    def keep(plt, fig, out, name, rect=None):
        figures[name] = fig
        return save(plt, fig, out, name, rect)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_forest_panels_name_their_unit_and_share_limits_per_metric(tmp_path, drawn):
    from encoderlab.study.plots import forest_plot

    rng = np.random.default_rng(0)
    v = {n: _variant(n, lvl, acc, rng) for n, lvl, acc in (("bert", 0.45, 0.3), ("electra", 0.47, 0.2),
                                                           ("bert-proposal", 0.46, 0.3), ("albert", 0.42, 0.25))}
    claims = [c for c in evaluate_claims(v) if c.comparisons]
    forest_plot(claims, tmp_path, 0.01)
    axes = drawn["claims_forest.png"].axes
    # no control: both tasks enter the aggregate; a panel per claim for it, and one per task beside it
    assert len(axes) == 3 * len(claims)
    by_unit: dict = {}
    for ax in axes:
        by_unit.setdefault(ax.get_xlabel(), []).append(ax.get_xlim())
    assert set(by_unit) == {"difference in task-mean score (CoLA MCC, STS-B Pearson/Spearman mean)",
                            "difference in CoLA MCC", "difference in STS-B Pearson/Spearman mean"}
    for unit, lims in by_unit.items():  # one x scale per metric: every claim's panel of it alike
        assert len(lims) == len(claims) and len(set(lims)) == 1, unit
    # claim rows: the comparisons' labels on the aggregate panel, left of the row
    first = axes[0]
    assert first.get_title(loc="left").startswith("Claim 4") and [t.get_text() for t in first.get_yticklabels()] \
        == [x.label for x in claims[0].comparisons]


def _study(rng, budgets=(0.25, 0.5, 1.0)):
    """Three tasks in their own metrics; electra fine-tuned at several budgets, bert-nsp (no role) at one;
    a random-init control for bert's architecture and one for electra's; bag-of-words and majority class."""
    metrics = {"sst2": ("acc",), "cola": ("mcc",), "stsb": ("pearson", "spearman")}
    variants = {}
    for name, level in (("bert", 0.5), ("albert", 0.45), ("electra", 0.55), ("bert-nsp", 0.4)):
        fts = {}
        for frac in (budgets if name == "electra" else (1.0,)):
            for task, ms in metrics.items():
                s = sorted(level * frac ** 0.2 + rng.normal(0, 0.02, 3))
                score = {"median": s[1], "min": s[0], "max": s[2], "std": 0.02, "n": 3}
                fts[FinetuneKey(task, frac)] = {"score": score, "summary": {m: score for m in ms}, "per_seed": s}
        variants[name] = VariantResult(
            name=name, spec={}, run_dir="", finetune=fts,
            measure=Measure(params_encoder=1000, checkpoint_mb=4.0, zeroshot={
                str(f): {"flops": f * 1e14, "minimal_pairs": {"mlm": {"accuracy": 0.5 + 0.1 * f}}}
                for f in (0.25, 0.5, 1.0)}),
            curve=Curve(eval=[{"flops": f * 1e14, "eval_mlm_accuracy": 0.2 * f} for f in (0.25, 0.5, 1.0)],
                        train=[{"tokens_per_s": 100.0, "peak_memory_mb": 10.0}]),
            checkpoints={f: Checkpoint("", 1, f * 1e14, f) for f in (0.25, 0.5, 1.0)})

    def control(level):
        return {"tasks": {t: {"score": {"median": level, "min": level, "max": level, "std": 0.0, "n": 3},
                              "per_seed": [level] * 3} for t in metrics}}

    controls = {"variant": "bert", **control(0.3), "shapes": {"electra": control(0.35)},
                "of": {"electra": "electra"}}
    baselines = {"sst2": {"majority": 0.51, "bow": 0.7}, "cola": {"majority": 0.0, "bow": 0.05},
                 "stsb": {"majority": 0.0, "bow": 0.38}}
    return StudyResults(config={"tasks": [{"name": t} for t in metrics]}, data={}, variants=variants,
                        baselines=baselines, controls=controls,
                        mlm_baselines={"unigram": 0.05, "bigram": 0.14})


def _hlines(ax) -> dict[str, float]:
    """{label: y} of the lines drawn across a panel (axhline: x from 0 to 1 in axes coordinates)."""
    return {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines()
            if list(ln.get_xdata()) == [0, 1] and ln.get_ydata()[0] == ln.get_ydata()[1]}


def test_score_vs_flops_has_a_panel_per_task_in_its_metric_with_its_references(tmp_path, drawn):
    from matplotlib.colors import to_hex

    from encoderlab.study.plots import study_figures

    results = _study(np.random.default_rng(1))
    assert "score_vs_flops.png" in study_figures(results, tmp_path)
    fig = drawn["score_vs_flops.png"]
    assert [(a.get_title(), a.get_ylabel()) for a in fig.axes] == [
        ("SST-2", "accuracy"), ("CoLA", "MCC"), ("STS-B", "Pearson/Spearman mean")]
    for ax, task in zip(fig.axes, ("sst2", "cola", "stsb")):
        lines = _hlines(ax)
        # each shown variant's own architecture's control (bert and albert share the main one), the baselines
        assert lines == {"random init, bert's architecture": 0.3, "random init, electra's architecture": 0.35,
                         "bag-of-words baseline": results.baselines[task]["bow"],
                         "majority class (regression: a constant)": results.baselines[task]["majority"]}
        # the roles and the variant fine-tuned at several budgets; bert-nsp (one budget, no role) left out
        drawn_variants = {c.get_label() for c in ax.containers}
        assert drawn_variants == {"bert", "albert", "electra"}
        electra = next(c for c in ax.containers if c.get_label() == "electra")
        assert len(electra.lines[0].get_xdata()) == 3  # a point per fine-tuned budget
        colours = [to_hex(c.lines[0].get_color()) for c in ax.containers]
        assert len(set(colours)) == len(colours)  # told apart by colour (and marker)
    # the legends sit outside the data: right of the last panel
    fig.canvas.draw()
    right = fig.axes[-1].get_window_extent().x1
    legends = [a for a in fig.axes[-1].get_children() if type(a).__name__ == "Legend"]
    assert legends and all(g.get_window_extent().x0 > right for g in legends)


def test_score_at_one_budget_gives_every_variant_a_row_per_task(tmp_path, drawn):
    from encoderlab.study.plots import task_scores

    results = _study(np.random.default_rng(2), budgets=(1.0,))
    assert task_scores(results, tmp_path) == "score_vs_flops.png"
    fig = drawn["score_vs_flops.png"]
    assert [a.get_xlabel() for a in fig.axes] == ["accuracy", "MCC", "Pearson/Spearman mean"]
    assert sorted(t.get_text() for t in fig.axes[0].get_yticklabels()) == sorted(results.variants)
    verticals = {ln.get_label() for ln in fig.axes[1].get_lines() if list(ln.get_ydata()) == [0, 1]}
    assert verticals == {"bag-of-words baseline", "majority class (regression: a constant)"}


def test_zeroshot_baselines_are_named_outside_the_data(tmp_path, drawn):
    from encoderlab.study.plots import study_figures

    study_figures(_study(np.random.default_rng(3)), tmp_path)
    fig = drawn["zeroshot_vs_flops.png"]
    fig.canvas.draw()
    left, right = fig.axes[:2]
    assert not left.texts  # no name written over the curves
    assert set(_hlines(left)) == {"unigram count model", "bigram count model"}
    for ax, names in ((left, {"unigram count model", "bigram count model"}), (right, {"chance (0.5)"})):
        legend = next(g for g in ax.get_children() if type(g).__name__ == "Legend"
                      and {t.get_text() for t in g.get_texts()} == names)
        assert legend.get_window_extent().y1 < ax.get_window_extent().y0  # under the panel
