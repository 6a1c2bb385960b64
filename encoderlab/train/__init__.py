"""Pretraining: trainer loop, optimizer and schedule, checkpoints, FLOPs accounting, distributed."""

from encoderlab.train.config import (
    DataConfig,
    InitConfig,
    ModelSpec,
    OptimizerConfig,
    PretrainConfig,
    SyntheticConfig,
    TrainerConfig,
)
from encoderlab.train.trainer import RunResult, Trainer, pretrain

__all__ = [
    "DataConfig", "InitConfig", "ModelSpec", "OptimizerConfig", "PretrainConfig", "RunResult", "SyntheticConfig",
    "Trainer", "TrainerConfig", "pretrain",
]
