"""How a run computes: device, precision and attention kernel, resolved once, before any forward pass.

Every entry point (pretraining, fine-tuning, prompting, generation, evaluation, a study's
measurements and speed stage) calls ``resolve_runtime`` with the model's encoder config and then
``runtime.apply(model)``. The model receives plain values: nn/ never probes the machine nor reads a
cache, so a forward pass under ``torch.no_grad()`` or ``torch.inference_mode()`` cannot reach the
probe (which times a training step and needs gradients).

The attention kernel matters only for bf16 on the CPU at short lengths: explicit products are
faster than SDPA's flash kernel where bf16 products are fast, several times slower where they are
emulated (an AVX2-only CPU). The probe that decides ``precision: auto`` answers that too, so a run
in bf16 (auto or asked for) uses explicit products exactly where this machine's probe says bf16 is
fast; fp32 runs and accelerators keep SDPA.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.encoder import EXPLICIT_BF16_MAX_LEN, Encoder, attention_kernel
from encoderlab.precision import PrecisionChoice, bf16_products_fast, resolve_precision

ATTENTION_KERNELS = ("sdpa", "explicit")


@dataclass(frozen=True)
class Runtime:
    """A run's resolved kernels: recorded beside its results (``to_dict``)."""

    device: torch.device
    precision: PrecisionChoice
    attention: str  # sdpa | explicit: bf16 attention at short lengths on the CPU (the value models receive)
    attention_dropout: float = 0.0  # the encoder's: with it, training on the CPU runs explicit products

    def __post_init__(self):
        if self.attention not in ATTENTION_KERNELS:
            raise ValueError(f"attention must be one of {list(ATTENTION_KERNELS)}, got {self.attention!r}")

    def apply(self, model: nn.Module) -> nn.Module:
        """Set the attention kernel on every encoder inside ``model`` (pairs, heads, classifiers)."""
        for m in model.modules():
            if isinstance(m, Encoder):
                m.set_attention_kernel(self.attention == "explicit")
        return model

    def kernels(self) -> dict[str, str]:
        """The attention each phase of this run actually computes, by the layers' own rule
        (nn/encoder.attention_kernel) at a short and a long length: what the record says."""
        def at(p: float) -> str:
            short, long = (attention_kernel(self.device.type, self.precision.bf16, n, p, self.attention == "explicit")
                           for n in (EXPLICIT_BF16_MAX_LEN, EXPLICIT_BF16_MAX_LEN + 1))
            return short if short == long else f"{short} up to length {EXPLICIT_BF16_MAX_LEN}, {long} above"
        return {"training": at(self.attention_dropout), "inference": at(0.0)}

    def to_dict(self) -> dict:
        return {**self.precision.to_dict(), "attention": self.attention, "attention_kernels": self.kernels()}


def resolve_runtime(precision: str, device: torch.device | str, encoder: EncoderConfig) -> Runtime:
    """The precision for ``encoder``'s width on ``device`` (precision.resolve_precision) and the
    attention kernel that goes with it. Call it before the first forward pass, and before entering
    inference mode (the probe enables gradients itself, so no_grad contexts do no harm)."""
    device = torch.device(device)
    choice = resolve_precision(precision, device, hidden=encoder.hidden_size, intermediate=encoder.intermediate_size)
    explicit = device.type == "cpu" and choice.bf16 and (
        choice.probe["bf16_fast"] if choice.probe is not None
        else bf16_products_fast(encoder.hidden_size, encoder.intermediate_size))
    return Runtime(device=device, precision=choice, attention="explicit" if explicit else "sdpa",
                   attention_dropout=encoder.attention_dropout)
