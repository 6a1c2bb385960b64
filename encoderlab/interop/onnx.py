"""ONNX export of an encoder network (one graph: encoder + head), for ONNX Runtime inference.

The exported graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, (B, T),
both axes dynamic) and returns one tensor named after the head: ``logits`` for MLM (B, T, V),
discriminator (B, T), classification (B, C) and token classification (B, T, C) heads, ``hidden``
(B, T, H) for a bare encoder. An ELECTRA pair exports its discriminator (the model used downstream).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from encoderlab.models.networks import EncoderModel, MaskedLM
from encoderlab.models.pairs import deployed


class _Graph(nn.Module):
    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.net(input_ids, attention_mask, token_type_ids)
        if isinstance(self.net, MaskedLM):
            return out.logits
        if isinstance(self.net, EncoderModel):
            return out.hidden
        return out


def export_onnx(model: nn.Module, path: str | Path, *, seq_len: int = 16, opset: int = 18) -> Path:
    """Export ``model`` to ``path`` (a .onnx file); returns the path."""
    net = deployed(model)
    name = "hidden" if isinstance(net, EncoderModel) else "logits"
    graph = _Graph(net).eval()
    vocab = net.config.encoder.vocab_size
    ids = torch.randint(5, vocab, (2, seq_len))
    mask = torch.ones(2, seq_len, dtype=torch.long)
    mask[1, -1] = 0  # a padded example, so the traced graph keeps the attention mask
    types = torch.zeros(2, seq_len, dtype=torch.long)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    batch, seq = (
        torch.export.Dim("batch", min=1),
        torch.export.Dim("seq", min=2, max=net.config.encoder.max_position_embeddings),
    )
    shapes = {
        "input_ids": {0: batch, 1: seq},
        "attention_mask": {0: batch, 1: seq},
        "token_type_ids": {0: batch, 1: seq},
    }
    with torch.no_grad():
        torch.onnx.export(
            graph,
            (ids, mask, types),
            str(path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=[name],
            dynamic_shapes=shapes,
            opset_version=opset,
            dynamo=True,
            external_data=False,
        )
    return path
