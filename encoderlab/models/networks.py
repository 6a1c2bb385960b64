"""Networks built from the one encoder core: encoder + heads. They return logits; masking, sampling
and losses live in encoderlab.objectives. ELECTRA's two-network models are in pairs.py, which
builds on this module; build.py (build_model, unshare) covers both kinds.

Shape letters: B batch, T length, H hidden, V vocabulary, M selected positions, C labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from encoderlab.models.config import ModelConfig
from encoderlab.nn import (
    ClassificationHead,
    Encoder,
    MLMHead,
    RTDHead,
    SentencePairHead,
    TokenClassificationHead,
)
from encoderlab.nn.encoder import init_weights


@dataclass
class MaskedLMOutput:
    logits: torch.Tensor  # (B, T, V), or (M, V) at the given positions
    sentence_logits: torch.Tensor | None  # (B, 2) NSP/SOP
    hidden: torch.Tensor  # (B, T, H)


class EncoderModel(nn.Module):
    """The bare encoder (head="encoder"): hidden states and pooled output."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        return self.encoder(input_ids, attention_mask, token_type_ids)


class MaskedLM(nn.Module):
    """Encoder + tied MLM head (+ NSP/SOP head when head="pretraining")."""

    def __init__(self, cfg: ModelConfig, encoder_cfg=None):
        super().__init__()
        self.config = cfg
        ecfg = encoder_cfg or cfg.encoder
        self.encoder = Encoder(ecfg)
        self.mlm_head = MLMHead(ecfg, self.encoder.embeddings.word_embeddings)
        self.sentence_head = SentencePairHead(ecfg) if cfg.head == "pretraining" else None
        init_weights(self.mlm_head, ecfg.initializer_range)
        if self.sentence_head is not None:
            init_weights(self.sentence_head, ecfg.initializer_range)

    def tie(self) -> None:
        """Re-point the decoder at the (possibly replaced) input embedding."""
        self.mlm_head.word_embeddings[0] = self.encoder.embeddings.word_embeddings

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, positions=None) -> MaskedLMOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        hidden = out.hidden  # (B, T, H)
        if self.config.next_token_head:  # token t from the output at t - 1; position 0 has none before it
            hidden = torch.cat([hidden[:, :1], hidden[:, :-1]], 1)  # (B, T, H)
        logits = self.mlm_head(hidden, positions)
        sent = self.sentence_head(out.pooled) if self.sentence_head is not None else None
        return MaskedLMOutput(logits=logits, sentence_logits=sent, hidden=out.hidden)


class Discriminator(nn.Module):
    """Encoder + RTD head: per-token logit that the token was replaced."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder)
        self.rtd_head = RTDHead(cfg.encoder)
        init_weights(self.rtd_head, cfg.encoder.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self.rtd_head(self.encoder(input_ids, attention_mask, token_type_ids).hidden)  # (B, T)


class SequenceClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder)
        style = "electra" if cfg.family == "electra" else "pooler"
        self.head = ClassificationHead(cfg.encoder, cfg.num_labels, style, cfg.classifier_dropout)
        init_weights(self.head, cfg.encoder.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        return self.head(out.hidden, out.pooled)  # (B, C)


class TokenClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder)
        self.head = TokenClassificationHead(cfg.encoder, cfg.num_labels, cfg.classifier_dropout)
        init_weights(self.head, cfg.encoder.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self.head(self.encoder(input_ids, attention_mask, token_type_ids).hidden)  # (B, T, C)
