"""The command line for presets and conversion, run in-process through encoderlab.cli.main."""

from __future__ import annotations

import pytest
import torch

from encoderlab import checkpoint
from encoderlab.cli import main
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from tests.conftest import tiny_encoder


def test_models_lists_every_preset(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("bert-base", "albert-xxlarge", "electra-small"):
        assert name in out
    assert "109.48M" in out  # bert-base, equal to transformers' BertModel


def test_convert_unshare_keeps_logits(tmp_path, capsys):
    cfg = ModelConfig(family="albert", head="pretraining",
                      encoder=tiny_encoder(num_layers=4, sharing="all", embedding_size=16))
    model = build_model(cfg).eval()
    checkpoint.save_model(model, tmp_path / "albert")
    assert main(["convert", "--unshare", str(tmp_path / "albert"), str(tmp_path / "free")]) == 0
    free = checkpoint.load_model(tmp_path / "free").eval()
    assert free.config.encoder.sharing == "none"
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(free(ids).logits, model(ids).logits, atol=0, rtol=0)
    assert "same outputs" in capsys.readouterr().out


def test_convert_from_and_to_hf(tmp_path):
    transformers = pytest.importorskip("transformers")
    ref = transformers.AlbertForMaskedLM(transformers.AlbertConfig(
        vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37)).eval()
    ref.save_pretrained(tmp_path / "hf")
    assert main(["convert", "--from-hf", str(tmp_path / "hf"), str(tmp_path / "ours")]) == 0
    assert (tmp_path / "ours" / "encoderlab.yaml").exists()
    assert main(["convert", "--to-hf", str(tmp_path / "ours"), str(tmp_path / "back")]) == 0
    assert not (tmp_path / "back" / "encoderlab.yaml").exists()
    back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, ref(ids).logits, atol=1e-5, rtol=1e-5)


def test_to_hf_unshares_partial_sharing_and_refuses_pre_ln(tmp_path, capsys):
    part = build_model(ModelConfig(family="albert", head="mlm",
                                   encoder=tiny_encoder(num_layers=4, sharing="ffn", embedding_size=16, pooler=False)))
    checkpoint.save_model(part, tmp_path / "part")
    assert main(["convert", "--to-hf", str(tmp_path / "part"), str(tmp_path / "part_hf")]) == 0
    assert "unshared" in capsys.readouterr().out
    pre = build_model(ModelConfig(family="bert", head="mlm", encoder=tiny_encoder(norm="pre")))
    checkpoint.save_model(pre, tmp_path / "pre")
    assert main(["convert", "--to-hf", str(tmp_path / "pre"), str(tmp_path / "pre_hf")]) == 1
    assert "pre-LN" in capsys.readouterr().err


def test_missing_input_is_a_clear_error(tmp_path, capsys):
    assert main(["convert", "--from-hf", str(tmp_path / "nope"), str(tmp_path / "out")]) == 1
    assert "does not exist" in capsys.readouterr().err
