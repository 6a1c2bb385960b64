"""A study priced before compute (issue 51): `encoderlab study FILE --plan` counts the work the study
will do, times it on this machine from the real steps, sizes the detectable difference from a pilot's
variance, folds the claims that will not run into one line, and stops before any compute; a run's
first ETA is the plan's."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_data_helpers import write_corpus
from test_study_inputs import STUDY, reviews_task

from encoderlab.cli import main
from encoderlab.study.config import StudyConfig
from encoderlab.study.estimate import estimate, not_run_line
from encoderlab.study.progress import Progress

CLAIMS_REPORT = Path(__file__).resolve().parents[1] / "docs" / "studies" / "claims" / "report.json"


def study(tmp_path: Path, **over) -> StudyConfig:
    spec = reviews_task(tmp_path / "tasks")
    return StudyConfig.from_dict({**STUDY, "out_dir": str(tmp_path / "study"), "threads": 1,
                                  "corpus": [str(write_corpus(tmp_path / "corpus"))],
                                  "tasks": [{"name": str(spec)}], **over})


def test_the_plan_counts_every_job_the_study_runs(tmp_path):
    cfg = study(tmp_path, seeds=2, pretrain_seeds=2, finetune_fractions=[0.5, 1.0], eval_fractions=[0.5, 1.0],
                random_control=True)
    plan = estimate(cfg, notes=cfg.role_notes())
    stages = {s.stage: s for s in plan.stages}
    assert stages["pretraining"].jobs == 2 * 2  # variants x pretraining runs
    assert stages["fine-tuning"].jobs == 2 * 2 * 2 * 1 * 2  # variants x runs x fractions x tasks x seeds
    assert stages["random-init control"].jobs == 2 * 1 * 2  # two shapes (bert, electra) x task x seeds
    assert all(s.seconds > 0 for s in plan.stages)
    # one job at a time (pretrain_jobs 1): the wall-clock is the sum; pretraining, then the rest
    assert plan.wall_s == pytest.approx(sum(s.seconds for s in plan.stages))
    assert plan.split_s[0] == pytest.approx(stages["pretraining"].seconds)
    assert sum(plan.split_s) == pytest.approx(plan.wall_s)


def test_a_runs_seconds_are_its_timed_steps_times_the_steps_its_budget_buys(tmp_path, monkeypatch):
    """With the step's time fixed, twice the budget adds exactly the steps it buys (setup aside)."""
    from encoderlab.study import estimate as est
    from encoderlab.train.flops import planned_step_flops
    from encoderlab.train.trainer import Trainer

    monkeypatch.setattr(Trainer, "seconds_per_step", lambda self, seq_len=None: 0.5 if seq_len is None else 0.25)
    monkeypatch.setattr(est.time, "perf_counter", lambda: 0.0)  # no setup time
    one = study(tmp_path, budget_flops=4e10)
    two = study(tmp_path, budget_flops=8e10)
    v = one.variants[0]
    trainer = Trainer.__new__(Trainer)
    del trainer
    base = StudyConfig.from_dict({**STUDY, "out_dir": str(tmp_path / "s")})
    from encoderlab.study.estimate import _encoder

    family, enc = _encoder(base, v)
    from encoderlab.models.config import ModelConfig
    from encoderlab.objectives.base import with_defaults

    flops = planned_step_flops(ModelConfig(family=family, head="mlm", encoder=enc),
                               with_defaults(v.objective, 3, (0, 1, 2, 3)), 8, 32)
    added = est._pretrain_seconds(two, v) - est._pretrain_seconds(one, v)
    assert added == pytest.approx(0.5 * 4e10 / flops, rel=0.02)


def test_the_plan_names_what_it_does_not_time_and_the_claims_that_will_not_run_in_one_line(tmp_path):
    cfg = study(tmp_path)
    notes = cfg.role_notes()
    assert len([n for n in notes if "will not run" in n]) > 3
    line = not_run_line(notes)
    assert line.startswith("claims ") and "will not run" in line and line.count("will not run") == 1
    text = "\n".join(estimate(cfg, notes=notes).lines())
    assert "not timed: probes and the n-gram baseline, the data stage (tokenizer, token store)" in text
    assert "no pilot variance" in text  # no report yet: says how to get one


@pytest.mark.skipif(not CLAIMS_REPORT.is_file(), reason="needs the committed claims report (docs/studies/claims)")
def test_the_detectable_difference_comes_from_the_pilots_variance(tmp_path):
    cfg = study(tmp_path, seeds=3, tasks=[{"name": "cola"}, {"name": "sst2"}], glue_dir=str(tmp_path / "glue"))
    from encoderlab.study.estimate import power_lines

    lines = power_lines(cfg, CLAIMS_REPORT)
    assert "1 pretraining run" in lines[0] and "at 3 runs x 3 seeds" in lines[0]
    three = power_lines(study(tmp_path, seeds=3, pretrain_seeds=3, tasks=[{"name": "cola"}]), CLAIMS_REPORT)
    assert three[0].startswith("detectable difference on cola at 3 runs x 3 seeds a side: 0.0")


def test_plan_stops_before_any_compute(tmp_path, capsys):
    cfg = study(tmp_path)
    path = tmp_path / "study.yaml"
    cfg.to_yaml(path)
    assert main(["study", str(path), "--plan", f"out_dir={tmp_path / 'elsewhere'}"]) == 0
    out = capsys.readouterr().out
    assert "[study]   pretraining: 2 job(s)" in out and "estimated wall-clock" in out
    assert not (tmp_path / "elsewhere" / "stages.json").exists() and not (tmp_path / "elsewhere" / "data").exists()


def test_the_eta_reads_the_plans_seconds_corrected_by_the_work_done(monkeypatch):
    """Pretraining 10 units planned at 100 s, the rest 20 units at 50 s: the first ETA is the plan's 150 s;
    with half the pretraining done in 100 s (twice the plan), what is left is read at twice the plan."""
    from encoderlab.study import progress as prog

    now = [0.0]
    monkeypatch.setattr(prog.time, "perf_counter", lambda: now[0])
    lines = []
    p = Progress(30.0, lines.append, heartbeat_s=None, planned=(10.0, 100.0, 50.0))
    p.stage("data")
    assert "~150s left" in lines[-1]
    p.begin_work()
    now[0] = 100.0
    p.partial = lambda: 5.0  # half the pretraining under way
    p.stage("pretraining")
    assert "~200s left" in lines[-1]  # (50 + 50) planned x 2
    p.partial = None
    p.advance(10.0)
    p.advance(10.0)  # half the rest
    now[0] = 300.0  # 300 s for a plan of 125: 2.4x
    p.stage("fine-tuning")
    assert "~60s left" in lines[-1]  # 25 planned x 2.4
