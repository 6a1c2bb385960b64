"""The encoder core: embeddings (factorized when embedding_size != hidden_size), attention through
scaled_dot_product_attention with a fused QKV projection, feed-forward, and cross-layer sharing.

Shape letters: B batch, T sequence length, H hidden size, E embedding size, N heads, D head dim,
I intermediate size, V vocabulary.

Sharing is done by execution order, not by copying: the encoder owns ``attention`` and ``ffn``
lists of unique sublayers and layer i runs ``attention[cfg.attention_index(i)]`` then
``ffn[cfg.ffn_index(i)]``. ALBERT (sharing="all", one group) has one of each; BERT has L of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.dropout import Dropout, dropout

# Longest sequence at which bf16 attention on the CPU runs as explicit products rather than SDPA:
# 3.7-5.2x faster (forward + backward) at 128, 2.2x at 256, even at 512 on an AMX Xeon, 2.7-4.5x at
# 128 on a Zen 4 EPYC (benchmarks/attention.py), where SDPA's smaller memory (no (B, N, T, T)
# tensors kept for backward) then decides. Only where bf16 products are fast: on a CPU limited to
# AVX2 the explicit bf16 products were 3-5x *slower* than SDPA's kernel (2026-12-04), so there (where
# bf16 runs only when asked for: precision auto is fp32) SDPA is kept. Decided by the precision
# probe (encoderlab/precision.py), once per process.
EXPLICIT_BF16_MAX_LEN = 256
_bf16_products_fast: bool | None = None


def explicit_bf16_attention() -> bool:
    global _bf16_products_fast
    if _bf16_products_fast is None:
        from encoderlab.precision import bf16_products_fast

        _bf16_products_fast = bf16_products_fast()
    return _bf16_products_fast


def activation(name: str):
    if name == "gelu":
        return F.gelu
    if name == "gelu_new":  # the tanh approximation (ALBERT, GPT-2)
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu
    if name == "silu":
        return F.silu
    raise ValueError(f"unknown activation {name!r}; valid: gelu, gelu_new, relu, silu")


def init_weights(module: nn.Module, std: float) -> None:
    """BERT's initialization: N(0, std) for matrices and embeddings, zero biases, unit LayerNorms."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class Embeddings(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        E = cfg.emb_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, E)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, E) if cfg.type_vocab_size else None
        self.layer_norm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout)
        self.projection = nn.Linear(E, cfg.hidden_size) if E != cfg.hidden_size else None

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        B, T = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(T, device=input_ids.device)  # (T,) broadcast over B
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # (B, T, E)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                # Row 0 only: cheaper than a lookup of zeros.
                x = x + self.token_type_embeddings.weight[0]
            else:
                x = x + self.token_type_embeddings(token_type_ids)
        x = self.dropout(self.layer_norm(x))
        if self.projection is not None:
            x = self.projection(x)  # (B, T, H)
        return x


class SelfAttention(nn.Module):
    """Multi-head self-attention sublayer with its residual and (pre or post) LayerNorm."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        H = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.qkv = nn.Linear(H, 3 * H)  # fused: one GEMM instead of three
        self.out = nn.Linear(H, H)
        self.layer_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.attention_dropout = cfg.attention_dropout
        self.dropout = Dropout(cfg.hidden_dropout)
        self.pre_norm = cfg.norm == "pre"

    def forward(self, x, mask=None):
        B, T, H = x.shape
        h = self.layer_norm(x) if self.pre_norm else x
        qkv = self.qkv(h).view(B, T, 3, self.num_heads, H // self.num_heads)  # (B, T, 3, N, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, N, T, D)
        p = self.attention_dropout if self.training else 0.0
        bf16_short = q.dtype == torch.bfloat16 and T <= EXPLICIT_BF16_MAX_LEN
        if x.device.type == "cpu" and (p > 0.0 or (bf16_short and explicit_bf16_attention())):
            # Explicit products on the CPU, where they beat SDPA (benchmarks/attention.py): SDPA has
            # no fused dropout (with dropout_p > 0 it runs these same products but draws its mask
            # per element, which costs more than they do), and in bf16 at short lengths its flash
            # kernel is slower than two batched products, forward and above all backward, where
            # bf16 products are fast (see explicit_bf16_attention).
            s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5  # (B, N, T, T)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            a = dropout(s.softmax(-1), p, True).to(v.dtype) @ v  # (B, N, T, D)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, N, T, D)
        a = a.transpose(1, 2).reshape(B, T, H)
        y = x + self.dropout(self.out(a))
        return y if self.pre_norm else self.layer_norm(y)


class FeedForward(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.up = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.down = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout)
        self.pre_norm = cfg.norm == "pre"

    def forward(self, x):
        h = self.layer_norm(x) if self.pre_norm else x
        y = x + self.dropout(self.down(self.act(self.up(h))))  # (B, T, H)
        return y if self.pre_norm else self.layer_norm(y)


def _all_real_on_cpu(attention_mask: torch.Tensor) -> bool:
    """True for an all-ones mask on the CPU (packed batches, batch-1 inference): SDPA then runs
    without a mask, on its faster kernel. Not checked on accelerators, where reading the answer
    would stall the device, nor while compiling, where it would break the graph."""
    if attention_mask.device.type != "cpu" or torch.compiler.is_compiling():
        return False
    return bool(attention_mask.all())


@dataclass
class EncoderOutput:
    hidden: torch.Tensor  # (B, T, H) last layer
    pooled: torch.Tensor | None = None  # (B, H) tanh pooler over [CLS], when the config has one


class Encoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.attention = nn.ModuleList(SelfAttention(cfg) for _ in range(cfg.num_attention_modules))
        self.ffn = nn.ModuleList(FeedForward(cfg) for _ in range(cfg.num_ffn_modules))
        self.final_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps) if cfg.norm == "pre" else None
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size) if cfg.pooler else None
        self._order = [(cfg.attention_index(i), cfg.ffn_index(i)) for i in range(cfg.num_layers)]
        init_weights(self, cfg.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None) -> EncoderOutput:
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H)
        mask = None
        if attention_mask is not None and not _all_real_on_cpu(attention_mask):
            # Boolean (B, 1, 1, T): True where a key may be attended to. Padded queries still see
            # the real keys, so no row is all-False and SDPA never produces NaN.
            mask = attention_mask.bool()[:, None, None, :]
        for a, f in self._order:
            x = self.ffn[f](self.attention[a](x, mask))
        if self.final_norm is not None:
            x = self.final_norm(x)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, H)
        return EncoderOutput(hidden=x, pooled=pooled)

    def unshare(self) -> Encoder:
        """A copy with independent layers (each a copy of the shared one): identical outputs."""
        cfg = self.config.unshared()
        out = Encoder(cfg)
        out.embeddings.load_state_dict(self.embeddings.state_dict())
        for i, (a, f) in enumerate(self._order):
            out.attention[i].load_state_dict(self.attention[a].state_dict())
            out.ffn[i].load_state_dict(self.ffn[f].state_dict())
        if self.final_norm is not None:
            out.final_norm.load_state_dict(self.final_norm.state_dict())
        if self.pooler is not None:
            out.pooler.load_state_dict(self.pooler.state_dict())
        return out.to(next(self.parameters()).device)
