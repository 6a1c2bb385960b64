"""The settings of fine-tuning.

:class:`TuneConfig` is what :func:`encoderlab.tune.loop.fit` reads: nested (optimizer, limits) and
resolved (a learning rate, a step count, a device and a precision, never "auto").
:class:`TuneSettings` holds the flat ``key=value`` settings that FinetuneConfig and
GenerationConfig share (``learning_rate``, ``epochs``, ...: the keys users and study files write),
and :meth:`TuneSettings.tune_config` turns them into a TuneConfig once the model is known.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from encoderlab.config import Config, ConfigError
from encoderlab.device import check_device_name

Precision = Literal["auto", "fp32", "bf16"]  # auto: bf16 where it is faster (encoderlab/precision.py)
Schedule = Literal["linear", "constant"]  # linear: warm-up, then linear decay to 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneOptim(Config):
    """AdamW (eps, weight decay), layer-wise learning-rate decay, the schedule and clipping."""

    lr: float
    weight_decay: float = 0.01  # not on biases and LayerNorm weights (tune_param_groups)
    eps: float = 1e-6
    layer_decay: float = 1.0  # 1: every layer at lr (see encoderlab/tune/optim.py)
    schedule: Schedule = "linear"
    warmup: float = 0.0  # share of the steps, linear schedule only
    grad_clip: float = 1.0  # the largest global gradient norm; 0: no clipping

    def validate(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if not 0 < self.layer_decay <= 1:
            raise ConfigError(f"layer_decay must be in (0, 1], got {self.layer_decay}")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup must be in [0, 1), got {self.warmup}")
        if self.grad_clip < 0:
            raise ConfigError(f"grad_clip must be >= 0 (0: off), got {self.grad_clip}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneLimits(Config):
    """How long fit runs: a number of optimizer steps (one batch each)."""

    steps: int

    def validate(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps}")

    @classmethod
    def of_epochs(cls, epochs: float, examples: int, batch_size: int, max_steps: int | None = None) -> TuneLimits:
        """``epochs`` passes over ``examples`` in batches of ``batch_size`` (at least one step),
        capped at ``max_steps``."""
        steps = max(1, math.ceil(epochs * math.ceil(examples / batch_size)))
        return cls(steps=min(steps, max_steps) if max_steps else steps)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneConfig(Config):
    optim: TuneOptim
    limits: TuneLimits
    device: str = "cpu"  # resolved: cpu | cuda | cuda:N
    precision: Literal["fp32", "bf16"] = "fp32"  # resolved (encoderlab.runtime.resolve_runtime)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneSettings(Config):
    """The settings every fine-tuning command shares, as flat keys. Subclasses add their own keys
    and ``epochs`` (whose default differs); defaults follow ELECTRA's fine-tuning (Clark et al.
    2020, appendix)."""

    learning_rate: float | None = None  # None: by hidden size (encoderlab.tune.optim.default_learning_rate)
    warmup: float = 0.1  # share of the steps
    batch_size: int = 32
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    grad_clip: float = 1.0
    precision: Precision = "auto"
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    eval_batch_size: int = 128
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N

    def validate(self) -> None:
        if (why := check_device_name(self.device)) is not None:
            raise ConfigError(why)
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup must be in [0, 1), got {self.warmup}")

    def tune_config(self, *, lr: float, limits: TuneLimits, device, precision: str,
                    layer_decay: float = 1.0) -> TuneConfig:
        """The loop's config: these settings with the learning rate, the steps, the device and the
        precision resolved for one model."""
        optim = TuneOptim(lr=lr, weight_decay=self.weight_decay, eps=self.adam_eps, layer_decay=layer_decay,
                          schedule="linear", warmup=self.warmup, grad_clip=self.grad_clip)
        return TuneConfig(optim=optim, limits=limits, device=str(device), precision=precision)
