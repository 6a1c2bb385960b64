"""The one config of the encoder core, shared by BERT, ALBERT and both halves of ELECTRA."""

from __future__ import annotations

import dataclasses
from typing import Literal

from encoderlab.config import Config, ConfigError

Activation = Literal["gelu", "gelu_new", "relu", "silu"]
Sharing = Literal["none", "all", "attention", "ffn"]
Position = Literal["absolute", "rope"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderConfig(Config):
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    # Width of the token/position/type embeddings; None means hidden_size. When it differs, a
    # Linear(embedding_size -> hidden_size) follows the embeddings (ALBERT's factorization,
    # ELECTRA-small and ELECTRA generators).
    embedding_size: int | None = None
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_act: Activation = "gelu"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    # post: LN(x + f(x)) as in BERT/ALBERT/ELECTRA; pre: x + f(LN(x)) with a final LN.
    norm: Literal["post", "pre"] = "post"
    # Cross-layer sharing (ALBERT): which sublayers are shared, and by how many groups of
    # consecutive layers (ALBERT's num_hidden_groups). num_groups is ignored for "none".
    sharing: Sharing = "none"
    num_groups: int = 1
    # BERT and ALBERT have a tanh pooler over [CLS]; ELECTRA does not.
    pooler: bool = True
    pad_token_id: int = 0
    initializer_range: float = 0.02
    # Modern options (ModernBERT, NeoBERT, GPT-BERT), all off by default so BERT/ALBERT/ELECTRA
    # stay exactly themselves. position "rope": rotary embeddings on queries and keys (Su et al.),
    # no position table; attention then depends only on relative offsets.
    position: Position = "absolute"
    rope_theta: float = 10000.0
    # Gated feed-forward: up projects to 2 x intermediate_size, act(gate) * value (GeGLU with
    # gelu, SwiGLU with silu), then down. Three H x I matrices instead of two.
    gated_ffn: bool = False
    # False: no biases in the attention and feed-forward linears nor in the LayerNorms (ModernBERT).
    bias: bool = True
    # Pre-LN only: False skips layer 0's attention LayerNorm, whose input is the embeddings' own
    # LayerNorm output (ModernBERT does this; normalising twice adds nothing but parameters).
    first_attention_norm: bool = True
    # Execution only (the outputs are the padded run's): with padding in the batch, embeddings,
    # linears and feed-forward layers run on the real tokens only, (N, H) instead of (B, T, H), and
    # padding is restored around the attention products alone, as ModernBERT's unpadding does
    # without a varlen kernel. Pays when batches mix lengths (fine-tuning without length buckets).
    unpad: bool = False

    @property
    def emb_size(self) -> int:
        return self.embedding_size or self.hidden_size

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def validate(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                     "max_position_embeddings"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.type_vocab_size < 0:  # 0: no token-type table (ModernBERT)
            raise ConfigError(f"type_vocab_size must be >= 0, got {self.type_vocab_size}")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        if self.sharing != "none" and not 1 <= self.num_groups <= self.num_layers:
            raise ConfigError(f"num_groups must be in [1, num_layers={self.num_layers}], got {self.num_groups}")
        if self.sharing != "none" and self.num_layers % self.num_groups:
            raise ConfigError(
                f"num_layers {self.num_layers} must be a multiple of num_groups {self.num_groups}"
            )
        if self.position == "rope" and (self.head_dim % 2 or self.rope_theta <= 0):
            raise ConfigError(f"position 'rope' needs an even head dim (got {self.head_dim}) and rope_theta > 0")
        if not 0 <= self.hidden_dropout < 1 or not 0 <= self.attention_dropout < 1:
            raise ConfigError("dropout rates must be in [0, 1)")

    # ---- which module instance serves layer i ----------------------------------------------
    def group_of(self, layer: int) -> int:
        """ALBERT's assignment: consecutive blocks of num_layers / num_groups layers share."""
        return layer // (self.num_layers // self.num_groups)

    def attention_index(self, layer: int) -> int:
        return self.group_of(layer) if self.sharing in ("all", "attention") else layer

    def ffn_index(self, layer: int) -> int:
        return self.group_of(layer) if self.sharing in ("all", "ffn") else layer

    @property
    def num_attention_modules(self) -> int:
        return self.num_groups if self.sharing in ("all", "attention") else self.num_layers

    @property
    def num_ffn_modules(self) -> int:
        return self.num_groups if self.sharing in ("all", "ffn") else self.num_layers

    def unshared(self) -> EncoderConfig:
        return dataclasses.replace(self, sharing="none", num_groups=1)
