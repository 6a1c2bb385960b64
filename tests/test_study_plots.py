"""The claims' pictures on synthetic results: a forest plot with a panel per claim that has
comparisons (the matching claim's margin shaded), and learning-curve small multiples with only each
claim's variants."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study.claims import evaluate_claims
from encoderlab.study.results import Checkpoint, Curve, FinetuneKey, Measure, VariantResult

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
    # one row per comparison and per task: the figure grows with them
    assert forest.shape[0] > 0.28 * 110 * sum(1 + len(x.per_task) for c in panels for x in c.comparisons)
    assert curves.shape[0] > 2 * 2.8 * 110 * 0.9  # two rows of panels (4 claims, 2 a row)
    assert forest_plot([c for c in claims if not c.comparisons], tmp_path, 0.01) is None
