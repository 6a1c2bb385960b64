"""Networks built from the one encoder core: encoder + heads, and ELECTRA's generator/discriminator
pair. They return logits; masking, sampling and losses live in encoderlab.objectives.

Shape letters: B batch, T length, H hidden, V vocabulary, M selected positions, C labels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
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
        logits = self.mlm_head(out.hidden, positions)
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


class GDESEmbedding(nn.Module):
    """DeBERTa-v3's gradient-disentangled embedding: E_D = stopgrad(E_G) + delta, delta from zero.

    The discriminator's loss reaches only delta; the generator's table learns from MLM alone.
    The source table is held in a list so it is not registered (and saved) twice.
    """

    def __init__(self, source: nn.Embedding):
        super().__init__()
        self.source = [source]
        self.delta = nn.Parameter(torch.zeros_like(source.weight))

    @property
    def weight(self) -> torch.Tensor:
        return self.source[0].weight.detach() + self.delta  # (V, E)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


SHARED_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


def gdes_tables(embeddings: nn.Module) -> dict[str, GDESEmbedding]:
    """The GDES tables of an embeddings module, by attribute name (none unless gdes sharing)."""
    return {n: t for n in SHARED_TABLES if isinstance(t := getattr(embeddings, n, None), GDESEmbedding)}


def materialize_gdes(state: dict, embeddings: nn.Module, prefix: str) -> dict:
    """``state`` with each GDES table written as a plain table E_G + delta, as transformers (and a
    classifier fine-tuned from the discriminator) expect; ``prefix`` locates the embeddings."""
    for n, t in gdes_tables(embeddings).items():
        state.pop(f"{prefix}{n}.delta")
        state[f"{prefix}{n}.weight"] = t.weight.detach()
    return state


class ElectraPair(nn.Module):
    """ELECTRA's generator (a small MLM) and discriminator (RTD), with embedding sharing."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.generator = MaskedLM(cfg.with_head("mlm", generator=None), encoder_cfg=cfg.generator)
        self.discriminator = Discriminator(cfg.with_head("discriminator", generator=None))
        self.share_embeddings()

    def share_embeddings(self) -> None:
        """shared: the word, position and token-type tables are the generator's (as in the ELECTRA
        paper). gdes: each is stopgrad(generator's) + its own delta. Disentangling the position
        table too matters at small scale: with it shared, the discriminator's 50x-weighted loss
        steers the positions the generator needs to leave the unigram plateau (docs/benchmarks.md)."""
        mode = self.config.embedding_sharing
        if mode == "none":
            return
        g, d = self.generator.encoder.embeddings, self.discriminator.encoder.embeddings
        for name in SHARED_TABLES:
            table = getattr(g, name)
            if table is not None:
                setattr(d, name, table if mode == "shared" else GDESEmbedding(table))


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


def unshare(model: nn.Module) -> nn.Module:
    """Give every layer its own copy of the weights it shared (ALBERT -> BERT-like), in place.

    Outputs are unchanged; training afterwards updates each layer independently.
    """
    if isinstance(model, ElectraPair):
        unshare(model.generator)
        unshare(model.discriminator)
        cfg = model.config
        model.config = dataclasses.replace(cfg, encoder=cfg.encoder.unshared(), generator=cfg.generator.unshared())
        model.share_embeddings()
        return model
    model.encoder = model.encoder.unshare()
    model.config = dataclasses.replace(model.config, encoder=model.encoder.config)
    if isinstance(model, MaskedLM):
        model.tie()
    return model
