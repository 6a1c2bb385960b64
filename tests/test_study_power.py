"""The power planner (issue 52, item 5): pooled variance components recover known ones, the detectable
difference is what a simulation of the design detects 80% of the time, and the planned design is the
cheapest that reaches a published effect. The report's first section, "did pretraining help?", reads
its numbers from the results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from encoderlab.study.power import Components, components, needed, plan
from encoderlab.study.results import StudyResults
from encoderlab.study.transfer_table import transfer_section

CLAIMS = Path(__file__).resolve().parents[1] / "docs" / "studies" / "claims" / "report.json"


def _scores(rng, variants, P, S, run_sd, seed_sd, effect=0.0):
    return {f"v{i}": {"t": 0.5 + (effect if i == 0 else 0) + rng.normal(0, run_sd, (P, 1))
                      + rng.normal(0, seed_sd, (P, S))} for i in range(variants)}


def test_pooled_components_recover_known_variances():
    rng = np.random.default_rng(0)
    c = components(_scores(rng, 40, 3, 5, run_sd=0.02, seed_sd=0.05), "t")
    assert np.sqrt(c.seed) == pytest.approx(0.05, rel=0.08)
    assert np.sqrt(c.run) == pytest.approx(0.02, rel=0.3)
    assert c.variants == 40 and c.run_df == 80 and c.seed_df == 40 * 3 * 4
    tiny = components({"a": {"t": np.full((2, 3), 0.3)}}, "t")  # identical scores: the noise floor, not zero
    assert tiny.seed == pytest.approx(0.005 ** 2) and tiny.run == 0
    assert components({"a": {"t": np.ones((1, 3))}}, "t") is None  # one run: nothing to pool


def test_the_detectable_difference_is_detected_80_percent_of_the_time():
    c = Components("t", run=0.02 ** 2, seed=0.05 ** 2, run_df=100, seed_df=1000, variants=10)
    P, S = 4, 5
    d = c.detectable(P, S)
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(1000):  # the design's own test: a two-sample t test on the run means, 2(P - 1) df
        sc = _scores(rng, 2, P, S, 0.02, 0.05, effect=d)
        t = stats.ttest_ind(sc["v0"]["t"].mean(1), sc["v1"]["t"].mean(1))
        hits += t.pvalue < 0.05 and t.statistic > 0
    assert 0.76 < hits / 1000 < 0.84  # 80% by design

    assert c.detectable(P, 2 * S) < d and c.detectable(2 * P, S) < c.detectable(P, 2 * S)  # runs divide both parts
    assert c.detectable(1, 50) == float("inf")


def test_the_planned_design_is_the_cheapest_that_reaches_the_effect():
    c = Components("t", run=0.01 ** 2, seed=0.04 ** 2, run_df=50, seed_df=500, variants=10)
    d = needed(c, 0.05, pretrain_core_h=1.0, finetune_core_h=0.01)
    assert d.detectable <= 0.05
    cheaper = [(P, S) for P in range(2, 31) for S in range(1, 31)
               if 2 * P * (1.0 + S * 0.01) < d.core_hours - 1e-9]
    assert all(c.detectable(P, S) > 0.05 for P, S in cheaper)
    assert needed(c, 1e-4, pretrain_core_h=1.0, finetune_core_h=0.01) is None


@pytest.mark.skipif(not CLAIMS.is_file(), reason="the committed claims report is not in this checkout")
def test_the_planner_and_the_transfer_section_read_the_committed_claims_report():
    p = plan(CLAIMS, runs=3, seeds=3, pretrain_core_h=0.3, finetune_core_h=0.01)
    assert set(p["tasks"]) == {"cola", "sst2", "stsb"} and p["tasks"]["cola"]["variants"] == 21
    assert 0.03 < p["tasks"]["cola"]["detectable"] < 0.15  # issue 52: about 0.07 at 3 x 3
    results = StudyResults.from_json(json.loads(CLAIMS.read_text()))
    lines = transfer_section(results.variants, results.baselines, results.controls)
    assert lines[0] == "## Did pretraining help?"
    stsb = next(x for x in lines if x.startswith("| stsb |"))
    bert = float(np.mean(results.variants["bert"].seed_scores()["stsb"]))
    assert stsb.split(" | ")[1] == f"{bert:.3f}" and f"{results.baselines['stsb']['bow']:.3f}" in stsb
    assert any("another learning rate than their random-init twin" in x for x in lines)
