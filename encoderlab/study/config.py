"""What a study is: one corpus and tokenizer, a FLOPs budget, the variants, and the evaluations."""

from __future__ import annotations

import dataclasses
import os
from typing import Literal

from encoderlab.config import Config, ConfigError, renamed_bf16
from encoderlab.eval.finetune import FinetuneConfig
from encoderlab.objectives.base import ObjectiveConfig
from encoderlab.train.config import ModelSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class VariantSpec(Config):
    """One pretraining run of the study. Every variant sees the same token store, examples (same
    seed, same order) and FLOPs budget; only the model and objective differ. Sentence-pair examples
    follow from the model: head "pretraining" with the objective's sentence_loss gives NSP (family
    bert) or SOP (family albert); otherwise packed full sentences."""

    name: str
    model: ModelSpec
    objective: ObjectiveConfig = dataclasses.field(default_factory=ObjectiveConfig)
    lr: float | None = None  # None: the study's
    # ALBERT claim 4: also fine-tune a copy with its sharing removed (convert --unshare).
    unshare: bool = False

    def validate(self) -> None:
        if not self.name or any(c in self.name for c in "/\\ :"):
            raise ConfigError(f"variant name {self.name!r} must be non-empty without '/', '\\', ':' or spaces")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskRef(Config):
    """A downstream task: a built-in name (sst2, rte, chnsenticorp, ...) or a task-spec YAML path;
    ``data_dir`` where its files are ("demo" means the demo corpus's derived task)."""

    name: str
    data_dir: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyConfig(Config):
    RENAMED = {"bf16": renamed_bf16}

    name: str = "study"
    out_dir: str = "runs/study"
    # Text: corpus paths (files, dirs, globs in any format encoderlab prepare reads), or empty for
    # the embedded demo corpus (standard-library docstrings). Or a prepared token store.
    corpus: tuple[str, ...] = ()
    store: str | None = None
    tokenizer: str | None = None  # an existing tokenizer dir; None: train one on the corpus
    vocab_size: int = 8000
    max_documents: int | None = None  # cap the corpus (quick runs)
    seq_len: int = 128
    batch_size: int = 32
    # Short-sequence warm-up for every variant (data.short_seq_len): the first short_seq_fraction
    # of each variant's steps read short_seq_len-token sequences, the same tokens per step. Tiny
    # models at length 128 otherwise sit on the unigram plateau (docs/benchmarks.md).
    short_seq_len: int | None = None
    short_seq_fraction: float = 0.0
    budget_flops: float = 1e14
    # Checkpoints evaluated (held-out loss) at these fractions of the budget; downstream tasks at
    # the fractions in finetune_fractions.
    eval_fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
    finetune_fractions: tuple[float, ...] = (0.5, 1.0)
    lr: float = 1e-3
    warmup_fraction: float = 0.06
    # Pretraining, minimal pairs and the speed stage (fine-tuning: finetune.precision). auto: bf16
    # autocast where this machine runs bf16 products faster than fp32 (encoderlab/precision.py).
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    seed: int = 0
    variants: tuple[VariantSpec, ...] = ()
    tasks: tuple[TaskRef, ...] = ()
    glue_dir: str | None = None  # default data_dir of tasks that name none (GLUE-style root)
    finetune: FinetuneConfig = dataclasses.field(default_factory=FinetuneConfig)
    seeds: int = 3
    # BLiMP-format jsonl for claim 8; None: minimal pairs derived from held-out text (two adjacent
    # words swapped), "off" to skip.
    minimal_pairs: str | None = None
    latency: bool = True
    eval_batches: int = 16
    # Pretrainings run at once, each its own process with `threads` torch threads (None: the
    # cores this process may use // pretrain_jobs; with one job, torch's default). On a CPU, two
    # one-thread runs get more done than one run on two threads; the speed comparison is measured
    # afterwards, side by side (study/speed.py), with the same thread count.
    pretrain_jobs: int = 1
    threads: int | None = None
    # Fine-tunings (one checkpoint on one task, all its seeds) run at once, each in a worker
    # process with cores // finetune_jobs threads (None: as many as pretrain_jobs).
    finetune_jobs: int | None = None
    speed_seconds: float = 1.5  # timed per variant and round (5 rounds) in the side-by-side speed stage

    def validate(self) -> None:
        names = [v.name for v in self.variants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"variant names must be unique; repeated: {dup}")
        for f in (*self.eval_fractions, *self.finetune_fractions):
            if not 0 < f <= 1:
                raise ConfigError(f"fractions must be in (0, 1], got {f}")
        missing = sorted(set(self.finetune_fractions) - set(self.eval_fractions))
        if missing:
            raise ConfigError(f"finetune_fractions {missing} must also be in eval_fractions")
        if not 0 <= self.short_seq_fraction < 1:
            raise ConfigError(f"short_seq_fraction must be in [0, 1), got {self.short_seq_fraction}")
        if (self.short_seq_len is None) != (self.short_seq_fraction == 0):
            raise ConfigError("short_seq_len and short_seq_fraction go together: set both or neither")
        if self.budget_flops <= 0:
            raise ConfigError("budget_flops must be positive")
        if self.seeds < 1:
            raise ConfigError("seeds must be >= 1")
        if self.pretrain_jobs < 1 or any(n is not None and n < 1 for n in (self.finetune_jobs, self.threads)):
            raise ConfigError("pretrain_jobs, finetune_jobs and threads must be >= 1")

    def threads_per_job(self, jobs: int | None = None) -> int | None:
        """Torch threads of each of `jobs` processes at once (default pretrain_jobs, which the speed
        stage matches); None: leave torch's default (one job, no `threads` set). Cores are those
        this process may run on, not the host's."""
        jobs = jobs or self.pretrain_jobs
        if self.threads or jobs == 1:
            return self.threads
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return max(1, cores // jobs)

    def variant(self, name: str) -> VariantSpec | None:
        return next((v for v in self.variants if v.name == name), None)
