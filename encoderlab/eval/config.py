"""The settings of evaluation: fine-tuning, prompting, and intrinsic scoring (pseudo-perplexity,
minimal pairs). Each is what ``key=value`` overrides on ``encoderlab finetune`` / ``eval`` set."""

from __future__ import annotations

import dataclasses
from typing import Literal

from encoderlab.config import Config, ConfigError, renamed_bf16
from encoderlab.device import check_device_name

Precision = Literal["auto", "fp32", "bf16"]  # auto: bf16 where it is faster (encoderlab/precision.py)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(Config):
    """Defaults: the ELECTRA paper's fine-tuning setup (see encoderlab/eval/finetune.py)."""

    RENAMED = {"bf16": renamed_bf16}

    learning_rate: float | None = None  # None: by model size (ELECTRA paper)
    layer_decay: float = 0.8
    warmup: float = 0.1  # fraction of the steps
    epochs: float | None = None  # None: the task's default (3; 10 for RTE and STS-B)
    batch_size: int = 32
    max_length: int = 128
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    grad_clip: float = 1.0
    precision: Precision = "auto"
    bucket: bool = True
    # Run the encoder on real tokens only (EncoderConfig.unpad): the same results, less work on
    # padding; most useful with bucket false (benchmarks/finetune_speed.py --unpad).
    unpad: bool = False
    max_train_examples: int | None = None  # a fixed random subset (the same for every seed)
    max_eval_examples: int | None = None
    eval_batch_size: int = 128
    classifier_dropout: float = 0.1
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N

    def validate(self) -> None:
        if (why := check_device_name(self.device)) is not None:
            raise ConfigError(why)
        if not 0 < self.layer_decay <= 1:
            raise ConfigError(f"layer_decay must be in (0, 1], got {self.layer_decay}")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup must be in [0, 1), got {self.warmup}")
        if self.batch_size < 1 or self.max_length < 8:
            raise ConfigError("batch_size must be >= 1 and max_length >= 8")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PromptConfig(Config):
    """Prompt-based zero/few-shot classification (encoderlab/eval/prompting.py)."""

    RENAMED = {"bf16": renamed_bf16}

    template: str | None = None  # None: the task's
    verbalizer: tuple[str, ...] = ()  # empty: the task's
    steps: int = 100  # few-shot training steps (LM-BFF uses 1000 at batch 8; lower for CPU studies)
    learning_rate: float = 1e-5
    batch_size: int = 8
    max_length: int = 128
    max_eval_examples: int | None = None
    precision: Precision = "auto"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScoringConfig(Config):
    """Pseudo-perplexity and minimal pairs (encoderlab/eval/intrinsic.py)."""

    max_length: int = 128  # capped at the model's positions
    precision: Precision = "auto"

    def validate(self) -> None:
        if self.max_length < 8:
            raise ConfigError(f"max_length must be >= 8, got {self.max_length}")
