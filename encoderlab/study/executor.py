"""Where a study's jobs run: the seam between the runner, which decides what to compute and records
it, and what runs it.

The runner asks an executor for two things: pretrain these runs (each resumes by itself from its last
checkpoint), and map a function over these items, handing each result back as it lands. Either way
the study's controller (this process) stays the one writer of stages.json.

- ``local`` (the default): child processes of this machine (study/launch.py), as many at once as
  pretrain_jobs / finetune_jobs say; with ``gpus_per_run: 1`` on a machine with several GPUs, one
  pretraining per GPU (CUDA_VISIBLE_DEVICES).
- ``slurm``: every pretraining run, every fine-tuning or prompting unit and every BLiMP scoring a SLURM
  job submitted with submitit (study/slurm.py); out_dir must be on a filesystem the nodes share.

Both hold the out_dir's controller lock (study/lock.py) while the study runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from encoderlab.config import ConfigError
from encoderlab.study import launch
from encoderlab.study.config import StudyConfig
from encoderlab.study.progress import Progress
from encoderlab.study.stages import Stages
from encoderlab.train.config import PretrainConfig


class Executor(Protocol):
    def start(self, progress: Progress) -> None:
        """Before the data stage: what must hold for any job to run (a cluster's shared out_dir)."""

    def pretrain(self, recipes: dict[str, PretrainConfig], *, stages: Stages, progress: Progress,
                 fingerprint: Callable[[PretrainConfig], str], recreate: dict[str, dict]) -> None:
        """Pretrain every run of ``recipes`` not recorded yet (or in ``recreate``) and record each."""

    def map(self, fn: Callable, items: Sequence, *, keys: Sequence[tuple[str, str]], jobs: int,
            on_result: Callable, progress: Progress, describe: Callable[[int], str],
            announce: Callable | None = None) -> None:
        """fn over items, each result to on_result as it lands. ``keys``: each item's (stage key,
        fingerprint), by which a cluster executor finds its jobs again after a restart; ``jobs``: how
        many at once here; ``announce(item)``: said before an item runs in this process."""


class LocalExecutor:
    """The study's jobs as processes of this machine (study/launch.py)."""

    def __init__(self, cfg: StudyConfig):
        self.cfg = cfg
        self.gpus = gpu_slots(cfg)

    def start(self, progress) -> None:
        pass  # this machine's processes share its files

    def pretrain(self, recipes, *, stages, progress, fingerprint, recreate) -> None:
        cfg = self.cfg
        jobs = len(self.gpus) if self.gpus else cfg.pretrain_jobs
        launch.pretrain_all(recipes, jobs=jobs, threads=cfg.threads_per_job(), budget=cfg.budget_flops,
                            stages=stages, progress=progress, fingerprint=fingerprint, cores=cfg.cores(),
                            recreate=recreate, gpus=self.gpus)

    def map(self, fn, items, *, keys, jobs, on_result, progress, describe, announce=None) -> None:
        if jobs <= 1:
            def one(item):
                if announce is not None:
                    announce(item)
                return fn(item)

            launch.run_inline(one, items, threads=self.cfg.threads_per_job(1), on_result=on_result)
            return
        launch.run_pool(fn, list(items), jobs=jobs, threads=self.cfg.threads_per_job(jobs), on_result=on_result,
                        progress=progress, describe=describe)


def gpu_slots(cfg: StudyConfig) -> list[str] | None:
    """The GPUs this machine's pretrainings take one each (``gpus_per_run: 1``), as CUDA_VISIBLE_DEVICES
    values within what this process sees; None with gpus_per_run 0 (the runtime then picks the device
    as for any run: one GPU where there is one)."""
    if cfg.gpus_per_run == 0:
        return None
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ConfigError(f"gpus_per_run: {cfg.gpus_per_run}, but this machine has no CUDA device; set "
                          "gpus_per_run: 0 to run on the CPU, or executor: slurm to run on a cluster's GPUs")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in visible.split(",") if d.strip()] if visible else [str(i) for i in range(count)]
    return ids[:count]


def make_executor(cfg: StudyConfig, out: Path, log=print) -> Executor:
    if cfg.executor == "slurm":
        from encoderlab.study.slurm import SlurmExecutor

        return SlurmExecutor(cfg, out, log=log)
    return LocalExecutor(cfg)
