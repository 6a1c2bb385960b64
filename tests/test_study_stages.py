"""Stage keys are typed (StageKey), but their strings are the keys of every stages.json written so
far: each kind's string is the one the runner wrote before StageKey, so finished stages stay valid.
``Stages.cached`` is the runner's get / compute / put / advance in one place."""

from __future__ import annotations

import pytest

from encoderlab.study.plan import FinetuneUnit
from encoderlab.study.progress import Progress
from encoderlab.study.results import FinetuneKey
from encoderlab.study.stages import StageKey, Stages

# (key, the string written before StageKey: runner.py, launch.py, lr.py, probes.py, prompt.py, plan.py)
FORMATS = [
    (StageKey.data(), "data"),
    (StageKey.mlm_baselines(), "mlm_baselines"),
    (StageKey.speed(), "speed"),
    (StageKey.speed(("bert", "electra")), "speed:bert,electra"),
    (StageKey.pretrain("bert"), "pretrain:bert"),
    (StageKey.pretrain("bert@seed1"), "pretrain:bert@seed1"),
    (StageKey.measure("albert"), "measure:albert"),
    (StageKey.zeroshot("bert", 0.5), "zeroshot:bert@0.5"),
    (StageKey.zeroshot("bert", 1.0), "zeroshot:bert@1"),
    (StageKey.blimp("bert@seed1", 1.0), "blimp:bert@seed1@1"),
    (StageKey.blimp("bert", 0.25), "blimp:bert@0.25"),
    (StageKey.bow("demo"), "bow:demo"),
    (StageKey.control("sst2"), "control:sst2"),
    (StageKey.control_blimp(), "control:blimp"),
    (StageKey.control("sst2", "albert"), "control:sst2@albert"),
    (StageKey.control_blimp("albert"), "control:blimp@albert"),
    (StageKey.learning_rate_trial("bert-128", "demo", 0.001), "lr:bert-128:demo:0.001"),
    (StageKey.learning_rate_trial("electra", "sst2", 3e-5), "lr:electra:sst2:3e-05"),
    (StageKey.finetune("bert@seed1", "demo", 1.0), "finetune:bert@seed1:1.0:demo"),
    (StageKey.finetune("albert", "sst2", 0.5, unshared=True), "finetune:albert+unshared:0.5:sst2"),
    (StageKey.finetune("bert", "demo", 1), "finetune:bert:1.0:demo"),
    (StageKey.probe("generation", "bert"), "generation:bert"),
    (StageKey.probe("generation", "electra", "generator"), "generation:electra:generator"),
    (StageKey.probe("robustness", "electra"), "robustness:electra"),
    (StageKey.prompt("bert@seed1", "sst2", 0), "prompt:bert@seed1:sst2:k=0"),
    (StageKey.prompt("bert", "mnli", 16), "prompt:bert:mnli:k=16"),
]


@pytest.mark.parametrize("key,written", FORMATS, ids=[w for _, w in FORMATS])
def test_a_stage_keys_string_is_the_one_written_before_stage_keys(key, written):
    assert str(key) == written


@pytest.mark.parametrize("unshared", [False, True])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_a_finetune_key_is_the_string_plans_finetune_unit_names(fraction, unshared):
    u = FinetuneUnit("bert@seed2", FinetuneKey("demo", fraction, unshared), "ck", None, "fp", 1.0)
    assert str(StageKey.finetune(u.variant, u.key.task, u.key.fraction, u.key.unshared)) == str(u.stage)


def test_a_stage_stored_under_its_key_is_found_by_its_string_and_back(tmp_path):
    stages = Stages(tmp_path / "stages.json")
    stages.put(StageKey.zeroshot("bert", 0.5), "fp", {"accuracy": 0.5})
    assert Stages(tmp_path / "stages.json").get("zeroshot:bert@0.5", "fp") == {"accuracy": 0.5}
    assert stages.get(StageKey.zeroshot("bert", 0.5), "other") is None


def test_cached_computes_once_stores_and_advances_either_way(tmp_path):
    lines, calls = [], []
    progress = Progress(10, lines.append, heartbeat_s=None)
    stages = Stages(tmp_path / "stages.json")

    def compute():
        calls.append(1)
        return {"score": 1}

    key = StageKey.bow("demo")
    assert stages.cached(key, "fp", compute, progress=progress, label="bow on demo", weight=2) == {"score": 1}
    assert Stages(tmp_path / "stages.json").get("bow:demo", "fp") == {"score": 1}
    assert stages.cached(key, "fp", compute, progress=progress, label="bow on demo", weight=2) == {"score": 1}
    assert len(calls) == 1 and progress.done == 4
    assert sum("bow on demo" in line for line in lines) == 1  # announced only when computed
    stages.cached(key, "changed", compute)  # a new fingerprint: computed again
    assert len(calls) == 2


def test_a_kind_without_a_format_is_refused():
    with pytest.raises(ValueError, match="probe kind"):
        StageKey.probe("prompt", "bert")
    with pytest.raises(ValueError, match="no key format"):
        str(StageKey("nonsense"))
