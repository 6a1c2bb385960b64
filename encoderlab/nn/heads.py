"""Heads over the encoder's hidden states. Networks return logits; objectives own losses.

Shape letters: B batch, T length, H hidden, E embedding size, V vocabulary, M selected positions.
"""

from __future__ import annotations

import torch
from torch import nn

from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.encoder import activation


class MLMHead(nn.Module):
    """Transform (H -> E, activation, LayerNorm) then a decoder tied to the input embeddings.

    ``positions`` selects where logits are computed (the sparse head): at 15% masking the
    (M, E) x (E, V) product is ~7x cheaper than the dense (B*T, E) x (E, V) one, and it is the
    largest matrix product of a small model's step.
    """

    def __init__(self, cfg: EncoderConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.emb_size)
        self.act = activation(cfg.hidden_act)
        self.layer_norm = nn.LayerNorm(cfg.emb_size, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.word_embeddings = [word_embeddings]  # a list: tied, not a second registered copy

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.word_embeddings[0].weight  # (V, E)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (B, T, H); positions: None (all), a bool mask (B, T) or flat indices (M,) into B*T.

        Returns (B, T, V) when positions is None, else (M, V) in row-major order of the mask.
        """
        if positions is not None:
            flat = hidden.reshape(-1, hidden.shape[-1])  # (B*T, H)
            if positions.dtype == torch.bool:
                positions = positions.reshape(-1).nonzero().squeeze(1)
            hidden = flat.index_select(0, positions)  # (M, H)
        h = self.layer_norm(self.act(self.dense(hidden)))  # (..., E)
        return nn.functional.linear(h, self.decoder_weight, self.bias)  # (..., V)


class SentencePairHead(nn.Module):
    """NSP (BERT) or SOP (ALBERT): 2-way classifier over the pooled [CLS] vector."""

    def __init__(self, cfg: EncoderConfig, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(cfg.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))  # (B, 2)


class RTDHead(nn.Module):
    """ELECTRA's replaced-token detection: one logit per token (> 0 means "replaced")."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.prediction = nn.Linear(cfg.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T)


class ClassificationHead(nn.Module):
    """Sequence classification or regression (num_labels == 1).

    style="pooler": dropout + linear over the tanh-pooled [CLS] (BERT, ALBERT);
    style="electra": dense + gelu + dropout + linear over the [CLS] hidden state (ELECTRA).
    """

    def __init__(self, cfg: EncoderConfig, num_labels: int, style: str = "pooler", dropout: float = 0.1):
        super().__init__()
        self.style = style
        self.dropout = nn.Dropout(dropout)
        H = cfg.hidden_size
        if style == "electra":
            self.dense = nn.Linear(H, H)
            self.act = activation("gelu")
        elif style != "pooler":
            raise ValueError(f"unknown classification head style {style!r}; valid: pooler, electra")
        self.out = nn.Linear(H, num_labels)

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None) -> torch.Tensor:
        if self.style == "pooler":
            if pooled is None:
                raise ValueError("the pooler classification head needs an encoder with pooler=True")
            return self.out(self.dropout(pooled))  # (B, C)
        x = self.dropout(hidden[:, 0])
        x = self.dropout(self.act(self.dense(x)))
        return self.out(x)  # (B, C)


class TokenClassificationHead(nn.Module):
    def __init__(self, cfg: EncoderConfig, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(hidden))  # (B, T, C)
