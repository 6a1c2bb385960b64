"""A running pretraining's torch thread count, changed from outside while it runs.

A study pretrains ``jobs`` variants at once, each on cores // jobs threads. When fewer variants are
left than jobs (three variants on two cores: the third runs alone for as long as the first two took
together), the freed cores would sit idle for the rest of the study. So the trainer reads a file
named ``threads`` in its run directory at every log step and, when it holds another count than the
one in use, switches to it (torch.set_num_threads works mid-run: OpenMP grows its pool on the next
parallel region). The study writes that file when a core frees up; a person can too.
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


def follow_threads(run_dir: Path) -> str | None:
    """Switch torch to the count asked for in run_dir's threads file, if it differs from the one in
    use; returns a line saying so, or None when nothing changed. A malformed file is reported in the
    line and otherwise ignored: a typo must not stop a pretraining hours in."""
    import torch

    try:
        n = requested_threads(run_dir)
    except ValueError as e:
        return f"threads file ignored: {e}"
    if n is None or n == torch.get_num_threads():
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    return f"torch threads {before} -> {n} (asked by {Path(run_dir) / THREADS_FILE})"
