"""The executor seam without a cluster: the controller lock, one pretraining per GPU on a machine
with several, the cluster executor's ledger and how it reads a job's end (tests/test_slurm.py runs
the real thing against a one-node SLURM)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from encoderlab.config import ConfigError
from encoderlab.study import executor, launch
from encoderlab.study.config import StudyConfig, default_base
from encoderlab.study.lock import controller_lock
from encoderlab.study.progress import Progress
from encoderlab.study.stages import Stages


def test_a_second_controller_is_refused_naming_the_first(tmp_path):
    with controller_lock(tmp_path):
        with pytest.raises(ConfigError, match=r"held by another study controller \(pid \d+ on .+, since "):
            with controller_lock(tmp_path):
                pass
    with controller_lock(tmp_path):  # released on leaving: the next one takes it
        pass


def test_a_killed_controller_leaves_no_stale_lock(tmp_path):
    code = ("import sys, time; from pathlib import Path; from encoderlab.study.lock import controller_lock\n"
            "with controller_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
            with controller_lock(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with controller_lock(tmp_path):  # the kernel dropped the dead holder's flock
        pass


class _Child:
    """A stand-in pretraining child: running for a few polls, then done."""

    def __init__(self, env):
        self.env, self.polls, self.returncode = env, 0, None

    def poll(self):
        self.polls += 1
        if self.polls > 3:
            self.returncode = 0
        return self.returncode


def test_one_pretraining_per_gpu(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = StudyConfig.from_dict({"gpus_per_run": 1, "pretrain_jobs": 1})
    assert executor.gpu_slots(cfg) == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # the ids this process was given
    assert executor.gpu_slots(cfg) == ["4", "6"]
    children: list[_Child] = []

    def start(recipe, env, threads=None):
        running = [c for c in children if c.returncode is None]
        assert len(running) < 2, "more pretrainings at once than GPUs"
        assert env["CUDA_VISIBLE_DEVICES"] not in {c.env["CUDA_VISIBLE_DEVICES"] for c in running}
        children.append(_Child(env))
        return children[-1]

    monkeypatch.setattr(launch, "start_pretraining", start)
    monkeypatch.setattr(launch.time, "sleep", lambda s: None)
    recipes = {n: default_base().replace(trainer=default_base().trainer.replace(run_dir=str(tmp_path / n)))
               for n in ("a", "b", "c")}
    stages = Stages(tmp_path / "stages.json")
    progress = Progress(30, lambda *a: None, heartbeat_s=None)
    executor.LocalExecutor(cfg).pretrain(recipes, stages=stages, progress=progress, fingerprint=lambda r: "fp",
                                         recreate={})
    assert len(children) == 3 and all(stages.get(f"pretrain:{n}", "fp") is not None for n in recipes)
    assert {c.env["CUDA_VISIBLE_DEVICES"] for c in children} == {"4", "6"}


def test_gpus_per_run_needs_a_gpu_and_at_most_one(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="no CUDA device"):
        executor.gpu_slots(StudyConfig.from_dict({"gpus_per_run": 1}))
    assert executor.gpu_slots(StudyConfig.from_dict({})) is None
    with pytest.raises(ConfigError, match="gpus_per_run: 2"):
        StudyConfig.from_dict({"gpus_per_run": 2})
    with pytest.raises(ConfigError, match="executor"):
        StudyConfig.from_dict({"executor": "kubernetes"})


def test_the_ledger_finds_jobs_in_flight_after_a_restart(tmp_path):
    slurm = pytest.importorskip("encoderlab.study.slurm")
    ledger = slurm.Ledger(tmp_path)
    ledger.submitted("pretrain:bert", "fp1", "41", 0, "first")
    again = slurm.Ledger(tmp_path)  # a restarted controller
    assert again.in_flight("pretrain:bert", "fp1")["job_id"] == "41"
    assert again.in_flight("pretrain:bert", "fp2") is None  # another recipe: not this job
    again.ended("pretrain:bert", "retry", "CANCELLED with no result")
    again.submitted("pretrain:bert", "fp1", "42", 1, "job 41 CANCELLED with no result")
    again.ended("pretrain:bert", "done", "completed")
    assert slurm.Ledger(tmp_path).in_flight("pretrain:bert", "fp1") is None
    lines = (tmp_path / "submissions.log").read_text().splitlines()
    assert [ln.split("\t")[:3] for ln in lines] == [["pretrain:bert", "41", "0"], ["pretrain:bert", "42", "1"]]


def test_a_job_is_judged_ended_only_when_the_queue_says_so(tmp_path, monkeypatch):
    slurm = pytest.importorskip("encoderlab.study.slurm")
    from submitit.core.utils import cloudpickle_dump

    result = tmp_path / "7_result.pkl"
    job = slurm.Job("k", "fp", "k", submit=lambda: None,
                    job=SimpleNamespace(job_id="7", paths=SimpleNamespace(result_pickle=result)))
    now = time.time()
    assert slurm.outcome(job, {"7": "RUNNING"}, now) is None
    assert slurm.outcome(job, None, now) is None  # squeue did not answer: nothing concluded
    assert slurm.outcome(job, {}, now) is None  # left the queue: a grace period for a late result
    assert slurm.outcome(job, {"7": "PENDING"}, now + 1) is None and job.ended_at is None  # requeued
    assert slurm.outcome(job, {"7": "CANCELLED"}, now + 2) is None
    assert slurm.outcome(job, {"7": "CANCELLED"}, now + 2 + slurm.ENDED_GRACE_S) == ("died", "CANCELLED with no result")
    cloudpickle_dump(("success", {"wall_s": 1.0}), result)
    assert slurm.outcome(job, {}, now) == ("success", {"wall_s": 1.0})  # its own marker first


def test_queue_states_reads_squeue(monkeypatch):
    slurm = pytest.importorskip("encoderlab.study.slurm")
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if "9" in cmd[-1]:
            return SimpleNamespace(returncode=1, stdout="", stderr="slurm_load_jobs error: Invalid job id specified")
        return SimpleNamespace(returncode=0, stdout="3 RUNNING\n4_1 PENDING\n", stderr="")

    monkeypatch.setattr(slurm.subprocess, "run", run)
    assert slurm.queue_states(["3", "4_1"]) == {"3": "RUNNING", "4_1": "PENDING"}
    assert slurm.queue_states(["9"]) == {}  # unknown to the controller: no longer queued
    assert calls[0][:6] == ["squeue", "-h", "-r", "-t", "all", "-o"]
    monkeypatch.setattr(slurm.subprocess, "run", lambda cmd, **kw: SimpleNamespace(returncode=1, stdout="",
                                                                                   stderr="connection refused"))
    assert slurm.queue_states(["3"]) is None


def test_a_pretraining_job_reports_an_interruption_and_a_failure(tmp_path, monkeypatch):
    slurm = pytest.importorskip("encoderlab.study.slurm")
    run_dir = Path(tmp_path)
    (run_dir / launch.RECIPE_FILE).write_text("not: a recipe\n")
    codes = iter([143, 1])

    class Proc:
        def __init__(self, cmd, stdout, preexec_fn, **kw):
            stdout.write("Traceback ...\nCheckpointError: cannot resume\n")

        def wait(self):
            return next(codes)

    monkeypatch.setattr(slurm.subprocess, "Popen", Proc)
    assert slurm.PretrainJob(str(run_dir), 1)() == {"interrupted": 15}  # saved on SIGTERM: transient
    with pytest.raises(RuntimeError, match="exited 1(.|\n)*cannot resume"):  # not transient, with the log's tail
        slurm.PretrainJob(str(run_dir), 1)()


def test_a_pretraining_job_stops_its_run_at_once_when_slurm_warns(tmp_path):
    """checkpoint() runs in the signal handler while __call__ waits on the child: it must see the child
    exit without Popen.wait, whose lock the interrupted wait holds (it spun 60 s on every requeue)."""
    slurm = pytest.importorskip("encoderlab.study.slurm")
    job = slurm.PretrainJob(str(tmp_path), 1)
    job._proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with job._proc._waitpid_lock:  # as held by the wait that the signal interrupted
        start = time.monotonic()
        again = job.checkpoint()
        took = time.monotonic() - start
    assert took < 10, f"{took:.1f} s to see the run stop"
    assert job._proc.wait(timeout=5) == -15  # SIGTERM, reaped afterwards as usual
    assert isinstance(again.function, slurm.PretrainJob) and again.function.run_dir == str(tmp_path)
