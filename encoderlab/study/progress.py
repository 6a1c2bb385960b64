"""What a running study tells a person: a line per stage, with an ETA for the whole study, and a
heartbeat every 30 s while a stage runs, so no minute passes in silence (also when the output is a
log file, not a terminal).

The heartbeat asks the running stage for its details (for pretraining: each running variant's share
of its FLOPs budget, tokens/s and ETA, read from its metrics.jsonl) and prints them, or the stage's
name and how long it has run where the stage has nothing finer to say.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

HEARTBEAT_S = 30.0


# ETA weights: a variant's pretraining is the bulk of a study, a fine-tuning or measurement a little.
PRETRAIN_UNITS = 10


class Progress:
    """Stage lines a person can follow, with an ETA for the whole study from the planned work."""

    def __init__(self, total_units: float, log, *, heartbeat_s: float | None = HEARTBEAT_S):
        self.total, self.done, self.worked, self.start, self.log = total_units, 0.0, 0.0, time.perf_counter(), log
        self.current, self.stage_start, self.last_line = "", self.start, self.start
        self.detail: Callable[[], list[str]] | None = None
        # Units of work under way (e.g. running pretrainings' shares of their budgets): counted as
        # done and worked for the ETA, else a stage of long jobs would set the rate from the jobs
        # finished alone and overstate the time left (2-3x while two pretrainings run).
        self.partial: Callable[[], float] | None = None
        # The rate of the phase under way (fine-tuning, measuring) once it has finished some work:
        # its units are calibrated against pretraining's only roughly (plan.finetune_weight), so a
        # rate set by a long pretraining phase misjudges what follows it (2.4x in claims-deep).
        self.phase_start, self.phase_worked = self.start, 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if heartbeat_s:
            self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True, name="study-progress")
            self._thread.start()

    def stage(self, text: str) -> None:
        self.current, self.stage_start = text, time.perf_counter()
        self._say(text)

    def advance(self, units: float, *, cached: bool = False) -> None:
        """Count finished work; a stage found finished by an earlier run (cached) took no time in
        this one, so it does not set the rate the ETA extrapolates."""
        self.done += units
        if not cached:
            self.worked += units
            self.phase_worked += units

    def new_phase(self) -> None:
        """Work of another kind starts: once it has finished some, the ETA extrapolates its rate.
        Jobs that run side by side (two fine-tunings) finish in bursts, so the first rate read in a
        phase may be up to twice too slow until the next results land."""
        with self._lock:  # the heartbeat thread reads both
            self.phase_start, self.phase_worked = time.perf_counter(), 0.0

    def eta(self) -> str:
        elapsed = time.perf_counter() - self.start
        try:
            partial = self.partial() if self.partial is not None else 0.0
        except Exception:  # the ETA must never stop the study
            partial = 0.0
        if self.worked + partial <= 0:
            return f"{elapsed:5.0f}s elapsed"
        left = max(self.total - self.done - partial, 0)
        phase_start, phase_worked = self.phase_start, self.phase_worked  # one read: the main thread resets them
        if phase_worked > 0 and phase_start > self.start:
            remaining = (time.perf_counter() - phase_start) * left / phase_worked
        else:
            remaining = elapsed * left / (self.worked + partial)
        return f"{elapsed:5.0f}s elapsed, ~{remaining:.0f}s left"

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
