"""Dropout with a cheaper random mask on the CPU.

``nn.Dropout`` on the CPU draws one Bernoulli variate per element; in an ELECTRA-small bf16
training step that was the largest single cost, above every matrix product (profile in
docs/benchmarks.md). Here one 64-bit draw from the global generator gives four 16-bit uniforms,
each compared with a threshold: several times faster than ``nn.Dropout`` forward at the shapes of a
training step (benchmarks/attention.py; figures in docs/benchmarks.md). The drop probability is
rounded to a multiple of 2**-16 (0.1 becomes 0.1000061) and the kept values are scaled by the
exact 1 / (1 - p) of that rounded p, so the expectation is unchanged. Elsewhere (CUDA) and in
eval mode this is ``F.dropout``. Runs stay reproducible: the draws come from torch's global
generator, whose state checkpoints save.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 1 << 16


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> tuple[torch.Tensor, float]:
    """(bool mask of kept positions, 1 / keep probability) for drop probability ``p``."""
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), 2**63 - 1)
    u16 = words.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    dropped = round(p * _LEVELS)
    keep = u16 >= dropped - _LEVELS // 2
    return keep, _LEVELS / (_LEVELS - dropped)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, True)
    keep, scale = keep_mask(x.shape, p, x.device)
    return x * keep.to(x.dtype).mul_(scale)


class Dropout(nn.Module):
    """Drop-in for ``nn.Dropout(p)`` (see the module docstring)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
