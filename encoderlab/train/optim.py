"""AdamW with decay excluded from biases and LayerNorm, and the learning-rate schedule."""

from __future__ import annotations

import math

import torch
from torch import nn

from encoderlab.train.config import OptimizerConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Matrices and embeddings decay; biases, LayerNorm weights and other vectors do not."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # shared parameters appear once
        if p.ndim < 2 or "layer_norm" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, cfg: OptimizerConfig) -> torch.optim.AdamW:
    impl = {"fused": True} if cfg.implementation == "fused" else {"foreach": True}
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=tuple(cfg.betas),
                             eps=cfg.eps, **impl)


def lr_factor(cfg: OptimizerConfig, step: int, progress: float) -> float:
    """BERT/ELECTRA's shape: decay over the whole budget from step 0 (wsd: over its last
    decay_fraction only), linear warm-up on top.

    step: optimizer steps done; progress: the share of the budget used, in [0, 1].
    """
    p = min(max(progress, 0.0), 1.0)
    if cfg.schedule == "linear":
        decay = 1.0 - p
    elif cfg.schedule == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * p))
    elif cfg.schedule == "wsd":
        decay = min(1.0, (1.0 - p) / cfg.decay_fraction)
    else:
        decay = 1.0
    decay = cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * decay
    warm = min((step + 1) / cfg.warmup_steps, 1.0) if cfg.warmup_steps > 0 else 1.0
    return warm * decay
