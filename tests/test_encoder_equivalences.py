"""Invariants of the one encoder core: sharing equals tied unshared weights, unshare keeps outputs,
the sparse MLM head equals the dense head, padding does not change real tokens, GDES gradients."""

from __future__ import annotations

import pytest
import torch

from encoderlab.models.build import build_model, unshare
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import ElectraPair
from encoderlab.models.presets import generator_config
from encoderlab.nn import Encoder
from tests.conftest import tiny_encoder


def _ids(B=3, T=9, V=99, seed=0):
    return torch.randint(5, V, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("sharing,groups", [("all", 1), ("all", 2), ("attention", 1), ("ffn", 2)])
def test_shared_equals_unshared_with_tied_weights(sharing, groups):
    shared = Encoder(tiny_encoder(num_layers=4, sharing=sharing, num_groups=groups, embedding_size=16)).eval()
    plain = Encoder(tiny_encoder(num_layers=4, embedding_size=16)).eval()
    plain.embeddings.load_state_dict(shared.embeddings.state_dict())
    plain.pooler.load_state_dict(shared.pooler.state_dict())
    cfg = shared.config
    for i in range(4):  # tie by hand: layer i takes the module ALBERT's grouping assigns
        plain.attention[i].load_state_dict(shared.attention[cfg.attention_index(i)].state_dict())
        plain.ffn[i].load_state_dict(shared.ffn[cfg.ffn_index(i)].state_dict())
    ids = _ids()
    a, b = shared(ids), plain(ids)
    torch.testing.assert_close(a.hidden, b.hidden, atol=0, rtol=0)
    torch.testing.assert_close(a.pooled, b.pooled, atol=0, rtol=0)
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_shared < sum(p.numel() for p in plain.parameters())


def test_grouping_matches_albert():
    cfg = tiny_encoder(num_layers=6, sharing="all", num_groups=3)
    assert [cfg.attention_index(i) for i in range(6)] == [0, 0, 1, 1, 2, 2]
    assert [cfg.ffn_index(i) for i in range(6)] == [0, 0, 1, 1, 2, 2]
    cfg = tiny_encoder(num_layers=4, sharing="attention", num_groups=1)
    assert [cfg.attention_index(i) for i in range(4)] == [0, 0, 0, 0]
    assert [cfg.ffn_index(i) for i in range(4)] == [0, 1, 2, 3]


@pytest.mark.parametrize("head", ["pretraining", "sequence_classification"])
def test_unshare_keeps_outputs_and_frees_layers(head):
    cfg = ModelConfig(family="albert", head=head, encoder=tiny_encoder(num_layers=4, sharing="all", embedding_size=16))
    model = build_model(cfg).eval()
    ids = _ids()
    with torch.no_grad():
        before = model(ids)
    unshare(model)
    assert model.config.encoder.sharing == "none" and len(model.encoder.attention) == 4
    with torch.no_grad():
        after = model(ids)
    if head == "pretraining":
        torch.testing.assert_close(before.logits, after.logits, atol=0, rtol=0)
        torch.testing.assert_close(before.sentence_logits, after.sentence_logits, atol=0, rtol=0)
        assert model.mlm_head.decoder_weight is model.encoder.embeddings.word_embeddings.weight
    else:
        torch.testing.assert_close(before, after, atol=0, rtol=0)
    # the layers are now independent parameters
    ptrs = {model.encoder.attention[i].qkv.weight.data_ptr() for i in range(4)}
    assert len(ptrs) == 4


def test_sparse_mlm_head_equals_dense_head_at_masked_positions():
    model = build_model(ModelConfig(family="bert", head="mlm", encoder=tiny_encoder())).eval()
    ids = _ids()
    mask = torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.3
    with torch.no_grad():
        dense = model(ids).logits  # (B, T, V)
        sparse = model(ids, positions=mask).logits  # (M, V)
        flat = model(ids, positions=mask.reshape(-1).nonzero().squeeze(1)).logits
    torch.testing.assert_close(sparse, dense[mask], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(flat, sparse, atol=0, rtol=0)


def test_padding_does_not_change_real_tokens():
    enc = Encoder(tiny_encoder()).eval()
    ids = _ids(B=1, T=6)
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 6 + [0] * 4])
    with torch.no_grad():
        a = enc(ids).hidden
        b = enc(padded, attention_mask=mask).hidden[:, :6]
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_pre_norm_variant_is_a_different_function_and_gets_gradients():
    pre = Encoder(tiny_encoder(norm="pre"))
    post = Encoder(tiny_encoder())
    missing = post.load_state_dict(pre.state_dict(), strict=False)
    assert missing.unexpected_keys == ["final_norm.weight", "final_norm.bias"]
    ids = _ids()
    out = pre(ids).hidden
    assert not torch.allclose(out, post(ids).hidden)
    out.sum().backward()
    no_grad = [n for n, p in pre.named_parameters() if p.grad is None]
    assert no_grad == ["pooler.weight", "pooler.bias"]  # the pooler is not on this loss's path


def _pair(mode):
    d = tiny_encoder(embedding_size=16, pooler=False)
    cfg = ModelConfig(family="electra", head="electra", encoder=d, generator=generator_config(d, 0.5),
                      embedding_sharing=mode)
    return ElectraPair(cfg)


def test_embedding_sharing_modes():
    shared = _pair("shared")
    g, d = shared.generator.encoder.embeddings, shared.discriminator.encoder.embeddings
    assert d.word_embeddings is g.word_embeddings and d.position_embeddings is g.position_embeddings
    none = _pair("none")
    d_none, g_none = none.discriminator.encoder.embeddings, none.generator.encoder.embeddings
    assert d_none.word_embeddings is not g_none.word_embeddings
    n_none = sum(p.numel() for p in none.parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_none - n_shared == (99 + 64 + 2) * 16


@pytest.mark.parametrize("table", ["word_embeddings", "position_embeddings", "token_type_embeddings"])
def test_gdes_discriminator_loss_does_not_reach_generator_embeddings(table):
    pair = _pair("gdes")
    ids = _ids()
    pair.discriminator(ids, token_type_ids=(ids % 2)).sum().backward()
    g_table = getattr(pair.generator.encoder.embeddings, table).weight
    delta = getattr(pair.discriminator.encoder.embeddings, table).delta
    assert g_table.grad is None or torch.count_nonzero(g_table.grad) == 0
    assert delta.grad is not None and torch.count_nonzero(delta.grad) > 0
    # ...while the generator's own MLM loss does reach them
    pair.zero_grad()
    pair.generator(ids, token_type_ids=(ids % 2)).logits.sum().backward()
    assert torch.count_nonzero(g_table.grad) > 0
    # and E_D starts equal to E_G (delta is zero-initialised)
    torch.testing.assert_close(getattr(pair.discriminator.encoder.embeddings, table).weight, g_table.detach())
