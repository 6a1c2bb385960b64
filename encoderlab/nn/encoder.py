"""The encoder core: embeddings (factorized when embedding_size != hidden_size), attention through
scaled_dot_product_attention with a fused QKV projection, feed-forward, and cross-layer sharing.

Shape letters: B batch, T sequence length, H hidden size, E embedding size, N heads, D head dim,
I intermediate size, V vocabulary.

Modern options (config fields, off by default): rotary position embeddings instead of a position
table, gated feed-forward (GeGLU/SwiGLU), bias-free linears and norms, pre-LN.

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

# Longest sequence at which bf16 attention on the CPU runs as explicit products rather than SDPA,
# where the run's kernels say so (SelfAttention.explicit_bf16, set by encoderlab/runtime.py where bf16
# products are fast): at longer lengths SDPA's smaller memory (no (B, N, T, T) tensors kept for
# backward) decides. Measurements: docs/benchmarks.md, "Attention" (benchmarks/attention.py).
EXPLICIT_BF16_MAX_LEN = 256


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
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class Rotary(nn.Module):
    """Rotary position embeddings (RoFormer): rotating each pair of query/key dimensions by an angle
    proportional to the position makes q_i . k_j depend on i - j only. The "rotate half" pairing
    (dimension d with d + D/2), as transformers' ModernBERT and Llama use. No parameters."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (D/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not in checkpoints

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """position_ids (T,) or (B, T) -> cos, sin of shape (T, D) or (B, 1, T, D), in fp32."""
        angles = position_ids.float()[..., None] * self.inv_freq  # (..., T, D/2)
        angles = torch.cat((angles, angles), -1)  # (..., T, D)
        if angles.dim() == 3:
            angles = angles[:, None]  # (B, 1, T, D): broadcast over heads
        return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, N, T, D) rotated by the angles whose cos/sin are given; computed in x's dtype."""
    x1, x2 = x.chunk(2, -1)
    return x * cos.to(x.dtype) + torch.cat((-x2, x1), -1) * sin.to(x.dtype)


class Embeddings(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        E = cfg.emb_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, E)
        # With rotary positions the position lives in attention, not in a table.
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, E) if cfg.position == "absolute" else None
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, E) if cfg.type_vocab_size else None
        self.layer_norm = nn.LayerNorm(E, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.dropout = Dropout(cfg.hidden_dropout)
        self.projection = nn.Linear(E, cfg.hidden_size) if E != cfg.hidden_size else None

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        B, T = input_ids.shape
        x = self.word_embeddings(input_ids)  # (B, T, E)
        if self.position_embeddings is not None:
            if position_ids is None:
                position_ids = torch.arange(T, device=input_ids.device)  # (T,) broadcast over B
            x = x + self.position_embeddings(position_ids)
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

    def __init__(self, cfg: EncoderConfig, norm: bool = True):
        """norm False: a pre-LN sublayer without its LayerNorm (layer 0 with first_attention_norm
        off, when not shared: an unused norm would also trouble DistributedDataParallel)."""
        super().__init__()
        H = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.qkv = nn.Linear(H, 3 * H, bias=cfg.bias)  # fused: one GEMM instead of three
        self.out = nn.Linear(H, H, bias=cfg.bias)
        keep_norm = norm or cfg.norm == "post"
        self.layer_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps, bias=cfg.bias) if keep_norm else None
        self.attention_dropout = cfg.attention_dropout
        self.dropout = Dropout(cfg.hidden_dropout)
        self.pre_norm = cfg.norm == "pre"
        # bf16 attention at short lengths on the CPU as explicit products (True) or SDPA (False, safe
        # everywhere): a plain value chosen by whoever runs the model (encoderlab/runtime.py).
        self.explicit_bf16 = False

    def forward(self, x, mask=None, rotary=None, norm=True, unpad=None):
        """x (B, T, H), or (R, H) real tokens with unpad = (flat indices (R,), B, T); mask: bool,
        broadcastable to (B, N, T, T), True where a key may be attended to; rotary: (cos, sin) from
        Rotary, or None for absolute positions; norm False skips the pre-LN (layer 0 with
        first_attention_norm off)."""
        H = x.shape[-1]
        h = self.layer_norm(x) if self.pre_norm and norm and self.layer_norm is not None else x
        qkv = self.qkv(h)  # (B, T, 3H) or (R, 3H)
        if unpad is not None:  # padding back for the attention products only
            idx, B, T = unpad
            qkv = qkv.new_zeros(B * T, 3 * H).index_copy(0, idx, qkv)  # (B*T, 3H)
        else:
            B, T = x.shape[:2]
        qkv = qkv.view(B, T, 3, self.num_heads, H // self.num_heads)  # (B, T, 3, N, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, N, T, D)
        if rotary is not None:
            q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
        p = self.attention_dropout if self.training else 0.0
        a = ATTENTION[self.kernel(q, p)](q, k, v, mask, p)  # (B, N, T, D)
        a = a.transpose(1, 2).reshape(B, T, H)
        if unpad is not None:
            a = a.reshape(B * T, H).index_select(0, unpad[0])  # (R, H)
        y = x + self.dropout(self.out(a))
        return y if self.pre_norm else self.layer_norm(y)


    def kernel(self, q: torch.Tensor, p: float) -> str:
        return attention_kernel(q.device.type, q.dtype == torch.bfloat16, q.shape[-2], p, self.explicit_bf16)


def attention_kernel(device_type: str, bf16: bool, length: int, p: float, explicit_bf16: bool) -> str:
    """The one rule for which attention runs (a layer calls it per call, runtime.Runtime.kernels to
    record it): explicit products on the CPU where they beat SDPA (benchmarks/attention.py): SDPA has
    no fused dropout there (with dropout_p > 0 it runs these same products but draws its mask per
    element, which costs more than they do), and in bf16 at short lengths its flash kernel is slower
    than two batched products, forward and above all backward, where bf16 products are fast
    (explicit_bf16, chosen outside the model). SDPA everywhere else."""
    if device_type != "cpu":
        return "sdpa"
    return "explicit" if p > 0.0 or (bf16 and length <= EXPLICIT_BF16_MAX_LEN and explicit_bf16) else "sdpa"


def sdpa_attention(q, k, v, mask, p: float) -> torch.Tensor:
    """q, k, v (B, N, T, D); mask broadcastable to (B, N, T, T), True where a key may be attended to."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, N, T, D)


def explicit_attention(q, k, v, mask, p: float) -> torch.Tensor:
    """The same attention as two batched products and a softmax, with the CPU's cheap dropout."""
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5  # (B, N, T, T)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return dropout(s.softmax(-1), p, True).to(v.dtype) @ v  # (B, N, T, D)


# The attention implementations by name (as transformers' attention-implementation registry): the
# layer picks one per call (SelfAttention.kernel), the products around it stay the same.
ATTENTION = {"sdpa": sdpa_attention, "explicit": explicit_attention}


class FeedForward(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.gated = cfg.gated_ffn
        up = cfg.intermediate_size * (2 if self.gated else 1)  # gated: activated half, then value half
        self.up = nn.Linear(cfg.hidden_size, up, bias=cfg.bias)
        self.down = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.bias)
        self.act = activation(cfg.hidden_act)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.dropout = Dropout(cfg.hidden_dropout)
        self.pre_norm = cfg.norm == "pre"

    def forward(self, x):
        h = self.layer_norm(x) if self.pre_norm else x
        u = self.up(h)  # (B, T, I) or (B, T, 2I)
        if self.gated:
            g, u = u.chunk(2, -1)  # as transformers' ModernBERT: act(first half) * second half
            u = self.act(g) * u
        else:
            u = self.act(u)
        y = x + self.dropout(self.down(u))  # (B, T, H)
        return y if self.pre_norm else self.layer_norm(y)


def _all_real_on_cpu(attention_mask: torch.Tensor) -> bool:
    """True for an all-ones mask on the CPU (packed batches, batch-1 inference): SDPA then runs
    without a mask, on its faster kernel. Not checked on accelerators, where reading the answer
    would stall the device, nor while compiling, where it would break the graph."""
    if attention_mask.device.type != "cpu" or torch.compiler.is_compiling():
        return False
    return bool(attention_mask.all())


def restarting_positions(sequence_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) sequence ids of packed rows -> (B, T) positions counted from each sequence's start."""
    T = sequence_ids.shape[1]
    at = torch.arange(T, device=sequence_ids.device).expand_as(sequence_ids)  # (B, T)
    starts = torch.ones_like(sequence_ids, dtype=torch.bool)
    starts[:, 1:] = sequence_ids[:, 1:] != sequence_ids[:, :-1]
    return at - torch.where(starts, at, 0).cummax(1).values


@dataclass
class EncoderOutput:
    hidden: torch.Tensor  # (B, T, H) last layer
    pooled: torch.Tensor | None = None  # (B, H) tanh pooler over [CLS], when the config has one


class Encoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        # Layer 0's own attention module has no pre-LN when first_attention_norm is off.
        bare_first = cfg.norm == "pre" and not cfg.first_attention_norm and cfg.num_attention_modules == cfg.num_layers
        self.attention = nn.ModuleList(SelfAttention(cfg, norm=not (i == 0 and bare_first))
                                       for i in range(cfg.num_attention_modules))
        self.ffn = nn.ModuleList(FeedForward(cfg) for _ in range(cfg.num_ffn_modules))
        self.final_norm = (nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, bias=cfg.bias)
                           if cfg.norm == "pre" else None)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta) if cfg.position == "rope" else None
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size) if cfg.pooler else None
        self._order = [(cfg.attention_index(i), cfg.ffn_index(i)) for i in range(cfg.num_layers)]
        init_weights(self, cfg.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                sequence_ids=None) -> EncoderOutput:
        """attention_mask: (B, T) 1 at real tokens, or (B, T, T) bool, which keys each query may see
        (UniLM's seq2seq mask; every row must see one key at least). sequence_ids (B, T): several
        sequences packed in a row; a token attends only to tokens of its own sequence, and positions
        restart at each (unless position_ids are given)."""
        B, T = input_ids.shape
        if sequence_ids is not None and position_ids is None:
            position_ids = restarting_positions(sequence_ids)  # (B, T)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H)
        mask = None
        if attention_mask is not None and attention_mask.dim() == 3:
            mask, attention_mask = attention_mask.bool()[:, None], None  # (B, 1, T, T); nothing to unpad
        elif attention_mask is not None and not _all_real_on_cpu(attention_mask):
            # Boolean (B, 1, 1, T): True where a key may be attended to. Padded queries still see
            # the real keys, so no row is all-False and SDPA never produces NaN.
            mask = attention_mask.bool()[:, None, None, :]
        if sequence_ids is not None:  # block-diagonal: (B, 1, T, T); the diagonal is never empty
            same = sequence_ids[:, None, :, None] == sequence_ids[:, None, None, :]
            mask = same if mask is None else same & mask
        rotary = None
        if self.rotary is not None:
            if position_ids is None:
                position_ids = torch.arange(T, device=input_ids.device)  # (T,)
            rotary = self.rotary(position_ids)
        unpad = None
        if self.config.unpad and attention_mask is not None and (mask is not None or sequence_ids is not None):
            idx = attention_mask.reshape(-1).nonzero().squeeze(1)  # (R,) real tokens of the flat batch
            if idx.numel() < B * T:
                unpad = (idx, B, T)
                x = x.reshape(B * T, -1).index_select(0, idx)  # (R, H)
        skip_first = self.config.norm == "pre" and not self.config.first_attention_norm
        for i, (a, f) in enumerate(self._order):
            x = self.ffn[f](self.attention[a](x, mask, rotary, norm=not (i == 0 and skip_first), unpad=unpad))
        if self.final_norm is not None:
            x = self.final_norm(x)
        if unpad is not None:  # padded positions come back as zeros
            x = x.new_zeros(B * T, x.shape[-1]).index_copy(0, unpad[0], x).view(B, T, -1)  # (B, T, H)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, H)
        return EncoderOutput(hidden=x, pooled=pooled)

    def set_attention_kernel(self, explicit_bf16: bool) -> None:
        """bf16 attention at short lengths on the CPU as explicit products (True) or SDPA (False)."""
        for a in self.attention:
            a.explicit_bf16 = explicit_bf16

    def unshare(self) -> Encoder:
        """A copy with independent layers (each a copy of the shared one): identical outputs. The
        embeddings are not per layer: the copy takes this encoder's embeddings module itself, so
        tables shared with another network (an ELECTRA pair's, plainly or through gdes deltas)
        stay shared."""
        cfg = self.config.unshared()
        out = Encoder(cfg)
        out.set_attention_kernel(self.attention[0].explicit_bf16)
        out.embeddings = self.embeddings
        for i, (a, f) in enumerate(self._order):
            state = self.attention[a].state_dict()
            if out.attention[i].layer_norm is None:  # layer 0 never used the shared module's norm
                state = {k: v for k, v in state.items() if not k.startswith("layer_norm.")}
            out.attention[i].load_state_dict(state)
            out.ffn[i].load_state_dict(self.ffn[f].state_dict())
        if self.final_norm is not None:
            out.final_norm.load_state_dict(self.final_norm.state_dict())
        if self.pooler is not None:
            out.pooler.load_state_dict(self.pooler.state_dict())
        return out.to(next(self.parameters()).device)
