"""The study's ETA reads its rate from work done in this run only: not from the data preparation
before the first pretraining, nor from the share of a budget an interrupted earlier run had done
(issue 34: the ETA fell from "~832 s left" to "~21 s left" between two lines)."""

from __future__ import annotations

import json
import re

import pytest

from encoderlab.study.progress import PRETRAIN_UNITS, PretrainShares, Progress


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("encoderlab.study.progress.time.perf_counter", lambda: now[0])
    return now


def _left(progress: Progress) -> float:
    return float(re.search(r"~(\d+)s left", progress.eta()).group(1))


def test_data_preparation_is_not_charged_to_the_pretrainings_rate(clock):
    """Five minutes of tokenizing, then pretrainings at 10 s a unit: the ETA says 10 s a unit at
    once, and the fine-tunings' first result (at the same rate) leaves it where it was. Charging
    the five minutes to the first units put it at 7x, then 2x, and it fell at the phase change."""
    p = Progress(3 * PRETRAIN_UNITS + 6, lambda line: None, heartbeat_s=None)
    p.stage("data: training a WordPiece tokenizer")
    clock[0] = 300.0
    share = [0.0]
    p.stage("pretrain bert")
    p.begin_work()  # launch.pretrain_all
    p.partial = lambda: PRETRAIN_UNITS * share[0]
    clock[0], share[0] = 350.0, 0.5
    assert _left(p) == pytest.approx(10 * (36 - 5), rel=0.01)
    for v in range(3):  # the three pretrainings finish at 10 s a unit
        clock[0] = 300.0 + 100 * (v + 1)
        share[0] = 0.0
        p.advance(PRETRAIN_UNITS)
    p.partial = None
    p.new_phase()
    before = _left(p)  # no fine-tuning finished yet: the run's rate so far
    clock[0] += 20.0
    p.advance(2)  # one fine-tuning, 2 units in 20 s
    assert before == pytest.approx(60, rel=0.01) and _left(p) == pytest.approx(40, rel=0.01)


def test_a_resumed_pretrainings_earlier_share_is_done_but_not_worked(tmp_path, clock):
    run = tmp_path / "bert"
    (run / "checkpoints" / "step-000090").mkdir(parents=True)
    (run / "checkpoints" / "step-000090" / "trainer_state.json").write_text(json.dumps({"flops": 0.9e12}))
    metrics = run / "metrics.jsonl"
    metrics.write_text(json.dumps({"split": "train", "progress": 0.92}) + "\n")  # the earlier run got past it
    p = Progress(2 * PRETRAIN_UNITS, lambda line: None, heartbeat_s=None)
    shares = PretrainShares(p, {"bert": run}, budget_flops=1e12)
    p.begin_work()
    p.partial = lambda: shares.partial(["bert"])
    shares.start("bert")
    assert (p.done, p.worked) == (9.0, 0.0)  # the checkpoint's 90%: done, in no time here
    with open(metrics, "a") as f:  # the resumed run logs its progress from there
        f.write(json.dumps({"split": "train", "progress": 0.95}) + "\n")
    clock[0] = 10.0
    assert shares.partial(["bert"]) == pytest.approx(0.5)
    assert _left(p) == pytest.approx(10.0 / 0.5 * (20 - 9 - 0.5), rel=0.01)  # 20 s a unit, as worked here
    shares.finish("bert")
    assert p.done == pytest.approx(10.0)


def test_stages_on_record_are_done_from_the_start_not_priced_at_the_pretrainings_rate(clock):
    """A study that pretrains one added variant reaches the others' recorded fine-tunings only after it:
    counted done from the start, the ETA is the pretraining left (10 s a unit); counted when reached,
    it priced 20 units of records at 10 s each as well. A record found stale is work after all."""
    p = Progress(PRETRAIN_UNITS + 20 + 4, lambda line: None, heartbeat_s=None)
    p.on_record("finetune:bert:1.0:sst2", 10)
    p.on_record("finetune:bert:1.0:cola", 10)
    p.on_record("finetune:bert:1.0:cola", 10)  # one key counts once
    assert p.done == 20
    p.begin_work()
    share = [0.5]
    p.partial = lambda: PRETRAIN_UNITS * share[0]
    clock[0] = 50.0
    assert _left(p) == pytest.approx(10 * (34 - 20 - 5), rel=0.01)
    clock[0], share[0] = 100.0, 0.0
    p.advance(PRETRAIN_UNITS)
    p.partial = None
    p.advance(10, cached=True, key="finetune:bert:1.0:sst2")  # found as recorded: not counted twice
    assert p.done == 30 and p.worked == PRETRAIN_UNITS
    clock[0] = 140.0
    p.advance(10, key="finetune:bert:1.0:cola")  # its record was stale: fine-tuned again, 10 units in 40 s
    assert p.done == 30 and p.worked == 20
    p.advance(2, key="prompt:bert:sst2:k=0")  # a stage never on record counts as before
    assert p.done == 32 and not p.recorded


def test_a_rehearsal_pass_is_counted_once_and_leaves_the_pretrainings_rate_alone(clock):
    """runner._needed_runs passes over the stages after pretraining before the runs it recreates: one
    stage computed there (10 units in 30 s) is found recorded by the real pass. Its phase must not time
    the pretrainings that follow: their ETA is read from their own shares."""
    p = Progress(2 * PRETRAIN_UNITS + 10, lambda line: None, heartbeat_s=None)
    p.begin_work()
    clock[0] = 5.0
    with p.rehearsal():
        p.new_phase()
        clock[0] = 30.0
        p.advance(10, key="speed")  # computed in the rehearsal
    assert p.done == 0 and p.worked == 10 and p.phase_worked == 0
    share = [0.0]
    p.partial = lambda: PRETRAIN_UNITS * share[0]
    clock[0], share[0] = 130.0, 0.5  # half a run in 100 s: 20 s a unit
    assert _left(p) == pytest.approx(130.0 / 15 * (30 - 5), rel=0.01)  # the work's rate, not the phase's
    clock[0], share[0] = 230.0, 1.0  # (the rehearsal's phase, 10 units in 225 s, would say 450 s and rising)
    assert _left(p) == pytest.approx(230.0 / 20 * 20, rel=0.01)
    p.partial = None
    p.advance(2 * PRETRAIN_UNITS)
    p.advance(10, cached=True, key="speed")  # the real pass finds it recorded
    assert p.done == pytest.approx(p.total)
