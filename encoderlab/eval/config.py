"""The settings of evaluation: fine-tuning, prompting, and intrinsic scoring (pseudo-perplexity,
minimal pairs). Each is what ``key=value`` overrides on ``encoderlab finetune`` / ``eval`` set."""

from __future__ import annotations

import dataclasses

from encoderlab.config import Config, ConfigError, renamed_bf16
from encoderlab.tune.config import Precision, TuneSettings


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(TuneSettings):
    """Defaults: the ELECTRA paper's fine-tuning setup (see encoderlab/eval/finetune.py). The keys
    shared with generation (learning_rate, warmup, batch_size, weight_decay, adam_eps, grad_clip,
    precision, max_train_examples, max_eval_examples, eval_batch_size, device) are TuneSettings'."""

    RENAMED = {"bf16": renamed_bf16}

    epochs: float | None = None  # None: the task's default (3; 10 for RTE and STS-B)
    layer_decay: float = 0.8
    max_length: int = 128
    bucket: bool = True
    # Run the encoder on real tokens only (EncoderConfig.unpad): the same results, less work on
    # padding; most useful with bucket false (benchmarks/finetune_speed.py --unpad). Off: with
    # buckets little padding is left (6% of SST-2's tokens, 2% of RTE's at the claims shape) and
    # unpadded steps were slower there (0.96x, 0.93x; docs/benchmarks.md, issue 33).
    unpad: bool = False
    classifier_dropout: float = 0.1
    # max_train_examples: a fixed random subset (the same for every seed)
    # Early stopping (off by default: it trains on fewer examples and stops at another step, so it
    # changes scores): hold out a share of the training examples (the same for every seed), score
    # them every early_stopping_every epochs, stop after early_stopping patience scorings without a
    # gain and keep the best-scoring weights. docs/benchmarks.md, "Fine-tuning cost (issue 33)".
    early_stopping: int = 0  # patience in scorings; 0: off
    early_stopping_holdout: float = 0.1
    early_stopping_every: float = 0.5

    def validate(self) -> None:
        super().validate()
        if not 0 < self.layer_decay <= 1:
            raise ConfigError(f"layer_decay must be in (0, 1], got {self.layer_decay}")
        if self.batch_size < 1 or self.max_length < 8:
            raise ConfigError("batch_size must be >= 1 and max_length >= 8")
        if self.early_stopping < 0:
            raise ConfigError(f"early_stopping is a patience in scorings, >= 0 (0: off), got {self.early_stopping}")
        if not 0 < self.early_stopping_holdout < 1:
            raise ConfigError(f"early_stopping_holdout must be in (0, 1), got {self.early_stopping_holdout}")
        if not self.early_stopping_every > 0:
            raise ConfigError(f"early_stopping_every must be > 0 epochs, got {self.early_stopping_every}")


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
