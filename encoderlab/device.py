"""Which torch device a run uses: one rule for pretraining and fine-tuning."""

from __future__ import annotations

import re

import torch


def check_device_name(name) -> str | None:
    """The reason ``name`` is not a device setting (auto, cpu, cuda, cuda:N), or None when it is one:
    what config validation reports before anything runs."""
    if isinstance(name, str) and (name in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", name)):
        return None
    return f"device must be auto, cpu, cuda or cuda:N, got {name!r}"


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when this torch sees a GPU, else the CPU; ``cuda`` or ``cuda:N`` on a machine
    without that device fails here, with the reason, before a model is built or data is loaded."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={name!r} but this torch sees no CUDA device (torch {torch.__version__})")
    device = torch.device(name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise RuntimeError(f"device={name!r} but this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device
