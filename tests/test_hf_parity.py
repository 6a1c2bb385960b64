"""Parity with transformers: tiny random HF models are imported and exported for every family and
head; logits match within 1e-5 in fp32, state dicts round-trip exactly."""

from __future__ import annotations

import json

import pytest
import torch

from encoderlab import checkpoint
from encoderlab.interop import hf
from encoderlab.models.build import build_model

transformers = pytest.importorskip("transformers")

B, T = 3, 11
COMMON = dict(vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=37,
              max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
CASES = [
    ("BertModel", transformers.BertConfig, {}),
    ("BertForMaskedLM", transformers.BertConfig, {}),
    ("BertForPreTraining", transformers.BertConfig, {}),
    ("BertForSequenceClassification", transformers.BertConfig, {"num_labels": 3}),
    ("BertForSequenceClassification", transformers.BertConfig, {"num_labels": 1}),
    ("BertForTokenClassification", transformers.BertConfig, {"num_labels": 5}),
    ("AlbertModel", transformers.AlbertConfig, {"embedding_size": 16}),
    ("AlbertForMaskedLM", transformers.AlbertConfig, {"embedding_size": 16}),
    ("AlbertForPreTraining", transformers.AlbertConfig, {"embedding_size": 16}),
    ("AlbertForPreTraining", transformers.AlbertConfig, {"embedding_size": 16, "num_hidden_groups": 2}),
    ("AlbertForPreTraining", transformers.AlbertConfig, {"embedding_size": 16, "num_hidden_groups": 4}),
    ("AlbertForSequenceClassification", transformers.AlbertConfig, {"embedding_size": 16, "num_labels": 2}),
    ("AlbertForTokenClassification", transformers.AlbertConfig, {"embedding_size": 16, "num_labels": 4}),
    ("ElectraModel", transformers.ElectraConfig, {"embedding_size": 16}),
    ("ElectraForPreTraining", transformers.ElectraConfig, {"embedding_size": 16}),
    ("ElectraForMaskedLM", transformers.ElectraConfig, {"embedding_size": 16}),
    ("ElectraForMaskedLM", transformers.ElectraConfig, {"embedding_size": 32}),
    ("ElectraForSequenceClassification", transformers.ElectraConfig, {"embedding_size": 16, "num_labels": 3}),
    ("ElectraForTokenClassification", transformers.ElectraConfig, {"embedding_size": 16, "num_labels": 3}),
]


def _inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 99, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0  # padding in one row
    mask[2, 4:] = 0
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, 5:] = 1
    return ids, mask, types


def _hf_outputs(m, ids, mask, types):
    out = m(input_ids=ids, attention_mask=mask, token_type_ids=types)
    if hasattr(out, "prediction_logits"):
        return [out.prediction_logits, out.seq_relationship_logits if hasattr(out, "seq_relationship_logits")
                else out.sop_logits]
    if hasattr(out, "logits"):
        return [out.logits]
    return [out.last_hidden_state] + ([out.pooler_output] if getattr(out, "pooler_output", None) is not None else [])


def _our_outputs(m, ids, mask, types):
    out = m(ids, mask, types)
    if hasattr(out, "sentence_logits"):
        return [out.logits] + ([out.sentence_logits] if out.sentence_logits is not None else [])
    if hasattr(out, "hidden"):
        return [out.hidden] + ([out.pooled] if out.pooled is not None else [])
    return [out]


def _close(ours, theirs, mask):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if a.dim() == 3 or (a.dim() == 2 and a.shape == mask.shape):  # per-token: compare real tokens
            a, b = a[mask.bool()], b[mask.bool()]
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch,config_cls,extra", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_import_export_parity(arch, config_cls, extra, tmp_path):
    torch.manual_seed(0)
    ref = getattr(transformers, arch)(config_cls(**COMMON, **extra)).eval()
    ref.save_pretrained(tmp_path / "hf")
    ids, mask, types = _inputs()
    with torch.no_grad():
        expected = _hf_outputs(ref, ids, mask, types)

    ours = checkpoint.load_model(tmp_path / "hf").eval()  # import
    assert ours.config.head == hf._HEAD_OF_ARCH[arch][1]
    with torch.no_grad():
        _close(_our_outputs(ours, ids, mask, types), expected, mask)

    checkpoint.save_model(ours, tmp_path / "ours")  # export: our checkpoint is a transformers dir
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["architectures"] == [arch]
    back = getattr(transformers, arch).from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        _close(_hf_outputs(back, ids, mask, types), expected, mask)

    # state-dict round trip: exact, same names and shapes as transformers' own
    ref_sd, back_sd = ref.state_dict(), back.state_dict()
    assert set(ref_sd) == set(back_sd)
    for k in ref_sd:
        assert torch.equal(ref_sd[k], back_sd[k]), k
    reloaded = checkpoint.load_model(tmp_path / "ours")
    for k, v in ours.state_dict().items():
        assert torch.equal(v, reloaded.state_dict()[k]), k


def test_key_map_counts_and_shapes():
    cfg = hf.config_from_hf({"model_type": "albert", "architectures": ["AlbertForPreTraining"], **COMMON,
                             "embedding_size": 16, "num_hidden_groups": 2})
    model = build_model(cfg)
    out = hf.to_hf_state_dict(model.state_dict(), cfg)
    ref = transformers.AlbertForPreTraining(transformers.AlbertConfig(**COMMON, embedding_size=16,
                                                                      num_hidden_groups=2)).state_dict()
    tied = set(hf._tied_hf_keys(cfg, "albert."))  # transformers re-ties these on load
    assert tied == {"predictions.decoder.weight", "predictions.decoder.bias"}
    assert set(out) | tied == set(ref)
    # embeddings 7, pooler 2, 2 groups x 16 layer tensors, MLM head 5, SOP head 2
    assert len(out) == 7 + 2 + 2 * 16 + 5 + 2
    assert all(tuple(out[k].shape) == tuple(ref[k].shape) for k in out)


def test_pickle_weights_refused(tmp_path):
    m = transformers.BertModel(transformers.BertConfig(**COMMON))
    m.save_pretrained(tmp_path, safe_serialization=False)
    if (tmp_path / "model.safetensors").exists():
        (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").touch()
    with pytest.raises(checkpoint.CheckpointError, match="never unpickled"):
        checkpoint.load_model(tmp_path)
