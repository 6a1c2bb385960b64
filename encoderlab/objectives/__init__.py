"""Pretraining objectives: batch + networks -> ObjectiveOutput (loss and named metrics)."""

from __future__ import annotations

import dataclasses

from torch import nn

from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import MLMPair
from encoderlab.objectives.base import (
    CAUSAL_KINDS,
    Objective,
    ObjectiveConfig,
    ObjectiveOutput,
    mask_batch,
    with_defaults,
)
from encoderlab.objectives.causal import CausalLMObjective, CLMThenMLMObjective, GPTBERTObjective
from encoderlab.objectives.mlm import MLMObjective
from encoderlab.objectives.rtd import RTDObjective, sample_replacements

CAUSAL = {"clm": CausalLMObjective, "gptbert": GPTBERTObjective, "clm_then_mlm": CLMThenMLMObjective}


def build_objective(cfg: ObjectiveConfig, *, evaluation: bool = False) -> Objective:
    """The objective of ``cfg``; ``evaluation``: held-out scoring, where a causal kind scores every
    row both ways it trains (objectives/causal.py)."""
    if cfg.kind in CAUSAL:
        return CAUSAL[cfg.kind](cfg, evaluation)
    return RTDObjective(cfg) if cfg.kind == "rtd" else MLMObjective(cfg)


def build_networks(model_cfg: ModelConfig, cfg: ObjectiveConfig) -> nn.Module:
    """The networks an objective trains: ELECTRA's pair, the MLM ablations' MLMPair, or a MaskedLM."""
    if cfg.kind == "rtd":
        if model_cfg.head != "electra":
            raise ValueError(f"objective kind rtd needs an ELECTRA model (head: electra), got head {model_cfg.head!r}")
        if cfg.variant == "electra":
            return build_model(model_cfg)
        return MLMPair(model_cfg, copy_gate=bool(cfg.copy_mechanism))
    if model_cfg.head not in ("mlm", "pretraining"):
        raise ValueError(f"objective kind {cfg.kind} needs head mlm or pretraining, got {model_cfg.head!r}")
    if cfg.kind == "gptbert":  # its head is trained to read each token from the position before it
        model_cfg = dataclasses.replace(model_cfg, next_token_head=True)
    return build_model(model_cfg)


__all__ = [
    "CAUSAL_KINDS", "CLMThenMLMObjective", "CausalLMObjective", "GPTBERTObjective", "MLMObjective", "Objective",
    "ObjectiveConfig", "ObjectiveOutput", "RTDObjective", "build_networks", "build_objective", "sample_replacements",
    "mask_batch", "with_defaults",
]
