"""The study's processes: pretrainings as `encoderlab pretrain` children, fine-tunings in a pool of
workers, and how both are stopped.

Each pretraining is a child process given its variant's PretrainConfig as YAML (study_recipe.yaml in
its run directory); it resumes by itself from its last checkpoint. If the study stops (an error,
Ctrl-C, SIGTERM), its children are stopped first (SIGTERM: they save a checkpoint), so a rerun never
finds a second trainer writing the same run directory.

An interrupt is not a failure. Ctrl-C reaches the whole process group: the children save and exit
128 + the signal, and the study raises KeyboardInterrupt("signal N"), which the command line prints
as one line and exit status 128 + N. The study answers SIGINT itself while children run, also when
it was started with SIGINT ignored (a background job of a script, as the children never ignore it):
before, such a study read its children's exit 130 as a failure and ended in a RuntimeError.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from encoderlab.config import ConfigError
from encoderlab.study import runs
from encoderlab.study.progress import (
    PRETRAIN_UNITS,
    PretrainShares,
    Progress,
    pretraining_status,
    tail_lines,
)
from encoderlab.study.stages import StageKey, Stages
from encoderlab.threads import THREADS_FILE, write_threads
from encoderlab.train.config import PretrainConfig
from encoderlab.train.state import list_checkpoints

RECIPE_FILE = "study_recipe.yaml"


def pretrain_all(recipes: dict[str, PretrainConfig], *, jobs: int, threads: int | None, budget: float,
                 stages: Stages, progress: Progress, fingerprint: Callable[[PretrainConfig], str],
                 cores: int | None = None, recreate: dict[str, dict] | None = None,
                 gpus: list[str] | None = None) -> None:
    """Pretrain every variant not done yet, up to ``jobs`` at once, each on ``threads`` threads.
    Once nothing is left to start, the ``cores`` (default threads x jobs) of finished ones go to
    those still running, as far as the machine's load leaves them free (spread_threads). After a
    failure no new variant starts; the running ones finish, and the study stops naming the failures
    and their logs. A child interrupted (Ctrl-C, SIGTERM: exit 130 or 143 after saving) is no
    failure: the study stops the others, which save too, and raises KeyboardInterrupt. ``recreate``:
    {run: its recorded stage} of done runs to pretrain again for their weights; the record is kept,
    with how the new run compares. ``gpus``: CUDA_VISIBLE_DEVICES values, one per running child (a
    machine with several GPUs runs one pretraining on each; study/executor.gpu_slots)."""
    recreate = recreate or {}
    on_gpu: dict[str, str] = {}  # run -> the GPU it holds
    todo = [name for name, r in recipes.items()
            if name in recreate or stages.get(StageKey.pretrain(name), fingerprint(r)) is None]
    for name in todo:
        check_run_dir(name, recipes[name])
    progress.advance(PRETRAIN_UNITS * (len(recipes) - len(todo)), cached=True)
    env = dict(os.environ) if threads is None else dict(os.environ, OMP_NUM_THREADS=str(threads))
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    shares = {name: threads for name in todo}
    failed: list[str] = []
    stopped: list[int] = []  # the signals that interrupted children
    said: dict[str, tuple[int, int]] = {}  # spread_threads' last word per run, said once

    def reap(name: str, proc: subprocess.Popen, started: float) -> None:
        del running[name]
        on_gpu.pop(name, None)
        # A later `encoderlab pretrain` of this folder must not inherit the study's count.
        (Path(recipes[name].trainer.run_dir) / THREADS_FILE).unlink(missing_ok=True)
        counted.finish(name)
        if proc.returncode == 0:
            # with the run's record (study/runs.py): a machine without the run folder reads it from here
            record_pretraining(stages, name, recipes[name], fingerprint(recipes[name]),
                               time.perf_counter() - started, recreate.get(name))
            return
        log = Path(recipes[name].trainer.run_dir) / "pretrain.log"
        if (sig := interrupt_signal(proc.returncode)) is not None:
            stopped.append(sig)
            progress.stage(f"pretrain {name} interrupted: its checkpoints are kept, and a rerun of the study "
                           "resumes it")
            return
        failed.append(f"variant {name!r} (exit {proc.returncode}); log {log}:\n{_tail(log)}")
        progress.stage(f"pretrain {name} failed (exit {proc.returncode}); see {log}")

    counted = PretrainShares(progress, {n: Path(r.trainer.run_dir) for n, r in recipes.items()}, budget)
    progress.begin_work()  # the ETA's rate is read from here: data preparation took no units
    progress.detail = lambda: [pretraining_status(n, Path(recipes[n].trainer.run_dir), budget) for n in list(running)]
    progress.partial = lambda: counted.partial(running)
    with interrupts_raise():
        try:
            while running or (todo and not failed):
                while todo and not failed and len(running) < jobs:
                    name = todo.pop(0)
                    progress.stage(f"pretrain {name}: {budget:.3g} FLOPs budget"
                                   + (f" ({len(running) + 1} running)" if jobs > 1 else ""))
                    counted.start(name)  # a resumed variant's earlier share is done, not worked here
                    child_env = env
                    if gpus:
                        on_gpu[name] = next(g for g in gpus if g not in on_gpu.values())
                        child_env = dict(env, CUDA_VISIBLE_DEVICES=on_gpu[name])
                    running[name] = (start_pretraining(recipes[name], child_env, threads), time.perf_counter())
                time.sleep(0.2)
                for name, (proc, started) in list(running.items()):
                    if proc.poll() is not None:
                        reap(name, proc, started)
                if stopped:  # a child was interrupted, not by the study: Ctrl-C to the group, or a signal to it
                    raise KeyboardInterrupt(f"signal {stopped[0]}")
                if threads and running and len(running) < jobs and not (todo and not failed):
                    spread_threads(recipes, running, cores or threads * jobs, shares, progress, said)
        except BaseException:
            for proc, _ in running.values():
                proc.send_signal(signal.SIGTERM)
            for name, (proc, started) in list(running.items()):
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                reap(name, proc, started)
            raise
        finally:
            progress.detail = progress.partial = None
    if failed:
        skipped = f"\nnot started: {', '.join(todo)}" if todo else ""
        raise RuntimeError("pretraining failed: " + "\n".join(failed) + skipped)


def record_pretraining(stages: Stages, name: str, recipe: PretrainConfig, fp: str, wall_s: float,
                       recreated: dict | None = None) -> None:
    """A finished run's pretraining stage, with its record (study/runs.py), whichever executor ran it.
    ``recreated``: the recorded stage of a run pretrained again for its weights, which stays the one its
    fine-tunings read, with how the new run compares."""
    got = {"wall_s": wall_s, **runs.record(Path(recipe.trainer.run_dir))}
    if recreated is not None:
        got = {**recreated, "recreated": runs.recreation(recreated, got)}
    stages.put(StageKey.pretrain(name), fp, got)


def check_run_dir(name: str, recipe: PretrainConfig) -> None:
    """Refuse to resume a run directory that holds checkpoints of another recipe (a study rerun with
    another budget, model or schedule): its trainer would continue the old run on the new schedule and
    mix both in one folder. The folder is left as it is. The saved recipe is read as the trainer reads
    it (old keys included), so only real changes are named."""
    import warnings

    run_dir = Path(recipe.trainer.run_dir)
    saved = run_dir / RECIPE_FILE
    if not saved.exists() or not list_checkpoints(run_dir):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notes about old keys in our own file would only confuse
        old = _flat(PretrainConfig.from_yaml(saved).to_dict())
    new = _flat(recipe.to_dict())
    changed = [f"{k}: {old.get(k)} -> {new.get(k)}" for k in sorted(old.keys() | new.keys())
               if old.get(k) != new.get(k)]
    if changed:
        raise ConfigError(f"variant {name!r}: {run_dir} holds checkpoints of another recipe ({'; '.join(changed)}); "
                          "a study does not continue them under a new one. Move that folder away, or give the "
                          "study another out_dir, to pretrain this recipe")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt("signal N") in the study while it waits on its
    children, whatever it inherited (SIGINT ignored, in a background job); the handlers are put back."""
    previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


def interrupt_signal(returncode: int) -> int | None:
    """The signal that interrupted a child (Ctrl-C or SIGTERM), None when it ended otherwise: `encoderlab
    pretrain` saves and exits 128 + the signal; one stopped before it set its handlers dies of it."""
    for s in (signal.SIGINT, signal.SIGTERM):
        if returncode in (128 + s, -s):
            return int(s)
    return None


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(tail_lines(path, 8192)[-lines:])


def spread_threads(recipes: dict[str, PretrainConfig], running: dict, cores: int, shares: dict[str, int | None],
                   progress: Progress, said: dict[str, tuple[int, int]] | None = None) -> None:
    """Give the cores of finished pretrainings to the ones still running, once nothing is left to
    start (the first running ones get the remainder), as far as the machine has them free: each
    running child reads its new count from its run directory at its next log step.

    On a machine busy with other work a run handed its finished sibling's core fell from 9,472 to 687
    tokens/s (issue 51): torch's threads meet at every parallel region, and one of them waiting for a
    core another process holds stalls the rest. So a run gets more threads only where the 1-minute
    load average, less this study's own running threads, leaves cores free (free_cores); else it
    keeps its count and the progress line says why, once (``said``: the last word per run). Called
    again at every check, it hands the cores once the load falls: the finished run's own share
    leaves the average within a minute or so."""
    said = {} if said is None else said
    own = sum(shares.get(n) or 1 for n in running)
    room, load = free_cores(own)
    allowed = cores if room is None else max(own, min(cores, room))
    each, extra = divmod(cores, len(running))
    each_allowed, extra_allowed = divmod(allowed, len(running))
    for i, name in enumerate(running):
        want = max(1, each + (i < extra))
        now = shares.get(name) or 1
        share = max(now, min(want, each_allowed + (i < extra_allowed)))  # never taken away mid-run
        if share != now:
            write_threads(Path(recipes[name].trainer.run_dir), share)
            shares[name] = share
            progress.stage(f"pretrain {name}: {share} threads from its next log step ({len(running)} running)")
        if share < want and said.get(name) != (share, want):
            progress.stage(f"pretrain {name}: stays at {share} thread{'s' if share > 1 else ''}, not {want}: {load} "
                           "leaves no more cores free beyond this study's runs (more threads on busy cores slow a "
                           "run down)")
        said[name] = (share, want)


def free_cores(own: int) -> tuple[int | None, str]:
    """(The cores this study's running pretrainings may use without taking them from other work, a
    phrase saying why): the machine's cores less the part of its 1-minute load average that is not
    theirs (``own``: their threads now); (None, "") where the system has no load average. A load
    within half a core of free counts as free."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None, ""
    cpus = os.cpu_count() or 1
    return int(cpus - max(0.0, load - own) + 0.5), f"the machine's load average {load:.1f} on {cpus} cores"


def start_pretraining(recipe: PretrainConfig, env: dict, threads: int | None = None) -> subprocess.Popen:
    """``encoderlab pretrain`` of one recipe in a child process, its output appended to pretrain.log."""
    run_dir = prepare_run_dir(recipe, threads)
    with open(run_dir / "pretrain.log", "a") as logf:  # the child keeps its own handle
        return subprocess.Popen([sys.executable, "-m", "encoderlab", "pretrain", str(run_dir / RECIPE_FILE)],
                                stdout=logf, stderr=subprocess.STDOUT, env=env)


def prepare_run_dir(recipe: PretrainConfig, threads: int | None) -> Path:
    """The run directory with the recipe the child reads, and a threads file at the count it is
    launched with, so that a file left by an earlier run of the folder does not change it."""
    run_dir = Path(recipe.trainer.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    recipe.to_yaml(run_dir / RECIPE_FILE)
    if threads:
        write_threads(run_dir, threads)
    else:
        (run_dir / THREADS_FILE).unlink(missing_ok=True)
    return run_dir


def run_pool(fn: Callable, items: list, *, jobs: int, threads: int | None, on_result: Callable,
             progress: Progress, describe: Callable[[int], str]) -> None:
    """fn over items in ``jobs`` worker processes (spawned: a forked copy of a process that already
    ran torch's thread pool can hang), each result handed to on_result as it finishes, so an
    interrupted study keeps what it got. Leaving the pool terminates the workers, also on an error
    or a signal."""
    finished = [0]
    progress.detail = lambda: [describe(finished[0])]
    try:
        with interrupts_raise(), multiprocessing.get_context("spawn").Pool(jobs, worker_init, (threads,)) as pool:
            for result in pool.imap_unordered(fn, items):
                finished[0] += 1
                on_result(result)
    finally:
        progress.detail = progress.partial = None


def run_inline(fn: Callable, items: Iterable, *, threads: int | None, on_result: Callable) -> None:
    """fn over items in this process, at ``threads`` torch threads (restored afterwards)."""
    with at_threads(threads):
        for item in items:
            on_result(fn(item))


@contextlib.contextmanager
def at_threads(threads: int | None):
    """This process at ``threads`` torch threads (None: as it is), restored afterwards."""
    import torch

    before = torch.get_num_threads()
    set_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def worker_init(threads: int | None) -> None:
    """A pool worker's start: Ctrl-C reaches the whole process group, and the study (the parent)
    answers it by ending the pool; a worker that took it too would print a KeyboardInterrupt
    traceback each. So workers ignore SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_threads(threads)


def set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)
