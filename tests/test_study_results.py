"""Typed results keep report.json's shape: every committed report loads into StudyResults and its
parts (Pretraining, Speed, Curve, Measure, Checkpoint, FinetuneKey...) and writes back exactly what it read
(a report from before typed fine-tuning keys, through the legacy reader, in today's form)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from encoderlab.study.results import (
    RESULT_KEYS,
    Curve,
    Measure,
    Pretraining,
    Speed,
    StudyResults,
    VariantResult,
    load_report,
)

REPORTS = sorted(Path(__file__).resolve().parent.parent.glob("docs/studies/*/report.json"))


@pytest.mark.parametrize("path", REPORTS, ids=[p.parent.name for p in REPORTS])
def test_every_committed_report_round_trips_through_typed_results(path):
    d = json.loads(path.read_text())
    results, _ = load_report(path)
    legacy = any(isinstance(v.get("checkpoints"), dict) for v in d["variants"].values())
    if not legacy:  # a report written before typed results is rewritten in today's form, once
        assert results.to_json() == {k: d[k] for k in RESULT_KEYS if k in d}
    assert json.dumps(StudyResults.from_json(results.to_json()).to_json()) == json.dumps(results.to_json())
    for v in results.variants.values():
        assert isinstance(v.curve, Curve) and (v.pretrain is None or isinstance(v.pretrain, Pretraining))
        assert v.speed is None or isinstance(v.speed, Speed)
        assert isinstance(v.measure, Measure) and all(isinstance(r.measure, Measure) for r in v.replicas)


def test_the_committed_reports_are_found():
    assert len(REPORTS) >= 10


def test_a_variant_without_speed_pretraining_or_curve_writes_what_it_wrote_before():
    d = VariantResult(name="x", spec={}, run_dir="r").to_json()
    assert d["pretrain"] is None and "speed" not in d and d["curve"] == {"train": [], "eval": []}
    old = Speed(threads=2, tokens_per_s=10.0, rounds=[9.0, 10.0])  # recorded before the device was
    assert Speed.from_json(old.to_json()) == old and "device" not in old.to_json()


def test_a_measurement_not_known_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown key.*'latency'.*latency_ms"):
        Measure.from_json({"params_total": 1, "latency": {}})
    assert Measure.from_json({"params_total": 1}).to_json() == {"params_total": 1}
