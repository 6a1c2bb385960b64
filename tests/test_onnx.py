"""ONNX export: ONNX Runtime's outputs match PyTorch's for every head, with dynamic batch and length."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from encoderlab import checkpoint
from encoderlab.cli import main
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from tests.conftest import tiny_encoder

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")


def _run(path, ids, mask, types):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                           "token_type_ids": types.numpy()})[0]


@pytest.mark.parametrize("family,head,kw", [
    ("electra", "discriminator", dict(pooler=False, embedding_size=16)),
    ("bert", "mlm", {}),
    ("albert", "sequence_classification", dict(sharing="all", embedding_size=16)),
])
def test_onnx_matches_pytorch(family, head, kw, tmp_path):
    model = build_model(ModelConfig(family=family, head=head, encoder=tiny_encoder(**kw))).eval()
    checkpoint.save_model(model, tmp_path / "ck")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["export-onnx", str(tmp_path / "ck"), str(tmp_path / "m.onnx")]) == 0
    for B, T in [(1, 5), (4, 23)]:  # other shapes than the export example: axes are dynamic
        ids = torch.randint(5, 99, (B, T))
        mask = torch.ones(B, T, dtype=torch.long)
        mask[-1, T // 2:] = 0
        types = torch.zeros(B, T, dtype=torch.long)
        with torch.no_grad():
            ref = model(ids, mask, types)
        ref = (ref.logits if hasattr(ref, "logits") else ref).numpy()
        got = _run(tmp_path / "m.onnx", ids, mask, types)
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-4)
