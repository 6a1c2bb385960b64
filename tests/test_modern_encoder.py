"""Modern encoder options of the one core: rotary positions, gated feed-forward, bias-free layers,
no double norm at layer 0 — parity with transformers' ModernBERT on the matching subset, and the
properties that define them."""

from __future__ import annotations

import pytest
import torch

from encoderlab.config import ConfigError
from encoderlab.interop.hf import ExportError, check_exportable
from encoderlab.models.config import ModelConfig
from encoderlab.models.presets import count_encoder_parameters
from encoderlab.nn.config import EncoderConfig
from encoderlab.nn.encoder import Encoder, Rotary, apply_rotary
from tests.conftest import tiny_encoder

MODERN = dict(norm="pre", position="rope", gated_ffn=True, bias=False, first_attention_norm=False)


def _ids(B=3, T=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 99, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    return ids, mask


def test_rotary_scores_depend_only_on_offset():
    torch.manual_seed(0)
    D = 16
    rot = Rotary(D, 10000.0)
    q, k = torch.randn(D), torch.randn(D)

    def score(i, j):
        cq, sq = rot(torch.tensor([i]))
        ck, sk = rot(torch.tensor([j]))
        return (apply_rotary(q[None], cq, sq) * apply_rotary(k[None], ck, sk)).sum()

    for i, j, shift in [(0, 3, 5), (7, 2, 100), (4, 4, 31)]:
        torch.testing.assert_close(score(i, j), score(i + shift, j + shift), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(score(0, 3), score(0, 4), atol=1e-3)  # but it does see the offset


def test_rope_encoder_is_shift_invariant_and_position_aware():
    """With no position table, the outputs for positions 0..T-1 and 7..T+6 are the same; reversing
    the tokens' order changes them (an absolute-free model still knows order)."""
    torch.manual_seed(0)
    enc = Encoder(tiny_encoder(position="rope")).eval()
    assert enc.embeddings.position_embeddings is None
    ids, mask = _ids()
    T = ids.shape[1]
    base = enc(ids, mask).hidden
    shifted = enc(ids, mask, position_ids=torch.arange(T) + 7).hidden
    torch.testing.assert_close(base[mask.bool()], shifted[mask.bool()], atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # sharper attention than at init (std 0.02: nearly uniform), so order shows
        for a in enc.attention:
            a.qkv.weight.mul_(30)
    flipped = enc(ids[0:1].flip(1)).hidden.flip(1)
    assert (enc(ids[0:1]).hidden - flipped).abs().max() > 0.05


@pytest.mark.parametrize("kw", [dict(position="rope"), dict(gated_ffn=True), dict(bias=False),
                                dict(norm="pre", first_attention_norm=False), MODERN,
                                dict(MODERN, sharing="all", num_groups=1, embedding_size=16),
                                dict(MODERN, type_vocab_size=0)])
def test_parameter_count_is_analytic(kw):
    cfg = tiny_encoder(**kw)
    assert sum(p.numel() for p in Encoder(cfg).parameters()) == count_encoder_parameters(cfg)


def test_bias_free_has_no_bias_in_layers():
    enc = Encoder(tiny_encoder(bias=False, norm="pre"))
    biases = [n for n, _ in enc.named_parameters() if n.endswith(".bias")]
    assert biases == ["pooler.bias"] or biases == [], biases  # the pooler is not a layer


def test_shared_first_norm_off_unshares_to_the_same_outputs():
    """ALBERT-style sharing: layer 0 skips the shared attention's norm at run time; unsharing gives
    layer 0 a module without one and the outputs stay identical."""
    torch.manual_seed(0)
    cfg = tiny_encoder(**dict(MODERN, sharing="all", num_groups=1, num_layers=3))
    enc = Encoder(cfg).eval()
    ids, mask = _ids()
    flat = enc.unshare().eval()
    assert flat.attention[0].layer_norm is None and flat.attention[1].layer_norm is not None
    torch.testing.assert_close(enc(ids, mask).hidden, flat(ids, mask).hidden)


def test_export_to_transformers_refuses_modern_options():
    for kw in (dict(position="rope"), dict(gated_ffn=True), dict(bias=False), dict(type_vocab_size=0)):
        cfg = ModelConfig(family="bert", head="mlm", encoder=tiny_encoder(**kw))
        with pytest.raises(ExportError, match=next(iter(kw))):
            check_exportable(cfg)


def test_rope_needs_even_head_dim():
    with pytest.raises(ConfigError, match="even head dim"):
        tiny_encoder(position="rope", hidden_size=36, num_heads=4)  # head dim 9


def test_modern_config_round_trips():
    cfg = tiny_encoder(**MODERN, rope_theta=160000.0)
    assert EncoderConfig.from_dict(cfg.to_dict()) == cfg


# ---- parity with transformers' ModernBERT ---------------------------------------------------------
def _modernbert_pair():
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "ModernBertModel"):
        pytest.skip(f"transformers {transformers.__version__} has no ModernBertModel")
    L, H, N, I, V = 3, 32, 4, 40, 99
    hf_cfg = transformers.ModernBertConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=N, intermediate_size=I,
        hidden_activation="gelu", max_position_embeddings=64, norm_eps=1e-5, pad_token_id=0,
        layer_types=["full_attention"] * L,  # the matching subset: global attention in every layer
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    )
    hf_cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    theirs = transformers.ModernBertModel(hf_cfg).eval()
    ours = Encoder(EncoderConfig(vocab_size=V, hidden_size=H, num_layers=L, num_heads=N, intermediate_size=I,
                                 max_position_embeddings=64, type_vocab_size=0, hidden_dropout=0.0,
                                 attention_dropout=0.0, layer_norm_eps=1e-5, pooler=False, rope_theta=160000.0,
                                 **MODERN)).eval()
    # The name map is the whole correspondence: one module each, nothing left over.
    names = {"embeddings.tok_embeddings": "embeddings.word_embeddings", "embeddings.norm": "embeddings.layer_norm",
             "final_norm": "final_norm"}
    for i in range(L):
        names |= {f"layers.{i}.attn.Wqkv": f"attention.{i}.qkv", f"layers.{i}.attn.Wo": f"attention.{i}.out",
                  f"layers.{i}.mlp_norm": f"ffn.{i}.layer_norm", f"layers.{i}.mlp.Wi": f"ffn.{i}.up",
                  f"layers.{i}.mlp.Wo": f"ffn.{i}.down"}
        if i:
            names[f"layers.{i}.attn_norm"] = f"attention.{i}.layer_norm"
    state = {}
    for k, v in theirs.state_dict().items():
        module, leaf = k.rsplit(".", 1)
        state[f"{names[module]}.{leaf}"] = v
    ours.load_state_dict(state, strict=True)
    return theirs, ours


def test_modernbert_parity():
    theirs, ours = _modernbert_pair()
    ids, mask = _ids(T=13)
    expected = theirs(input_ids=ids, attention_mask=mask).last_hidden_state
    got = ours(ids, mask).hidden
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=2e-5, rtol=2e-5)


def test_modern_pretraining_learns_on_synthetic_data(tmp_path):
    """A tiny BERT with the modern options set through the recipe's model fields (as a study
    variant sets them) overfits one batch, and its checkpoint records them."""
    from encoderlab.checkpoint import load_model
    from encoderlab.train import pretrain
    from tests.pretrain_helpers import read_metrics, tiny_model, tiny_recipe

    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), dict(kind="mlm"), steps=80, lr=1e-2,
                      repeat_one=True)
    cfg = cfg.replace(model=cfg.model.replace(norm="pre", position="rope", gated_ffn=True, bias=False))
    pretrain(cfg)
    losses = [r["loss"] for r in read_metrics(tmp_path)]
    assert losses[-1] < losses[0] - 0.5, losses
    enc = load_model(tmp_path / "checkpoints/step-000080").encoder.config
    assert (enc.position, enc.gated_ffn, enc.bias, enc.norm) == ("rope", True, False, "pre")


# ---- unpadded execution and packed sequences -------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, MODERN, dict(sharing="all", num_groups=1, embedding_size=16)])
def test_unpadded_equals_padded_outputs_and_gradients(kw):
    torch.manual_seed(0)
    padded = Encoder(tiny_encoder(**kw)).eval()
    unpadded = Encoder(tiny_encoder(unpad=True, **kw)).eval()
    unpadded.load_state_dict(padded.state_dict())
    ids, mask = _ids(B=4, T=12)
    mask[2, 3:] = 0
    real = mask.bool()
    outs = []
    for enc in (padded, unpadded):
        enc.zero_grad()
        h = enc(ids, mask).hidden
        (h[real] ** 2).sum().backward()
        outs.append((h[real].detach(), [p.grad for p in enc.parameters() if p.grad is not None]))
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-5, rtol=1e-5)
    for g0, g1 in zip(outs[0][1], outs[1][1], strict=True):
        torch.testing.assert_close(g0, g1, atol=1e-4, rtol=1e-4)


def test_restarting_positions():
    from encoderlab.nn.encoder import restarting_positions

    seq = torch.tensor([[0, 0, 0, 1, 1, 2], [5, 5, 5, 5, 5, 5]])
    assert restarting_positions(seq).tolist() == [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 5]]


@pytest.mark.parametrize("kw", [{}, MODERN, dict(MODERN, unpad=True)])
def test_packed_sequences_equal_separate_runs(kw):
    """Two sequences packed in one row, with sequence_ids, give each sequence's own outputs: no
    attention across them, positions restarting at each."""
    torch.manual_seed(0)
    enc = Encoder(tiny_encoder(**kw)).eval()
    a, b = torch.randint(5, 99, (1, 7)), torch.randint(5, 99, (1, 5))
    pad = torch.zeros(1, 3, dtype=torch.long)
    packed = torch.cat([a, b, pad], 1)  # (1, 15): two sequences and padding
    seq = torch.tensor([[0] * 7 + [1] * 5 + [2] * 3])
    mask = torch.tensor([[1] * 12 + [0] * 3])
    h = enc(packed, mask, sequence_ids=seq).hidden
    torch.testing.assert_close(h[0, :7], enc(a).hidden[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h[0, 7:12], enc(b).hidden[0], atol=1e-5, rtol=1e-5)


def test_a_query_by_key_mask_equals_the_padding_mask_it_spells_out():
    torch.manual_seed(0)
    enc = Encoder(tiny_encoder(**MODERN)).eval()
    ids, mask = _ids()
    visible = mask.bool()[:, None, :].expand(-1, ids.shape[1], -1)  # (B, T, T): every query sees the real keys
    torch.testing.assert_close(enc(ids, visible).hidden, enc(ids, mask).hidden)
