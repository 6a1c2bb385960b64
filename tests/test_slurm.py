"""The study under ``executor: slurm``, against a real one-node SLURM on this machine
(scripts/slurm_local.sh starts it; without root or apt the tests skip, saying why).

Run by `make test-slurm` (a CI step of its own), not by `make test`: each test runs a tiny study's
jobs through the cluster. Every slurm run is compared with one `local` run of the same study in the
same out_dir path (the fingerprints hold the checkpoints' paths): the same stage keys, fingerprints
and numbers, timings aside.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from encoderlab.study.config import StudyConfig
from encoderlab.study.runner import run_study
from tests.test_study import BASE
from tests.test_study_blimp_causal import tiny_blimp

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[1]
# A budget that keeps the pretraining job running for ~20 s on a busy 2-core machine: long enough to
# scancel it and to kill the controller while it runs.
STUDY = {**BASE, "budget_flops": 1.0e10, "threads": 1, "cpus_per_task": 1}
# the jobs of one run of the study: the pretraining, the fine-tuning unit, BLiMP at both checkpoints
JOBS = ["pretrain:bert", "finetune:bert:1.0:demo", "blimp:bert@0.5", "blimp:bert@1"]
# Intermittent (issue 49, open): a run stopped by a signal and resumed (scancel, SIGUSR2) has twice in
# fresh-clone CI runs given a fine-tuning stage whose fingerprint differs from the local run's (the
# checkpoint it reads, its step or FLOPs after the resume, is the suspect); each test passed in other
# runs. Quarantined, still run and reported, until explained.
RESUME_MISMATCH = pytest.mark.xfail(strict=False, reason="intermittent after a signalled stop and resume (issue 49)")
TIMING = {"elapsed_s", "peak_memory_mb", "tokens_per_s", "wall_s"}


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("submitit")
    got = subprocess.run(["bash", str(ROOT / "scripts" / "slurm_local.sh")], capture_output=True, text=True,
                         timeout=600)
    if got.returncode != 0:
        pytest.skip(f"no one-node SLURM here: {(got.stdout + got.stderr).strip()[-400:]}")
    return got.stdout.strip()


@pytest.fixture(scope="module")
def space(tmp_path_factory, cluster):
    """(the out_dir every run uses, the local run's stages.json as it ended). The study scores two tiny
    BLiMP-format paradigms too, so BLiMP's jobs go through the cluster as well."""
    base = tmp_path_factory.mktemp("slurm")
    STUDY.update(blimp=str(tiny_blimp(base / "blimp")), blimp_pairs_per_paradigm=None)
    out = base / "study"
    run_study(StudyConfig.from_dict({**STUDY, "out_dir": str(out)}), log=lambda *a: None)
    local = json.loads((out / "stages.json").read_text())
    shutil.rmtree(out)
    return out, local


def _fresh(out: Path) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg = out.parent / "study.yaml"
    cfg.write_text(yaml.safe_dump({**STUDY, "out_dir": str(out), "executor": "slurm"}))
    return cfg


def _controller(cfg: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "encoderlab", "study", str(cfg)], cwd=ROOT,
                            stdout=open(log, "a"), stderr=subprocess.STDOUT)


def _without_timings(x):
    if isinstance(x, dict):
        return {k: _without_timings(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [_without_timings(v) for v in x]
    return x


def _assert_same_records(out: Path, local: dict, *, extra_checkpoints: int = 0) -> None:
    """The slurm run's stages equal the local run's: keys, fingerprints, numbers (timings and the speed
    stage's measured rates aside). ``extra_checkpoints``: at most this many saves of an interrupted run
    beyond the local run's checkpoints (which must all be there)."""
    got = json.loads((out / "stages.json").read_text())
    assert sorted(got) == sorted(local)
    for key in local:
        assert got[key]["fingerprint"] == local[key]["fingerprint"], key
        if key.startswith("speed"):
            continue
        a, b = _without_timings(local[key]["result"]), _without_timings(got[key]["result"])
        if key.startswith("pretrain:"):
            mine, theirs = b.pop("checkpoints"), a.pop("checkpoints")
            # the save at a stop adds one, unless the run stopped at a periodic checkpoint's step (a run of
            # 16 steps, cancelled right after its step-8 save, once in CI)
            assert all(c in mine for c in theirs) and len(theirs) <= len(mine) <= len(theirs) + extra_checkpoints, (
                mine, theirs)
        assert a == b, key


def _jobs(out: Path) -> dict:
    path = out / "slurm" / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _submissions(out: Path) -> list[list[str]]:
    path = out / "slurm" / "submissions.log"
    return [ln.split("\t") for ln in path.read_text().splitlines()] if path.exists() else []


def _wait(what, condition, proc: subprocess.Popen | None = None, timeout: float = 240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (got := condition()):
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the controller exited ({proc.returncode}) before {what}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _running(job_id: str) -> bool:
    got = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return got.stdout.strip() == "RUNNING"


def _signal_the_pretraining(out: Path, cfg: Path, log: Path, *scancel: str, act=None) -> str:
    """Run the study's controller; once its pretraining job runs and has saved a first checkpoint,
    `scancel SCANCEL... JOB` (or ``act(job)``); wait for the study to finish. Returns the job's id."""
    proc = _controller(cfg, log)
    try:
        job = _wait("the pretraining job", lambda: _jobs(out).get("pretrain:bert", {}).get("job_id"), proc)
        ckdir = out / "runs" / "bert" / "checkpoints"
        _wait("its first checkpoint", lambda: _running(job) and ckdir.is_dir() and any(ckdir.iterdir()), proc)
        if act is not None:
            act(job)
        else:
            subprocess.run(["scancel", *scancel, job], check=True)
        assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    return job


def test_slurm_study_records_equal_local(space):
    out, local = space
    cfg = _fresh(out)
    run_study(StudyConfig.from_yaml(cfg), log=lambda *a: None)
    _assert_same_records(out, local)
    subs = _submissions(out)
    assert [s[0] for s in subs] == JOBS  # one job each, none again
    assert all(s[2] == "0" for s in subs)


@RESUME_MISMATCH
def test_scancel_of_a_pretraining_job_resumes_and_loses_nothing(space):
    out, local = space
    cfg = _fresh(out)
    log = out.parent / "scancel.log"
    job = _signal_the_pretraining(out, cfg, log)
    subs = _submissions(out)
    pre = [s for s in subs if s[0] == "pretrain:bert"]
    assert [s[2] for s in pre] == ["0", "1"] and pre[1][3].startswith(f"job {job} "), pre  # resubmitted once
    assert "submitted again" in log.read_text()
    # the run saved where it stopped and resumed from there: one checkpoint more than the local run's,
    # every number the same
    _assert_same_records(out, local, extra_checkpoints=1)


def test_controller_killed_and_restarted_submits_nothing_twice(space):
    out, local = space
    cfg = _fresh(out)
    log = out.parent / "sigkill.log"
    first = _controller(cfg, log)
    _wait("the pretraining job running",
          lambda: (j := _jobs(out).get("pretrain:bert")) and _running(j["job_id"]), first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = _controller(cfg, log)
    try:  # picks the running pretraining up; killed again once its fine-tuning job is out
        _wait("the fine-tuning job", lambda: "finetune:bert:1.0:demo" in _jobs(out), second)
        second.send_signal(signal.SIGKILL)
        second.wait()
        third = subprocess.run([sys.executable, "-m", "encoderlab", "study", str(cfg)], cwd=ROOT, capture_output=True,
                               text=True, timeout=400)
    finally:
        second.kill()
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    subs = _submissions(out)
    assert [s[0] for s in subs] == JOBS, subs  # each once, none again
    assert "picking up job" in log.read_text() + third.stdout
    _assert_same_records(out, local)


def test_second_controller_is_refused(space):
    out, _ = space
    cfg = _fresh(out)
    log = out.parent / "second.log"
    first = _controller(cfg, log)
    try:
        _wait("the first controller's lock", lambda: "pretrain:bert" in _jobs(out), first)
        second = subprocess.run([sys.executable, "-m", "encoderlab", "study", str(cfg)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        said = second.stdout + second.stderr
        assert "held by another study controller" in said and f"pid {first.pid}" in said, said
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
        for entry in _jobs(out).values():
            subprocess.run(["scancel", entry["job_id"]])


def test_a_failing_job_stops_the_study_with_its_log_tail(space):
    out, _ = space
    cfg = _fresh(out)
    broken = out / "runs" / "bert" / "checkpoints" / "step-000001"  # a checkpoint its run cannot resume
    broken.mkdir(parents=True)
    (broken / "trainer_state.json").write_text("{not json")
    got = subprocess.run([sys.executable, "-m", "encoderlab", "study", str(cfg)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    said = got.stdout + got.stderr
    assert got.returncode != 0, said
    assert "pretraining failed" in said and "cannot resume" in said, said[-3000:]
    assert str(out / "runs" / "bert" / "pretrain.log") in said
    subs = _submissions(out)
    assert len([s for s in subs if s[0] == "pretrain:bert"]) == 1  # not transient: not submitted again
    assert os.path.exists(broken)  # nothing of the run's folder removed


def test_an_out_dir_the_jobs_cannot_see_is_refused(tmp_path, cluster):
    """The controller in a mount namespace of its own, out_dir on a tmpfs there: the nodes' jobs (started
    by slurmd, outside it) see an empty folder, as on a cluster where out_dir is a login node's local disk."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no mount namespace here (unshare -m needs root)")
    private = tmp_path / "private"
    private.mkdir()
    cfg = tmp_path / "study.yaml"
    cfg.write_text(yaml.safe_dump({**STUDY, "out_dir": str(private / "study"), "executor": "slurm"}))
    script = f"mount -t tmpfs none {private} && exec {sys.executable} -m encoderlab study {cfg}"
    got = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    said = got.stdout + got.stderr
    assert got.returncode != 0, said[-3000:]
    assert f"out_dir {private / 'study'} is not visible from a job" in said, said[-3000:]
    assert "Put out_dir on a filesystem the nodes share" in said
    assert "submitted as job" not in said  # the check job only: nothing of the study was submitted


@RESUME_MISMATCH
def test_a_pretraining_at_its_time_limit_saves_and_is_requeued(space):
    """SIGUSR2 is what SLURM sends before a time limit or a preemption (submitit asks for it 60 s
    ahead); `scancel --signal=USR2` sends it now. The run saves, the same job is requeued and resumes."""
    out, local = space
    cfg = _fresh(out)
    log = out.parent / "usr2.log"
    job = _signal_the_pretraining(out, cfg, log, "--signal=USR2")
    assert [s[0] for s in _submissions(out)] == JOBS  # requeued by SLURM under the same id: no new submission
    job_log = (out / "slurm" / "logs" / job / f"{job}_0_log.out").read_text()
    assert "this job is preempted" in job_log or "this job is timed-out" in job_log, job_log[-2000:]
    assert "Requeued" in job_log or "requeue" in job_log.lower(), job_log[-2000:]
    _assert_same_records(out, local, extra_checkpoints=1)


def test_a_pretraining_job_killed_outright_is_submitted_again_from_its_last_checkpoint(space):
    """The job's processes SIGKILLed (as on a node lost with them): no save, no result. The controller
    sees the job leave the queue without one, submits it again, and the run resumes from its last
    periodic checkpoint. (`scancel --signal=KILL` is no such test: slurmstepd then ends the run with
    SIGTERM, and it saves.)"""
    out, local = space
    cfg = _fresh(out)
    log = out.parent / "kill.log"

    def lose(job: str) -> None:  # the job's own python first, so that nothing is left to write a result
        subprocess.run(["pkill", "-9", "-f", f"submitit.core._submit {out / 'slurm' / 'logs'}"])
        subprocess.run(["pkill", "-9", "-f", str(out / "runs" / "bert" / "study_recipe.yaml")])

    job = _signal_the_pretraining(out, cfg, log, act=lose)
    pre = [s for s in _submissions(out) if s[0] == "pretrain:bert"]
    assert [s[2] for s in pre] == ["0", "1"] and pre[1][3].startswith(f"job {job} ") and "with no result" in pre[1][3]
    _assert_same_records(out, local)  # no save at the kill: the local run's checkpoints exactly
