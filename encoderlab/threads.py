"""A running pretraining's torch thread count, changed from outside while it runs.

A study pretrains ``jobs`` variants at once, each on cores // jobs threads. When fewer variants are
left than jobs (three variants on two cores: the third runs alone for about the last third of the
pretraining stage), the freed cores would sit idle. So the trainer reads a file named ``threads``
in its run directory at every log step and, when it holds another count than the one in use,
switches to it (torch.set_num_threads works mid-run: OpenMP grows its pool on the next parallel
region). The study writes that file when cores free up and the machine's load leaves them free
(study/launch.spread_threads); a person can too. The count is per process: each rank of a
multi-process run reads the same file.

A run's results do not depend on its thread count beyond the order of floating-point sums; its
logged tokens/s do, so every train record carries the count it was measured at.
"""

from __future__ import annotations

import os
from pathlib import Path

THREADS_FILE = "threads"


def write_threads(run_dir: Path, threads: int) -> None:
    """Ask the pretraining in run_dir to use ``threads`` threads from its next log step. Written to
    a temporary file and renamed, so the trainer never reads half a number."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / f".{THREADS_FILE}.tmp"
    tmp.write_text(f"{threads}\n")
    os.replace(tmp, run_dir / THREADS_FILE)


def requested_threads(run_dir: Path) -> int | None:
    """The count asked for in run_dir's threads file; None when there is no file. A file that does
    not hold a positive integer is an error naming it, not a silent fallback."""
    path = Path(run_dir) / THREADS_FILE
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{path}: expected a positive integer (torch threads), found {text!r}")
    return n


class ThreadsFollower:
    """Follows run_dir's threads file: ``poll()`` switches torch to the count asked for when it
    differs from the one in use, and returns a line saying so (None when nothing changed). A
    malformed file is reported once, then ignored until its text changes: a typo must not stop a
    pretraining hours in, nor fill its log."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._bad: str | None = None

    def poll(self) -> str | None:
        import torch

        try:
            n = requested_threads(self.run_dir)
        except ValueError as e:
            if str(e) == self._bad:
                return None
            self._bad = str(e)
            return f"threads file ignored: {e}"
        self._bad = None
        if n is None or n == torch.get_num_threads():
            return None
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        return f"torch threads {before} -> {n} (asked by {self.run_dir / THREADS_FILE})"
