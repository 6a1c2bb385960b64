"""Property tests: damaged checkpoint directories (ours and transformers') and over-long inputs.

Properties: a damaged directory either loads the same weights (the damage touched nothing that is
read) or is refused with a CheckpointError naming the directory; nothing else escapes. A sequence
longer than the model's positions is cut at the position limit at fine-tuning and inference.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from eval_helpers import tiny_checkpoint
from hypothesis import given
from hypothesis import strategies as st

from encoderlab.checkpoint import CheckpointError, export_hf, load_model

FILES = ["encoderlab.yaml", "model.safetensors", "config.json", "vocab.txt"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """An encoderlab checkpoint and a plain transformers directory of the same tiny BERT."""
    root = tmp_path_factory.mktemp("ck")
    ours = tiny_checkpoint(root)
    theirs = root / "hf"
    export_hf(load_model(ours), theirs, tokenizer_dir=ours)
    return {"ours": ours, "hf": theirs}


def _damaged_copy(src: Path, d: str, name: str) -> Path:
    ck = Path(d) / "ck"
    shutil.copytree(src, ck)
    return ck


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Every tensor loaded equals the saved one. (Without encoderlab.yaml our directory is read as
    transformers reads it: BertForMaskedLM has no pooler, so the saved pooler is not loaded.)"""
    sa, sb = a.state_dict(), b.state_dict()
    return set(sa) <= set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@given(kind=st.sampled_from(["ours", "hf"]), name=st.sampled_from(FILES),
       damage=st.sampled_from(["flip", "truncate", "delete", "garbage"]), where=st.floats(0, 1),
       garbage=st.binary(max_size=200))
def test_damaged_checkpoint_loads_the_same_weights_or_is_refused_by_name(checkpoints, kind, name, damage, where,
                                                                        garbage):
    src = checkpoints[kind]
    reference = load_model(src)
    with tempfile.TemporaryDirectory() as d:
        ck = _damaged_copy(src, d, name)
        f = ck / name
        if not f.exists():
            return
        data = f.read_bytes()
        at = min(int(where * len(data)), len(data) - 1)
        if damage == "flip":
            f.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:])
        elif damage == "truncate":
            f.write_bytes(data[:at])
        elif damage == "delete":
            f.unlink()
        else:
            f.write_bytes(garbage)
        try:
            model = load_model(ck)
        except CheckpointError as e:
            assert str(ck) in str(e), str(e)
        else:  # accepted: then it must be exactly the model that was saved
            if kind == "hf" and name == "model.safetensors" and damage == "flip":
                return  # a transformers directory has no checksums: a flipped bit in a tensor is undetectable
            assert _same_weights(model, reference), f"{damage} of {name} loaded different weights"


CONFIG_CHANGES = st.sampled_from([
    ("hidden_size", 48), ("hidden_size", "32"), ("num_hidden_layers", 3), ("vocab_size", 7), ("num_attention_heads", 5),
    ("intermediate_size", None), ("max_position_embeddings", 16), ("model_type", "gpt2"), ("architectures", "Bert"),
    ("architectures", ["BertForMaskedLM", "x"]), ("hidden_act", "swishy"), ("type_vocab_size", -1),
    ("layer_norm_eps", "tiny"), ("num_hidden_layers", 10**9), ("hidden_size", 10**7)])


@given(changes=st.lists(CONFIG_CHANGES, min_size=1, max_size=3), drop=st.sampled_from([None, "vocab_size",
                                                                                       "num_hidden_layers"]))
def test_config_json_with_wrong_shapes_or_missing_keys_is_refused_by_name(checkpoints, changes, drop):
    with tempfile.TemporaryDirectory() as d:
        ck = _damaged_copy(checkpoints["hf"], d, "config.json")
        cfg = json.loads((ck / "config.json").read_text())
        for key, value in changes:
            cfg[key] = value
        if drop:
            cfg.pop(drop)
        (ck / "config.json").write_text(json.dumps(cfg))
        try:
            model = load_model(ck)
        except CheckpointError as e:
            assert str(ck) in str(e), str(e)
        else:  # only changes that do not alter any weight's shape can load
            assert _same_weights(model, load_model(checkpoints["hf"]))


def test_pickled_weights_are_refused_with_the_way_out(checkpoints, tmp_path):
    ck = shutil.copytree(checkpoints["hf"], tmp_path / "ck")
    (ck / "model.safetensors").rename(ck / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="never unpickled.*safe_serialization"):
        load_model(ck)


# ---- sequences longer than the model's positions -----------------------------------------------------------
def test_too_long_inputs_are_cut_at_the_position_limit_in_finetuning_and_inference(checkpoints, tmp_path):
    from encoderlab.data.tokenizer import load_tokenizer
    from encoderlab.eval.config import FinetuneConfig
    from encoderlab.eval.finetune import finetune
    from encoderlab.eval.intrinsic import detect_replaced, fill_mask

    limit = load_model(checkpoints["ours"]).encoder.config.max_position_embeddings  # 64
    long_text = " ".join(["the cat sat on the mat"] * 60)  # ~360 tokens
    d = tmp_path / "task"
    d.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (d / name).write_text("sentence\tlabel\n" + "".join(f"{long_text}\t{i % 2}\n" for i in range(8)))
    (d / "task.yaml").write_text("name: long\ntext_a: sentence\nlabel: label\nlabels: ['0', '1']\ndata_dir: .\n")
    # 512 asked for, 64 positions: a longer input would index past the position table and crash
    said = []
    result = finetune(checkpoints["ours"], str(d / "task.yaml"), FinetuneConfig(epochs=1, max_length=512,
                                                                                batch_size=4), seeds=1,
                      log=said.append)
    assert 0 <= result["seeds"][0]["scores"]["acc"] <= 1 and result["seeds"][0]["steps"] == 2
    assert any(f"max_length 512 capped at the model's {limit} positions" in line for line in said), said
    tok = load_tokenizer(checkpoints["ours"])
    enc = tok.encode_input(long_text, max_length=limit)
    assert len(enc.ids) == limit
    mlm = load_model(checkpoints["ours"])
    top = fill_mask(mlm, tok, "[MASK] " + long_text)  # the mask within the limit: filled
    assert len(top) == 1 and top[0]
    with pytest.raises(ValueError, match="no \\[MASK\\]"):  # the mask cut off: said, not a crash
        fill_mask(mlm, tok, long_text + " [MASK]")
    with pytest.raises(ValueError):  # a BERT checkpoint has no discriminator: refused by name
        detect_replaced(mlm, tok, long_text)
