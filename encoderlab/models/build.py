"""What needs both kinds of network: building a model from its config, and unsharing its layers.

networks.py holds the single networks and pairs.py the two-network ones built from them; this
module sits above both, so neither has to import the other back (style: no module reaches up).
"""

from __future__ import annotations

import dataclasses

from torch import nn

from encoderlab.models.config import ModelConfig
from encoderlab.models.networks import (
    Discriminator,
    EncoderModel,
    MaskedLM,
    SequenceClassifier,
    TokenClassifier,
)
from encoderlab.models.pairs import ElectraPair, Pair


def build_model(cfg: ModelConfig) -> nn.Module:
    if cfg.head == "encoder":
        return EncoderModel(cfg)
    if cfg.head in ("mlm", "pretraining"):
        return MaskedLM(cfg)
    if cfg.head == "discriminator":
        return Discriminator(cfg)
    if cfg.head == "electra":
        return ElectraPair(cfg)
    if cfg.head == "sequence_classification":
        return SequenceClassifier(cfg)
    if cfg.head == "token_classification":
        return TokenClassifier(cfg)
    raise ValueError(f"unknown head {cfg.head!r}")


def unshare(model: nn.Module) -> nn.Module:
    """Give every layer its own copy of the weights it shared (ALBERT -> BERT-like), in place.

    Outputs are unchanged; training afterwards updates each layer independently.
    """
    if isinstance(model, Pair):
        unshare(model.generator)
        unshare(model.main)
        cfg = model.config
        model.config = dataclasses.replace(cfg, encoder=cfg.encoder.unshared(), generator=cfg.generator.unshared())
        return model  # both encoders kept their embeddings modules, so the sharing (gdes deltas too) stands
    model.encoder = model.encoder.unshare()
    model.config = dataclasses.replace(model.config, encoder=model.encoder.config)
    if isinstance(model, MaskedLM):
        model.tie()
    return model
