"""Weights pretrained again from recorded recipes and seeds (study/runs.py, recreate_weights): how a
new run is compared with its record, and the refusal to recreate on another kind of machine."""

from __future__ import annotations

import pytest

from encoderlab.config import ConfigError
from encoderlab.study import runs

KIND = "AMD EPYC / AVX512"


def _record(losses, steps=(10, 20), kind=KIND):
    return {"checkpoints": [[f"run/checkpoints/step-{s:06d}", s, 1e9 * s] for s in steps],
            "curve": {"train": [], "machines": [{"step": 0, "machine": kind, "precision": "bf16"}],
                      "eval": [{"split": "eval", "step": s, "flops": 1e9 * s, "eval_loss": x, "eval_mlm_accuracy": 0.1}
                               for s, x in zip(steps, losses)]}}


def test_equal_records_are_identical_and_a_difference_is_measured_per_metric():
    same = runs.recreation(_record([5.0, 4.0]), _record([5.0, 4.0]))
    assert same["identical"] and same["compared"] == 2 and same["steps_match"]
    assert same["max_abs_diff"] == {"eval_loss": 0.0, "eval_mlm_accuracy": 0.0}
    assert same["machines"] == {"recorded": [KIND], "here": [KIND]}
    other = runs.recreation(_record([5.0, 4.0]), _record([5.0, 4.25]))
    assert not other["identical"] and other["max_abs_diff"]["eval_loss"] == pytest.approx(0.25)
    # a run that ended at other checkpoints is another run
    shorter = runs.recreation(_record([5.0, 4.0]), _record([5.0], steps=(10,)))
    assert not shorter["identical"] and not shorter["steps_match"] and shorter["compared"] == 1


def test_recreating_on_another_kind_of_machine_is_refused_naming_the_runs():
    runs.check_recreation({"bert": _record([5.0])}, KIND)
    with pytest.raises(ConfigError, match=r"bert@seed1 ran on 'Intel Xeon / AMX'.*mixed_machines: true"):
        runs.check_recreation({"bert": _record([5.0]), "bert@seed1": _record([5.0], kind="Intel Xeon / AMX")}, KIND)


def test_recreating_and_skipping_missing_weights_are_one_or_the_other():
    from encoderlab.study.config import StudyConfig

    base = {"name": "x", "budget_flops": 1e9, "variants": [{"name": "bert", "model": {"preset": "bert-tiny"}}]}
    assert StudyConfig.from_dict({**base, "skip_missing_weights": True}).skip_missing_weights
    with pytest.raises(ConfigError, match="one or the other"):
        StudyConfig.from_dict({**base, "recreate_weights": True, "skip_missing_weights": True})
