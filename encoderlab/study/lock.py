"""One controller per study folder: a second `encoderlab study` on the same out_dir is refused,
naming the one that holds it.

Two controllers on one out_dir would each start (or, under SLURM, submit) the same runs and write
stages.json over each other. The lock is an flock on OUT/controller.lock, which the kernel drops when
its holder dies however it dies (SIGKILL included), so a crashed study never leaves a stale lock; the
file's text says who holds it (host, pid, since when) for the refusal to name.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from encoderlab.config import ConfigError

LOCK_FILE = "controller.lock"


@contextlib.contextmanager
def controller_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s controller lock for the block; ConfigError naming the holder when another has it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{out} is held by another study controller ({holder(path)}; lock {path}). Wait for "
                              "it to finish or stop it: two controllers would run the same jobs twice") from None
        me = {"host": socket.gethostname(), "pid": os.getpid(),
              "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holder(path: Path) -> str:
    """Who holds the lock, as its file says."""
    try:
        h = json.loads(path.read_text())
        return f"pid {h['pid']} on {h['host']}, since {h['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"
