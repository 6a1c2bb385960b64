"""The recipe: every knob of a pretraining run, as one typed config saved beside its checkpoints."""

from __future__ import annotations

import dataclasses
from typing import Literal

from encoderlab.config import Config, ConfigError, renamed_bf16
from encoderlab.models.spec import ModelSpec
from encoderlab.objectives.base import ObjectiveConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizerConfig(Config):
    lr: float = 5e-4
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6
    warmup_steps: int = 0
    # Decay over the budget's progress (steps, tokens, FLOPs or time, whichever is furthest along).
    # wsd: warm-up, stable at the peak, then a linear decay over the last decay_fraction of the
    # budget (MiniCPM, ModernBERT): the stable phase's checkpoints can be decayed later at any point.
    schedule: Literal["linear", "cosine", "constant", "wsd"] = "linear"
    decay_fraction: float = 0.1  # wsd only
    min_lr_ratio: float = 0.0
    clip_norm: float = 1.0  # 0 disables clipping (the norm is still logged)
    implementation: Literal["foreach", "fused"] = "foreach"

    def validate(self) -> None:
        if not 0.0 < self.decay_fraction <= 1.0:
            raise ConfigError(f"optimizer.decay_fraction must be in (0, 1], got {self.decay_fraction}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyntheticConfig(Config):
    """In-memory patterned sequences (tests, smoke runs): token t+1 follows t by a per-row stride."""

    vocab_size: int = 99
    num_special: int = 5  # ids 0..4: [PAD] [CLS] [SEP] [MASK] [UNK]
    pairs: bool = False  # two segments and a sentence_label (1 when they are swapped)
    repeat_one: bool = False  # every batch is batch 0 (overfit-one-batch)
    delay_s: float = 0.0  # sleep per batch: simulates a slow reader (interruption tests)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(Config):
    kind: Literal["store", "synthetic"] = "store"
    path: str | None = None  # token store directory (kind: store; required when the data is read)
    tokenizer_dir: str | None = None  # None: the store's own tokenizer/
    batch_size: int = 32  # per micro-batch and rank
    seq_len: int = 128
    eval_batches: int = 8  # held-out batches (valid split), fixed for the whole run
    # Short-sequence warm-up (a sequence-length curriculum, as BERT's 128-then-512 phases): the
    # first short_seq_steps optimizer steps read sequences of short_seq_len tokens, in batches of
    # batch_size * seq_len // short_seq_len rows (the same tokens per step). bert-tiny left the
    # unigram plateau within 1,800 steps at length 32 and not in 8,300 at 128 (docs/benchmarks.md).
    short_seq_len: int | None = None
    short_seq_steps: int = 0
    synthetic: SyntheticConfig = dataclasses.field(default_factory=SyntheticConfig)

    def validate(self) -> None:
        if self.short_seq_steps < 0:
            raise ConfigError(f"data.short_seq_steps must be >= 0, got {self.short_seq_steps}")
        if self.short_seq_steps and self.short_seq_len is None:
            raise ConfigError("data.short_seq_steps is set but data.short_seq_len is not")
        if self.short_seq_len is not None and not 8 <= self.short_seq_len < self.seq_len:
            raise ConfigError(f"data.short_seq_len must be in [8, seq_len={self.seq_len}), got {self.short_seq_len}")

    def short(self) -> DataConfig:
        """The warm-up phase's data: short sequences, more rows, the same tokens per batch."""
        rows = max(1, self.batch_size * self.seq_len // self.short_seq_len)
        return self.replace(seq_len=self.short_seq_len, batch_size=rows, short_seq_len=None, short_seq_steps=0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitConfig(Config):
    """Continued pretraining: start from released or earlier weights (encoderlab or transformers
    directories). For ELECTRA give generator and discriminator separately (or one encoderlab pair)."""

    checkpoint: str | None = None
    generator: str | None = None
    discriminator: str | None = None
    # A tokenizer whose vocabulary differs from the checkpoint's is refused unless this is set;
    # then the embeddings (and MLM bias) are resized: shared rows kept, new rows freshly initialized.
    allow_resize_embeddings: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainerConfig(Config):
    RENAMED = {"bf16": renamed_bf16}

    run_dir: str = "runs/pretrain"
    seed: int = 0
    # Budgets: the run stops at the first one reached; at least one is required.
    max_steps: int | None = None
    max_tokens: int | None = None
    max_flops: float | None = None
    max_time_s: float | None = None
    grad_accum: int = 1
    # auto: bf16 autocast where this device runs bf16 products faster than fp32, else fp32
    # (encoderlab/precision.py); weights and optimizer states stay fp32 in every precision.
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    compile: bool = False
    device: str = "auto"  # auto | cpu | cuda
    log_every: int = 50
    eval_every: int = 0  # 0: only at the end
    checkpoint_every: int = 1000  # 0: only at the end
    keep_last: int = 3
    resume: str = "auto"  # auto: from the run's latest checkpoint; never; or a checkpoint path
    nan_guard: bool = True
    max_bad_steps: int = 5  # consecutive non-finite steps before stopping
    progress: bool = True  # a progress bar when stderr is a terminal

    def validate(self) -> None:
        if not any(b is not None for b in (self.max_steps, self.max_tokens, self.max_flops, self.max_time_s)):
            raise ConfigError("trainer: set a budget (max_steps, max_tokens, max_flops or max_time_s)")
        if self.grad_accum < 1:
            raise ConfigError("trainer.grad_accum must be >= 1")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig(Config):
    model: ModelSpec = dataclasses.field(default_factory=ModelSpec)
    objective: ObjectiveConfig = dataclasses.field(default_factory=ObjectiveConfig)
    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=lambda: TrainerConfig(max_steps=1000))
    init: InitConfig = dataclasses.field(default_factory=InitConfig)
