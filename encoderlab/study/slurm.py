"""A study's jobs on a SLURM cluster (``executor: slurm``), submitted with submitit.

Each pretraining run is one job running `encoderlab pretrain` on its recipe, exactly as the local
executor's child does, so its checkpoints and records are the same; each fine-tuning or prompting
unit (one checkpoint on one task, all its seeds) and each BLiMP scoring of a checkpoint is one job.
This process, the controller, submits them, polls them, and writes every result to stages.json as it
lands: it stays the one writer.

Where things are (all under out_dir, which must be on a filesystem the nodes share; a first tiny job
checks that it sees the controller's out_dir, before the data stage):
- OUT/slurm/jobs.json: per job key (a stage key) its job id, attempt and history. A restarted
  controller reads it and picks up its jobs (running, or finished with a result) instead of submitting
  them again.
- OUT/slurm/submissions.log: one line per submission (key, job id, attempt, why), never rewritten.
- OUT/slurm/logs/<job id>/: submitit's pickles and the job's stdout/stderr.

How a job's fate is known. Without slurmdbd there is no sacct, and submitit reports every state as
UNKNOWN. The study reads the job's own marker, submitit's result pickle (written by rename as the job's
function returns or raises), and `squeue -t all` for whether the job is still queued or running:
- a result: the job's value, or the error its code raised (not transient: the study stops with the
  job's log tail, as a failed local pretraining does);
- a pretraining that returned "interrupted" (scancel, preemption: SIGTERM reached `encoderlab pretrain`,
  which saved a checkpoint and exited 143), or a job that left the queue with no result (SIGKILL, node
  failure): transient, submitted again up to ``job_retries`` times; a pretraining resumes from its last
  checkpoint;
- a job still running at its time limit gets SIGUSR2 first: submitit calls PretrainJob.checkpoint, which
  stops the run (it saves) and requeues the same job.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import submitit
from submitit.core.utils import pickle_load

from encoderlab.config import ConfigError
from encoderlab.study import launch
from encoderlab.study.config import StudyConfig
from encoderlab.study.progress import PRETRAIN_UNITS, PretrainShares, Progress, pretraining_status, tail_lines
from encoderlab.study.stages import StageKey, Stages
from encoderlab.threads import THREADS_FILE

# squeue's states of a job that has not ended (a requeued job passes through REQUEUED and PENDING)
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
          "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}
# A job seen ended with no result is judged after this long: a result written on another node may
# reach a shared filesystem's readers a little after the job has left the queue.
ENDED_GRACE_S = 5.0
POLL_S = 1.0


# ---- what runs on a node -------------------------------------------------------------------------
class PretrainJob(submitit.helpers.Checkpointable):
    """`encoderlab pretrain RUN_DIR/study_recipe.yaml` in a child process, its output appended to the
    run's pretrain.log, as the local executor runs it. Returns {"wall_s"} once the run completed, or
    {"interrupted": signal} when a signal stopped it after it saved (scancel); raises, with the log's
    tail, when it failed."""

    def __init__(self, run_dir: str, threads: int):
        self.run_dir, self.threads = run_dir, threads
        self._proc: subprocess.Popen | None = None

    def __call__(self) -> dict:
        run_dir = Path(self.run_dir)
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads))
        start = time.perf_counter()
        with open(run_dir / "pretrain.log", "a") as logf:
            logf.write(f"[slurm] job {os.environ.get('SLURM_JOB_ID', '?')} on {socket.gethostname()}\n")
            logf.flush()
            # SIGUSR2 (SLURM's warning before the time limit, or a preemption) reaches every process of the
            # job; its default would kill the run unsaved. The child ignores it: submitit's handler here
            # calls checkpoint(), which stops the run with SIGTERM (it saves) and requeues the job.
            self._proc = subprocess.Popen([sys.executable, "-m", "encoderlab", "pretrain",
                                           str(run_dir / launch.RECIPE_FILE)], stdout=logf, stderr=subprocess.STDOUT,
                                          env=env, preexec_fn=_ignore_usr2)
            code = self._proc.wait()
        if code == 0:
            return {"wall_s": time.perf_counter() - start}
        if (sig := launch.interrupt_signal(code)) is not None:
            return {"interrupted": sig}
        tail = "\n".join(tail_lines(run_dir / "pretrain.log", 8192)[-15:])
        raise RuntimeError(f"encoderlab pretrain exited {code}; {run_dir / 'pretrain.log'}:\n{tail}")

    def checkpoint(self, *args, **kwargs):
        """Time limit or preemption (SIGUSR2 from SLURM): the run saves on SIGTERM, then the same job
        is requeued and resumes from that checkpoint."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGTERM)
            if not _exited(self._proc.pid, timeout=60):
                self._proc.kill()
        return submitit.helpers.DelayedSubmission(PretrainJob(self.run_dir, self.threads))


def _exited(pid: int, timeout: float) -> bool:
    """Whether child ``pid`` exits within ``timeout`` s, leaving it to be reaped. Called from the signal
    handler while __call__ sits in Popen.wait, which holds the Popen's wait lock: a Popen.wait here
    would spin on that lock for the whole timeout (60 s of every requeue, measured), so this asks the
    kernel without reaping (WNOWAIT)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        time.sleep(0.1)
    return False


def _ignore_usr2() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def call_with_threads(fn: Callable, item, threads: int):
    """A fine-tuning or prompting unit on a node, at the job's CPUs as torch threads."""
    launch.set_threads(threads)
    return fn(item)


def read_token(path: str) -> dict:
    """The shared-filesystem check's job: what it reads of the controller's token, and where it ran."""
    p = Path(path)
    return {"token": p.read_text() if p.exists() else None, "host": socket.gethostname(), "cwd": os.getcwd()}


# ---- the controller's record of its jobs ---------------------------------------------------------
class Ledger:
    """OUT/slurm/jobs.json: per key the job in flight and its history, rewritten by rename after each
    change, so a controller killed at any moment and started again finds every job it had submitted."""

    def __init__(self, folder: Path):
        self.path, self.log = folder / "jobs.json", folder / "submissions.log"
        self.data: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def in_flight(self, key: str, fp: str) -> dict | None:
        e = self.data.get(key)
        return e if e and e["fingerprint"] == fp and e["state"] == "submitted" else None

    def submitted(self, key: str, fp: str, job_id: str, attempt: int, why: str) -> None:
        e = self.data.setdefault(key, {"history": []})
        e.update(fingerprint=fp, job_id=job_id, attempt=attempt, state="submitted")
        e["history"].append({"job_id": job_id, "attempt": attempt, "why": why, "at": time.strftime("%H:%M:%S")})
        self._write()
        with open(self.log, "a") as f:
            f.write(f"{key}\t{job_id}\t{attempt}\t{why}\n")

    def ended(self, key: str, state: str, outcome: str) -> None:
        e = self.data[key]
        e["state"] = state
        e["history"][-1]["outcome"] = outcome
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


@dataclass
class Job:
    """A job the controller waits on: its key, how to submit it again, and what it last saw of it."""

    key: str
    fp: str
    label: str
    submit: Callable[[], submitit.Job]
    job: submitit.Job
    attempt: int = 0
    ended_at: float | None = None
    failures: list[str] = field(default_factory=list)


def queue_states(job_ids: list[str]) -> dict[str, str] | None:
    """{job id: state} of these jobs that squeue still knows (-t all: ended ones too, for MinJobAge);
    None when squeue did not answer (nothing is concluded from that)."""
    if not job_ids:
        return {}
    try:
        got = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i %T", "-j", ",".join(job_ids)],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if got.returncode != 0:
        # every id unknown (aged out of the controller's memory) is an error too: then none is queued
        return {} if "Invalid job id" in got.stderr else None
    out = {}
    for line in got.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def outcome(j: Job, states: dict[str, str] | None, now: float) -> tuple[str, object] | None:
    """What became of job ``j``: ("success", value), ("error", traceback) or ("died", why), or None while
    it runs or nothing can be concluded yet."""
    result = j.job.paths.result_pickle
    if result.exists():
        return tuple(pickle_load(result))
    if states is None:
        return None
    state = states.get(j.job.job_id)
    if state in ACTIVE:
        j.ended_at = None
        return None
    if j.ended_at is None:
        j.ended_at = now
    if now - j.ended_at < ENDED_GRACE_S:
        return None
    return "died", f"{state or 'gone from the queue'} with no result"


# ---- the executor --------------------------------------------------------------------------------
class SlurmExecutor:
    """The study's jobs as SLURM jobs (module docstring)."""

    def __init__(self, cfg: StudyConfig, out: Path, *, log=print, poll_s: float = POLL_S):
        self.cfg, self.out, self.log_fn, self.poll_s = cfg, out, log, poll_s
        self.folder = out / "slurm"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(self.folder)
        self.checked = False

    # ---- submitting ----
    def _executor(self, name: str, gpus: int) -> submitit.SlurmExecutor:
        cfg = self.cfg
        ex = submitit.SlurmExecutor(folder=self.folder / "logs" / "%j", max_num_timeout=cfg.job_retries)
        params: dict = {"time": cfg.time_limit_min, "cpus_per_task": cfg.cpus_per_task,
                        "job_name": f"encoderlab-{name}", "stderr_to_stdout": True, "signal_delay_s": 60}
        if cfg.partition:
            params["partition"] = cfg.partition
        if cfg.account:
            params["account"] = cfg.account
        if cfg.mem_gb:
            params["mem"] = f"{int(cfg.mem_gb * 1024)}M"
        if gpus:
            params["gres"] = f"gpu:{gpus}"
        if cfg.sbatch:
            params["additional_parameters"] = dict(cfg.sbatch)
        ex.update_parameters(**params)
        return ex

    def _reattach(self, entry: dict) -> submitit.Job:
        return submitit.SlurmJob(folder=self.folder / "logs" / "%j", job_id=entry["job_id"])

    def _start(self, key: str, fp: str, label: str, submit: Callable[[], submitit.Job], progress: Progress) -> Job:
        """The job for ``key``: the one a previous controller submitted, when it is still in flight,
        else a new one."""
        if (entry := self.ledger.in_flight(key, fp)) is not None:
            progress.stage(f"{label}: picking up job {entry['job_id']} (attempt {entry['attempt'] + 1}), submitted "
                           "by an earlier controller")
            return Job(key, fp, label, submit, self._reattach(entry), attempt=entry["attempt"])
        job = submit()
        self.ledger.submitted(key, fp, job.job_id, 0, "first")
        progress.stage(f"{label}: submitted as job {job.job_id}")
        return Job(key, fp, label, submit, job)

    def start(self, progress: Progress) -> None:
        self.check_shared(progress)

    def check_shared(self, progress: Progress, timeout_s: float = 1800) -> None:
        """Refuse to start when a job does not see the controller's out_dir (ConfigError naming what the
        job saw): every result comes back through it."""
        if self.checked:
            return
        token_path = self.folder / f"probe-{uuid.uuid4().hex[:8]}"
        token = f"{socket.gethostname()}:{os.getpid()}:{time.time()}"
        token_path.write_text(token)
        progress.stage(f"checking that a job sees {self.out} (a tiny job on the cluster)")
        job = self._executor("check", 0).submit(read_token, str(token_path.resolve()))
        j = Job("check", "", "check", lambda: job, job)
        deadline = time.time() + timeout_s
        try:
            while (got := outcome(j, queue_states([job.job_id]), time.time())) is None:
                if time.time() > deadline:
                    raise ConfigError(f"the cluster did not run the check job {job.job_id} within {timeout_s:.0f} s; "
                                      f"is partition {self.cfg.partition or '(default)'} up? (sinfo)")
                time.sleep(self.poll_s)
        finally:
            token_path.unlink(missing_ok=True)
        kind, value = got
        if kind != "success" or value.get("token") != token:
            seen = (f"it ran on {value['host']} in {value['cwd']} and found no token at {token_path.resolve()}"
                    if kind == "success" else f"it {value if kind == 'died' else 'failed'} (log {job.paths.stdout})")
            raise ConfigError(f"out_dir {self.out} is not visible from a job: {seen}. Put out_dir on a filesystem "
                              "the nodes share (every job writes its checkpoints and results there)")
        self.checked = True

    # ---- waiting ----
    def _wait(self, pending: dict[str, Job], on_result: Callable[[Job, object], None], progress: Progress,
              *, transient: Callable[[object], str | None] = lambda value: None) -> list[str]:
        """Poll until every job has ended: results to on_result, transient ends submitted again (at most
        job_retries times), failures named. ``transient(value)``: why a successful return still asks for
        another attempt (a pretraining interrupted), or None. Returns the failures."""
        failed: list[str] = []
        while pending:
            states = queue_states([j.job.job_id for j in pending.values()])
            now = time.time()
            for key, j in list(pending.items()):
                got = outcome(j, states, now)
                if got is None:
                    continue
                kind, value = got
                why = transient(value) if kind == "success" else (value if kind == "died" else None)
                if kind == "success" and why is None:
                    del pending[key]
                    self.ledger.ended(key, "done", "completed")
                    on_result(j, value)
                elif kind == "error":
                    del pending[key]
                    self.ledger.ended(key, "failed", "failed")
                    tail = "\n".join(tail_lines(Path(j.job.paths.stdout), 8192)[-15:])
                    failed.append(f"{j.label}: job {j.job.job_id} failed:\n{str(value).strip().splitlines()[-1]}\n"
                                  f"log {j.job.paths.stdout}:\n{tail}")
                    progress.stage(f"{j.label}: job {j.job.job_id} failed; see {j.job.paths.stdout}")
                else:
                    self.ledger.ended(key, "retry", why)
                    j.failures.append(f"job {j.job.job_id}: {why}")
                    if j.attempt >= self.cfg.job_retries:
                        del pending[key]
                        failed.append(f"{j.label}: gave up after {j.attempt + 1} attempts ({'; '.join(j.failures)})")
                        progress.stage(f"{j.label}: job {j.job.job_id} {why}; no retries left (job_retries: "
                                       f"{self.cfg.job_retries})")
                        continue
                    old = j.job.job_id
                    j.job, j.attempt, j.ended_at = j.submit(), j.attempt + 1, None
                    self.ledger.submitted(key, j.fp, j.job.job_id, j.attempt, f"job {old} {why}")
                    progress.stage(f"{j.label}: job {old} {why}; submitted again as job {j.job.job_id} (attempt "
                                   f"{j.attempt + 1} of {self.cfg.job_retries + 1})")
            if pending:
                time.sleep(self.poll_s)
        return failed

    def _interrupted(self) -> str:
        return (f"the jobs go on on the cluster; run the study again to pick them up (their ids are in "
                f"{self.folder / 'jobs.json'}), or scancel them")

    # ---- the executor's two calls ----
    def pretrain(self, recipes, *, stages: Stages, progress: Progress, fingerprint, recreate) -> None:
        recreate = recreate or {}
        todo = [n for n, r in recipes.items()
                if n in recreate or stages.get(StageKey.pretrain(n), fingerprint(r)) is None]
        progress.advance(PRETRAIN_UNITS * (len(recipes) - len(todo)), cached=True)
        if not todo:
            return
        self.check_shared(progress)
        budget, threads = self.cfg.budget_flops, self.cfg.cpus_per_task
        counted = PretrainShares(progress, {n: Path(r.trainer.run_dir) for n, r in recipes.items()}, budget)
        progress.begin_work()
        pending: dict[str, Job] = {}
        for name in todo:
            launch.check_run_dir(name, recipes[name])
            run_dir = launch.prepare_run_dir(recipes[name], None)  # the job sets its threads itself
            (run_dir / THREADS_FILE).unlink(missing_ok=True)
            ex = self._executor(name, self.cfg.gpus_per_run)
            key, fp = str(StageKey.pretrain(name)), fingerprint(recipes[name])
            submit = functools.partial(ex.submit, PretrainJob(str(run_dir), threads))
            counted.start(name)
            pending[key] = self._start(key, fp, f"pretrain {name}", submit, progress)
        names = {str(StageKey.pretrain(n)): n for n in todo}

        def record(j: Job, value: dict) -> None:
            name = names[j.key]
            counted.finish(name)
            launch.record_pretraining(stages, name, recipes[name], j.fp, value["wall_s"], recreate.get(name))
            progress.stage(f"pretrain {name}: done (job {j.job.job_id})")

        def interrupted(value: dict) -> str | None:
            if "interrupted" in value:
                return f"was stopped by signal {value['interrupted']} after saving a checkpoint"
            return None

        running = {names[k]: None for k in pending}
        progress.detail = lambda: [pretraining_status(n, Path(recipes[n].trainer.run_dir), budget)
                                   for n in list(running)]
        progress.partial = lambda: counted.partial(running)
        try:
            with launch.interrupts_raise():
                failed = self._wait(pending, lambda j, v: (running.pop(names[j.key], None), record(j, v)), progress,
                                    transient=interrupted)
        except KeyboardInterrupt:
            progress.stage(f"interrupted: {self._interrupted()}")
            raise
        finally:
            progress.detail = progress.partial = None
        if failed:
            raise RuntimeError("pretraining failed: " + "\n".join(failed))

    def map(self, fn, items, *, keys, jobs, on_result, progress, describe, announce=None) -> None:
        if not items:
            return
        self.check_shared(progress)
        ex = self._executor("task", 0)
        threads = self.cfg.cpus_per_task
        pending: dict[str, Job] = {}
        for (key, fp), item in zip(keys, items, strict=True):
            submit = functools.partial(ex.submit, call_with_threads, fn, item, threads)
            pending[key] = self._start(key, fp, key, submit, progress)
        done = [0]
        progress.detail = lambda: [f"{describe(done[0])}; {len(pending)} jobs on the cluster"]

        def landed(j: Job, value) -> None:
            done[0] += 1
            on_result(value)

        try:
            with launch.interrupts_raise():
                failed = self._wait(pending, landed, progress)
        except KeyboardInterrupt:
            progress.stage(f"interrupted: {self._interrupted()}")
            raise
        finally:
            progress.detail = None
        if failed:
            raise RuntimeError("jobs failed: " + "\n".join(failed))
