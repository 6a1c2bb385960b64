"""Fine-tuning's optimizer: AdamW, its parameter groups with layer-wise learning-rate decay, and
the schedule. Named apart from pretraining's (encoderlab/train/optim.py: ``param_groups``,
``lr_factor``), which decays over a FLOP budget and knows no layers.

Learning rate by model size: ELECTRA's fine-tuning rates (Clark et al. 2020, appendix), see
:func:`default_learning_rate`.

Layer-wise decay, indexed so that the top layer gets decay^1 (the official ELECTRA code gives it
decay^2: its task head sits at depth L+2 and layers at i+1). With L layers numbered 0..L-1:

    head and pooler          lr * decay^0
    layer i                  lr * decay^(L - i)     (top layer: decay^1)
    final LayerNorm (pre-LN) lr * decay^1
    embeddings               lr * decay^(L + 1)

With shared layers (ALBERT), one module serves several depths; it gets the rate of the *top*
layer that uses it (decay^1 for ALBERT's single shared block), since a parameter can have only one
learning rate and the top layer's is the one the classifier's gradients reach first.
"""

from __future__ import annotations

import torch
from torch import nn


def default_learning_rate(hidden_size: int) -> float:
    """ELECTRA's fine-tuning rates, small (H <= 256) 3e-4, base (H <= 768) 1e-4, large 5e-5, and
    1e-3 below small (H <= 128): there 3e-4 underfits in a few epochs (bert-tiny at 5e13 FLOPs,
    3 seeds: CoLA MCC 0.000 against 0.081, SST-2 0.655 against 0.723; docs/benchmarks.md), while
    at H = 256 1e-3 left fine-tunings predicting one class (docs/studies/claims-enwiki)."""
    return 1e-3 if hidden_size <= 128 else 3e-4 if hidden_size <= 256 else 1e-4 if hidden_size <= 768 else 5e-5


def tune_adamw(params, lr: float, eps: float = 1e-6, weight_decay: float = 0.01) -> torch.optim.AdamW:
    """AdamW, fused when this torch supports it on the device: for MiniLM-L6 (22.7M parameters) a
    fused step took 29 ms vs 156 ms for the default one on one shared core, against 103 ms for the
    bf16 forward and backward of a batch of 16."""
    try:
        return torch.optim.AdamW(params, lr=lr, eps=eps, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, lr=lr, eps=eps, weight_decay=weight_decay)


def layer_scales(model: nn.Module, decay: float) -> dict[str, float]:
    """Learning-rate multiplier of every parameter of a model with an ``encoder`` (see module doc)."""
    cfg = model.encoder.config
    L = cfg.num_layers
    top_att = {cfg.attention_index(i): i for i in range(L)}  # later layers overwrite: the top user wins
    top_ffn = {cfg.ffn_index(i): i for i in range(L)}
    scales = {}
    for name, _ in model.named_parameters():
        parts = name.split(".")
        if parts[0] != "encoder":
            depth = L + 1  # task head
        elif parts[1] == "embeddings":
            depth = 0
        elif parts[1] == "attention":
            depth = top_att[int(parts[2])] + 1
        elif parts[1] == "ffn":
            depth = top_ffn[int(parts[2])] + 1
        elif parts[1] == "final_norm":
            depth = L
        elif parts[1] == "pooler":
            depth = L + 1
        else:
            raise ValueError(f"layer_scales: no depth rule for parameter {name!r}")
        scales[name] = decay ** (L + 1 - depth)
    return scales


def tune_param_groups(model: nn.Module, lr: float, layer_decay: float, weight_decay: float) -> list[dict]:
    """AdamW groups: one per (scale, decayed or not); vectors (biases, LayerNorm weights) get no
    weight decay. ``base_lr`` is each group's rate before the schedule. ``layer_decay`` 1: one
    scale, and the model needs no ``encoder`` (any network)."""
    scales = layer_scales(model, layer_decay) if layer_decay != 1 else {}
    groups: dict[tuple[float, bool], list] = {}
    for name, p in model.named_parameters():
        groups.setdefault((scales.get(name, 1.0), p.ndim < 2), []).append(p)
    return [{"params": ps, "lr": lr * s, "base_lr": lr * s, "weight_decay": 0.0 if no_wd else weight_decay}
            for (s, no_wd), ps in sorted(groups.items(), key=lambda kv: -kv[0][0])]


def warmup_steps(warmup: float, total: int) -> int:
    """Warm-up steps for a share ``warmup`` of ``total`` steps: at least one when the share is > 0."""
    return max(1, round(warmup * total)) if warmup > 0 else 0


def tune_lr_scale(step: int, total: int, warmup: int, schedule: str = "linear") -> float:
    """The multiplier of every group's ``base_lr`` at ``step`` (0-based) of ``total``. linear:
    warm-up to 1 over ``warmup`` steps (the first step already > 0), then linear decay to 0;
    constant: 1."""
    if schedule == "constant":
        return 1.0
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))
