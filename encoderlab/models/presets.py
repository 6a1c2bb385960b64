"""Family presets: BERT, ALBERT and ELECTRA are the same encoder with different fields.

``preset("electra-small")`` returns a ModelConfig; its head is the family's pretraining head
(BERT: MLM+NSP, ALBERT: MLM+SOP, ELECTRA: generator/discriminator pair). ELECTRA generators
are sized by a width multiplier (the paper: 1/4 small, 1/3 base, 1/4 large) or by depth
(DeBERTa-v3 style: same width, fewer layers).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from encoderlab.config import ConfigError
from encoderlab.models.config import ModelConfig
from encoderlab.nn.config import EncoderConfig

BERT_VOCAB = 30522
ALBERT_VOCAB = 30000
ELECTRA_VOCAB = 30522

# name: (layers, hidden, heads, embedding_size or None)
_BERT = {
    "tiny": (2, 128, 2, None), "mini": (4, 256, 4, None), "small": (4, 512, 8, None),
    "medium": (8, 512, 8, None), "base": (12, 768, 12, None), "large": (24, 1024, 16, None),
}
_ALBERT = {
    "tiny": (2, 128, 2, 64), "mini": (4, 256, 4, 128), "small": (4, 512, 8, 128),
    "base": (12, 768, 12, 128), "large": (24, 1024, 16, 128),
    "xlarge": (24, 2048, 16, 128), "xxlarge": (12, 4096, 64, 128),
}
# ELECTRA: (layers, hidden, heads, embedding_size, generator width multiplier)
_ELECTRA = {
    "tiny": (2, 128, 2, 128, Fraction(1, 4)),
    "small": (12, 256, 4, 128, Fraction(1, 4)),
    "base": (12, 768, 12, 768, Fraction(1, 3)),
    "large": (24, 1024, 16, 1024, Fraction(1, 4)),
}
# Published parameter counts (millions) of the encoders, for the presets table.
PUBLISHED_M = {
    "bert-base": 110, "bert-large": 340, "albert-base": 12, "albert-large": 18, "albert-xlarge": 60,
    "albert-xxlarge": 235, "electra-small": 14, "electra-base": 110, "electra-large": 335,
}


def _encoder(layers, hidden, heads, emb, vocab, **kw) -> EncoderConfig:
    return EncoderConfig(
        vocab_size=vocab, hidden_size=hidden, num_layers=layers, num_heads=heads,
        intermediate_size=4 * hidden, embedding_size=emb, **kw,
    )


def generator_config(
    disc: EncoderConfig, multiplier: float | Fraction, by: str = "width"
) -> EncoderConfig:
    """The ELECTRA generator for a discriminator: width (hidden, heads, FFN scaled) or depth."""
    m = Fraction(multiplier).limit_denominator(64)
    if not 0 < m <= 1:
        raise ConfigError(f"generator multiplier must be in (0, 1], got {multiplier}")
    if by == "width":
        heads = max(1, int(disc.num_heads * m))
        hidden = int(disc.hidden_size * m)
        hidden -= hidden % heads
        return dataclasses.replace(
            disc, hidden_size=hidden, num_heads=heads, intermediate_size=int(disc.intermediate_size * m),
            embedding_size=disc.emb_size, pooler=False,
        )
    if by == "depth":
        return dataclasses.replace(disc, num_layers=max(1, round(disc.num_layers * m)), pooler=False)
    raise ConfigError(f"generator sizing {by!r} is not one of ['width', 'depth']")


def preset(name: str, *, generator_multiplier=None, generator_by: str = "width",
           embedding_sharing: str = "shared", vocab_size: int | None = None) -> ModelConfig:
    family, _, size = name.partition("-")
    table = {"bert": _BERT, "albert": _ALBERT, "electra": _ELECTRA}.get(family)
    if table is None or size not in table:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {preset_names()}")
    if family == "bert":
        L, H, N, E = table[size]
        enc = _encoder(L, H, N, E, vocab_size or BERT_VOCAB)
        return ModelConfig(family="bert", head="pretraining", encoder=enc)
    if family == "albert":
        L, H, N, E = table[size]
        enc = _encoder(
            L, H, N, E, vocab_size or ALBERT_VOCAB, hidden_act="gelu_new", sharing="all",
            num_groups=1, hidden_dropout=0.0, attention_dropout=0.0,
        )
        return ModelConfig(family="albert", head="pretraining", encoder=enc)
    L, H, N, E, mult = table[size]
    enc = _encoder(L, H, N, E, vocab_size or ELECTRA_VOCAB, pooler=False)
    gen = generator_config(enc, generator_multiplier or mult, generator_by)
    return ModelConfig(
        family="electra", head="electra", encoder=enc, generator=gen, embedding_sharing=embedding_sharing
    )


def preset_names() -> list[str]:
    return [f"{f}-{s}" for f, t in (("bert", _BERT), ("albert", _ALBERT), ("electra", _ELECTRA)) for s in t]


def count_encoder_parameters(cfg: EncoderConfig) -> int:
    """Parameters of the bare encoder (embeddings, layers, pooler), computed analytically:
    equal to the number of parameters of encoderlab.nn.Encoder and of transformers' BertModel /
    AlbertModel / ElectraModel with the same configuration (tested)."""
    H, E, I, V = cfg.hidden_size, cfg.emb_size, cfg.intermediate_size, cfg.vocab_size
    b = 1 if cfg.bias else 0  # biases of the layers' linears and of every LayerNorm
    positions = cfg.max_position_embeddings if cfg.position == "absolute" else 0
    emb = (V + positions + cfg.type_vocab_size) * E + (1 + b) * E
    if E != H:
        emb += E * H + H
    attn = 3 * H * H + b * 3 * H + H * H + b * H + (1 + b) * H
    up = 2 * I if cfg.gated_ffn else I
    ffn = H * up + b * up + I * H + b * H + (1 + b) * H
    total = emb + attn * cfg.num_attention_modules + ffn * cfg.num_ffn_modules
    if cfg.norm == "pre":
        total += (1 + b) * H
        if not cfg.first_attention_norm and cfg.num_attention_modules == cfg.num_layers:
            total -= (1 + b) * H  # layer 0's own attention has no LayerNorm
    if cfg.pooler:
        total += H * H + H
    return total
