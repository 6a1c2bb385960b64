"""Shared fixtures: tiny configs (vocab 99, hidden 32, 2 layers) so model tests run in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from encoderlab.nn.config import EncoderConfig

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def tiny_encoder(**kw) -> EncoderConfig:
    base = dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=37,
                max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0)
    base.update(kw)
    return EncoderConfig(**base)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not present at {SHARED_DATA} (a fresh clone has no ../shared)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
