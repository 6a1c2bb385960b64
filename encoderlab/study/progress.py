"""What a running study tells a person: a line per stage, with an ETA for the whole study, and a
heartbeat every 30 s while a stage runs, so no minute passes in silence (also when the output is a
log file, not a terminal).

The heartbeat asks the running stage for its details (for pretraining: each running variant's share
of its FLOPs budget, tokens/s and ETA, read from its metrics.jsonl) and prints them, or the stage's
name and how long it has run where the stage has nothing finer to say.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from encoderlab.checkpoint import CheckpointError
from encoderlab.train.state import checkpoint_info, list_checkpoints

HEARTBEAT_S = 30.0


# ETA weights: a variant's pretraining is the bulk of a study, a fine-tuning or measurement a little.
PRETRAIN_UNITS = 10


class Progress:
    """Stage lines a person can follow, with an ETA for the whole study from the planned work."""

    def __init__(self, total_units: float, log, *, heartbeat_s: float | None = HEARTBEAT_S,
                 planned: tuple[float, float, float] | None = None):
        self.total, self.done, self.worked, self.start, self.log = total_units, 0.0, 0.0, time.perf_counter(), log
        # The plan's timed seconds (study/estimate.py) as (pretraining units, pretraining seconds,
        # seconds of everything after): the ETA reads the units through it, corrected by how the
        # work done so far ran against its plan. The units alone priced a fine-tuning by a ratio
        # measured at 5e13 FLOPs, so the demo (1.6e12) read ~2,400 s left where ~300 s were.
        self.planned = planned
        self.current, self.stage_start, self.last_line = "", self.start, self.start
        self.detail: Callable[[], list[str]] | None = None
        # When the first work that has units began: the time before it (training the tokenizer,
        # tokenizing the corpus: no units) is not work the rate may be read from. It used to be:
        # the ETA then ran high by (that time / the time worked) through the pretrainings, and fell
        # at the fine-tunings' first result, whose phase rate leaves it out (issue 34: ~832 s, then ~21 s).
        self.work_start: float | None = None
        # Units of work under way (e.g. running pretrainings' shares of their budgets): counted as
        # done and worked for the ETA, else a stage of long jobs would set the rate from the jobs
        # finished alone and overstate the time left (2-3x while two pretrainings run).
        self.partial: Callable[[], float] | None = None
        # The rate of the phase under way (fine-tuning, measuring) once it has finished some work:
        # its units are calibrated against pretraining's only roughly (plan.finetune_weight), so a
        # rate set by a long pretraining phase misjudges what follows it (2.4x in claims-deep).
        self.phase_start, self.phase_worked = self.start, 0.0
        # Stages an earlier run recorded that this one reaches only after other work (a variant added
        # to a study, or a part that pretrains its runs again: their fine-tunings are on record), by
        # key: counted done from the start, else the ETA priced them at the pretrainings' rate
        # (claims-blimp-generator, 2026-12-07: "~14,800 s left" 14 minutes into a part that took 111 minutes).
        self.recorded: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if heartbeat_s:
            self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True, name="study-progress")
            self._thread.start()

    def begin_work(self) -> None:
        """Work with units starts (launch.pretrain_all, before the first pretraining): the ETA's
        rate is read from here on."""
        if self.work_start is None:
            self.work_start = time.perf_counter()

    def stage(self, text: str) -> None:
        self.current, self.stage_start = text, time.perf_counter()
        self._say(text)

    def on_record(self, key: str, units: float) -> None:
        """A stage this run will reach with a record under ``key`` (its fingerprint is checked then):
        done from now on."""
        if key not in self.recorded:
            self.recorded[key] = units
            self.done += units

    def advance(self, units: float, *, cached: bool = False, key: str | None = None) -> None:
        """Count finished work; a stage found finished by an earlier run (cached) took no time in
        this one, so it does not set the rate the ETA extrapolates. ``key``: the stage's, when
        on_record may have counted it already (its record, if stale, was counted as done: not any more)."""
        if key is not None and key in self.recorded:
            counted = self.recorded.pop(key)
            if cached:
                return
            self.done -= counted
        self.done += units
        if not cached:
            if self.work_start is None:  # work with no running share: it began with its stage
                self.work_start = self.stage_start
            self.worked += units
            self.phase_worked += units

    def new_phase(self) -> None:
        """Work of another kind starts: once it has finished some, the ETA extrapolates its rate.
        Jobs that run side by side (two fine-tunings) finish in bursts, so the first rate read in a
        phase may be up to twice too slow until the next results land."""
        with self._lock:  # the heartbeat thread reads both
            self.phase_start, self.phase_worked = time.perf_counter(), 0.0

    def eta(self) -> str:
        now = time.perf_counter()
        elapsed = now - self.start
        try:
            partial = self.partial() if self.partial is not None else 0.0
        except Exception:  # the ETA must never stop the study
            partial = 0.0
        if self.planned:
            return f"{elapsed:5.0f}s elapsed, ~{self._planned_left(now, partial):.0f}s left"
        if self.worked + partial <= 0:
            return f"{elapsed:5.0f}s elapsed"
        left = max(self.total - self.done - partial, 0)
        phase_start, phase_worked = self.phase_start, self.phase_worked  # one read: the main thread resets them
        if phase_worked > 0 and phase_start > self.start:
            remaining = (now - phase_start) * left / phase_worked
        else:
            working = now - (self.work_start if self.work_start is not None else self.start)
            remaining = working * left / (self.worked + partial)
        return f"{elapsed:5.0f}s elapsed, ~{remaining:.0f}s left"

    def _planned_seconds(self, units: float) -> float:
        """The plan's seconds for the first ``units`` of the study's work (pretraining comes first)."""
        pre_units, pre_s, post_s = self.planned
        if units <= pre_units:
            return pre_s * units / max(pre_units, 1e-9)
        return pre_s + post_s * min(1.0, (units - pre_units) / max(self.total - pre_units, 1e-9))

    def _planned_left(self, now: float, partial: float) -> float:
        """The plan's seconds left, times how the work so far ran against its plan (once a minute of
        it has run; the plan's own figure before)."""
        pre_units, pre_s, post_s = self.planned
        left = pre_s + post_s - self._planned_seconds(self.done + partial)
        working = now - self.work_start if self.work_start is not None else 0.0
        planned_worked = self._planned_seconds(min(self.worked + partial, self.total))
        ratio = working / planned_worked if working > 60 and planned_worked > 0 else 1.0
        return max(left, 0.0) * ratio

    @contextlib.contextmanager
    def rehearsal(self):
        """A pass over stages that the study makes again (runner._needed_runs, before recreating runs):
        what it advances is taken back, its phase too, so the real pass counts each stage once and the
        pretrainings after it are timed at their own rate; the time it worked on what it computed is
        kept (those stages are then found recorded). Without the phase restored, the ETA read the
        pretrainings at the rate of the rehearsal's one computed stage: ~7,400 s left and rising, 3
        minutes into a 20-minute part (claims-blimp-clm, 2026-12-07)."""
        with self._lock:
            kept = self.done, dict(self.recorded), self.phase_start, self.phase_worked
        try:
            yield self
        finally:
            with self._lock:
                self.done, self.recorded, self.phase_start, self.phase_worked = kept

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _say(self, text: str) -> None:
        with self._lock:
            self.log(f"[study {self.eta()}] {text}")
            self.last_line = time.perf_counter()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(min(1.0, every / 4)):
            if time.perf_counter() - self.last_line < every or not self.current:
                continue
            try:
                lines = self.detail() if self.detail is not None else []
            except Exception as e:  # a heartbeat must never stop the study
                lines = [f"(progress details unavailable: {e})"]
            running = time.perf_counter() - self.stage_start
            for line in lines or [f"still running: {self.current} ({running:.0f}s in this stage)"]:
                self._say(line)


def pretraining_status(name: str, run_dir: Path, budget_flops: float) -> str:
    """One running pretraining as a line: its share of the budget, tokens/s and ETA, from the last
    train record of its metrics.jsonl (read from the file's end, not the whole file)."""
    rec = last_record(run_dir / "metrics.jsonl", "train")
    if rec is None:
        return f"pretrain {name}: starting (no step logged yet)"
    p = max(float(rec.get("progress", 0.0)), 1e-9)
    elapsed = float(rec.get("elapsed_s", 0.0))
    left = elapsed * (1 - p) / p
    return (f"pretrain {name}: {100 * min(p, 1.0):.0f}% of {budget_flops:.3g} FLOPs (step {rec.get('step')}), "
            f"{rec.get('tokens_per_s', 0.0):,.0f} tokens/s, ~{left:.0f}s left for this variant")


class PretrainShares:
    """The running pretrainings' progress, counted from where each stood when this study started it:
    a variant resumed from an earlier, interrupted run has part of its budget done already, which
    is done but not worked in this run (it took no time here). Counting it as worked gave the rate
    that work for free and put the ETA far too low (90% of a budget "done" in the first seconds)."""

    def __init__(self, progress: Progress, run_dirs: dict[str, Path], budget_flops: float):
        self.progress, self.run_dirs, self.budget, self.starts = progress, run_dirs, budget_flops, {}

    def start(self, name: str) -> None:
        """Count the share of a variant's budget its latest checkpoint holds (where its run resumes)
        as done; 0 for a fresh one."""
        found = list_checkpoints(self.run_dirs[name])
        try:
            flops = checkpoint_info(found[-1])["flops"] if found else 0.0
        except (CheckpointError, KeyError):
            flops = 0.0
        self.starts[name] = min(max(flops / self.budget, 0.0), 1.0)
        self.progress.advance(PRETRAIN_UNITS * self.starts[name], cached=True)

    def partial(self, running) -> float:
        """Units worked in this run by the pretrainings still running."""
        return PRETRAIN_UNITS * sum(max(0.0, pretraining_share(self.run_dirs[n]) - self.starts.get(n, 0.0))
                                    for n in list(running))

    def finish(self, name: str) -> None:
        self.progress.advance(PRETRAIN_UNITS * (1 - self.starts.pop(name, 0.0)))


def pretraining_share(run_dir: Path) -> float:
    """The share of its budget a running pretraining has done (0 before its first record)."""
    rec = last_record(run_dir / "metrics.jsonl", "train")
    return min(max(float(rec.get("progress", 0.0)), 0.0), 1.0) if rec else 0.0


def tail_lines(path: Path, tail_bytes: int) -> list[str]:
    """The lines in the last ``tail_bytes`` of a file (the first may be cut), without reading the rest."""
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - tail_bytes))
        return f.read().decode(errors="replace").splitlines()


def last_record(path: Path, split: str, tail_bytes: int = 65536) -> dict | None:
    try:
        lines = tail_lines(path, tail_bytes)
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # the first, cut line of the tail, or a line being written
            continue
        if isinstance(rec, dict) and rec.get("split") == split:
            return rec
    return None
