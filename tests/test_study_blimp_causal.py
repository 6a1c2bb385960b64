"""A causal LM variant (objective kind clm) on BLiMP dev: scored by its likelihood left to right, the
network it is (its PLL would read outputs that saw the right context it never trained with), beside a
random-init control of its architecture scored the same way; the other variants' stages unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_study import BASE

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.intrinsic import causal_log_likelihoods
from encoderlab.study import blimp
from encoderlab.study.config import StudyConfig
from encoderlab.study.judge import task_signal
from encoderlab.study.results import StudyResults
from encoderlab.study.runner import run_study
from encoderlab.study.stages import StageKey, Stages

pytest.importorskip("matplotlib")


def tiny_blimp(folder: Path) -> Path:
    """Two BLiMP-format paradigms of three pairs each."""
    folder.mkdir()
    for name in ("agreement", "island"):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(
            {"sentence_good": f"the {w} is here .", "sentence_bad": f"the {w} are here .", "UID": name,
             "linguistics_term": name}) + "\n" for w in ("cat", "dog", "bird")))
    return folder


def test_a_causal_lm_is_scored_left_to_right_beside_a_control_scored_the_same_way(tmp_path):
    folder = tiny_blimp(tmp_path / "blimp")
    variants = [*BASE["variants"], {"name": "clm", "model": {"preset": "bert-tiny"}, "objective": {"kind": "clm"}}]
    cfg = StudyConfig.from_dict({**BASE, "out_dir": str(tmp_path / "study"), "variants": variants,
                                 "random_control": True, "blimp": str(folder), "blimp_pairs_per_paradigm": None,
                                 "seeds": 1, "eval_fractions": [1.0]})
    report = run_study(cfg, log=lambda *a: None)
    V = StudyResults.from_json(report).variants
    clm, bert = V["clm"].measure.blimp["1"], V["bert"].measure.blimp["1"]
    assert clm["deployed"] == "clm" and set(clm["networks"]) == {"clm"} and bert["deployed"] == "mlm"
    # the recorded outcomes are the clm network's own left-to-right preferences
    pairs = blimp.load_pairs(folder)
    texts = [p["sentence_good"] for p in pairs] + [p["sentence_bad"] for p in pairs]
    ll = causal_log_likelihoods(load_model(V["clm"].checkpoints[1.0].path), load_tokenizer(report["data"]["tokenizer"]),
                                texts)[0]
    assert clm["networks"]["clm"]["correct"] == "".join("1" if g > b else "0" for g, b in zip(ll[:6], ll[6:]))
    # clm shares bert's architecture, so one control stands for both, scored both ways under two keys
    stages = Stages(tmp_path / "study" / "stages.json")
    assert {str(StageKey.control_blimp()), str(StageKey.control_blimp(causal=True))} == {
        "control:blimp", "control:blimp+clm"} and {"control:blimp", "control:blimp+clm"} <= set(stages.data)
    controls = report["controls"]
    assert controls["blimp"]["deployed"] == "mlm" and controls[blimp.CAUSAL_CONTROL]["deployed"] == "clm"
    assert blimp.control_for(controls, clm) is controls[blimp.CAUSAL_CONTROL]
    assert blimp.control_for(controls, bert) is controls["blimp"]
    text = (tmp_path / "study" / "report.md").read_text()
    assert "| random init (bert's architecture, left to right) |" in text and "| clm | " in text


def test_the_signal_screen_reads_a_causal_variants_control_scored_left_to_right():
    """The same fresh network scored two ways can sit far apart; a causal variant at 0.60 beats a PLL
    control at 0.30 but not its own left-to-right control at 0.65: no signal. Without a causal control
    it is screened against none."""
    label, n = "BLiMP dev (36 of 67 paradigms)", 2000
    from encoderlab.study.results import Checkpoint, VariantResult

    def record(k, net):
        return {"label": label, "n": n, "deployed": net,
                "networks": {net: {"accuracy": k / n, "correct": "1" * k + "0" * (n - k)}}}

    v = VariantResult(name="clm", spec={}, run_dir="", checkpoints={1.0: Checkpoint("", 1, 1.0, 1.0)})
    v.measure.blimp = {"1": record(1200, "clm")}
    pll_only = {"tasks": {}, "blimp": record(600, "mlm")}
    assert label not in task_signal({"clm": v}, pll_only)
    ok, e = task_signal({"clm": v}, {**pll_only, blimp.CAUSAL_CONTROL: record(1300, "clm")})[label]
    assert not ok and e.diff == pytest.approx(-0.05)
    assert np.isclose(task_signal({"clm": v}, {**pll_only, blimp.CAUSAL_CONTROL: record(800, "clm")})[label][1].diff,
                      0.2)
