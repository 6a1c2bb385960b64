"""A study goes on from its stage records on a machine without its run folders (study/runs.py): the
next session of a long study may start from a fresh clone holding only the committed stages.json."""

from __future__ import annotations

import json
import shutil

import pytest

from encoderlab.config import ConfigError
from encoderlab.study.config import StudyConfig
from encoderlab.study.results import StudyResults
from encoderlab.study.runner import run_study
from tests.test_study import BASE

pytest.importorskip("matplotlib")


def test_a_study_goes_on_from_its_stage_records_without_its_run_folders_or_data(tmp_path):
    out = tmp_path / "study"
    cfg = StudyConfig.from_dict({**BASE, "out_dir": str(out)})
    first = run_study(cfg, log=lambda *a: None)
    stages = json.loads((out / "stages.json").read_text())
    done = json.loads(json.dumps(stages["pretrain:bert"]["result"]))
    assert [c[1] for c in done["checkpoints"]] and done["curve"]["eval"]  # the run's record, kept as it finished
    assert len(stages["data"]["result"]["tokenizer_sha256"]) == 64

    # A stage written before the record gets it the next time the study finds the run folder.
    for key in ("checkpoints", "curve"):
        del stages["pretrain:bert"]["result"][key]
    (out / "stages.json").write_text(json.dumps(stages))
    run_study(cfg, log=lambda *a: None)
    assert json.loads((out / "stages.json").read_text())["pretrain:bert"]["result"] == done

    # A fresh clone: the stage records, no run folder, no token store or tokenizer.
    shutil.move(out / "runs", tmp_path / "runs-elsewhere")
    shutil.move(out / "data", tmp_path / "data-elsewhere")
    lines = []
    again = run_study(cfg, log=lines.append)
    assert not any("pretrain bert" in ln or "fine-tune" in ln for ln in lines)
    assert any("preparing it again" in ln for ln in lines)  # and checked against the recorded data
    a, b = StudyResults.from_json(first), StudyResults.from_json(again)
    assert a.variants["bert"].to_json() == b.variants["bert"].to_json()
    assert first["claims"] == again["claims"]

    # What needs the weights (more fine-tuning seeds) names the run that is not here.
    with pytest.raises(ConfigError, match=r"bert \(.*step-.*\).*not on this machine.*'pretrain:'"):
        run_study(cfg.replace(seeds=3), log=lambda *a: None)


    # Data prepared again that differs from the recorded (another corpus or vocabulary) stops the study
    # before a recorded run is read or continued.
    stages = json.loads((out / "stages.json").read_text())
    stages["data"]["result"]["tokenizer_sha256"] = "0" * 64  # as if recorded with another tokenizer
    (out / "stages.json").write_text(json.dumps(stages))
    shutil.rmtree(out / "data")
    with pytest.raises(ConfigError, match="tokenizer_sha256: recorded '0000"):
        run_study(cfg, log=lambda *a: None)
