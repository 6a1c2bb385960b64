"""The pairs module's contract: which network a model deploys, embedding sharing written once for
both pair kinds, and state-dict names unchanged (the checkpoint format depends on them)."""

from __future__ import annotations

import pytest
import torch

from encoderlab.models.build import build_model, unshare
from encoderlab.models.config import ModelConfig
from encoderlab.models.networks import Discriminator, MaskedLM
from encoderlab.models.pairs import SHARED_TABLES, ElectraPair, GDESEmbedding, MLMPair, deployed
from tests.conftest import tiny_encoder


def _electra(sharing: str = "shared") -> ModelConfig:
    return ModelConfig(family="electra", head="electra", encoder=tiny_encoder(),
                       generator=tiny_encoder(hidden_size=16, num_heads=2, intermediate_size=32, embedding_size=32),
                       embedding_sharing=sharing)


def test_deployed_is_the_main_network_of_a_pair_and_the_network_itself_otherwise():
    electra = ElectraPair(_electra())
    assert deployed(electra) is electra.discriminator and isinstance(electra.discriminator, Discriminator)
    ablation = MLMPair(_electra())
    assert deployed(ablation) is ablation.mlm and isinstance(ablation.mlm, MaskedLM)
    for head in ("mlm", "encoder", "discriminator", "sequence_classification"):
        net = build_model(ModelConfig(family="bert", head=head, encoder=tiny_encoder(), num_labels=2))
        assert deployed(net) is net


def test_state_dict_names_are_the_checkpoint_prefixes():
    assert {k.split(".")[0] for k in ElectraPair(_electra()).state_dict()} == {"generator", "discriminator"}
    assert {k.split(".")[0] for k in MLMPair(_electra()).state_dict()} == {"generator", "mlm"}
    gdes = ElectraPair(_electra("gdes")).state_dict()
    assert "discriminator.encoder.embeddings.word_embeddings.delta" in gdes
    assert "discriminator.encoder.embeddings.word_embeddings.weight" not in gdes  # the generator's, saved once


@pytest.mark.parametrize("kind", [ElectraPair, MLMPair])
def test_both_pair_kinds_share_the_same_tables_the_same_way(kind):
    pair = kind(_electra("shared"))
    g, d = pair.generator.encoder.embeddings, pair.main.encoder.embeddings
    for name in SHARED_TABLES:
        assert getattr(d, name) is getattr(g, name)
    if kind is MLMPair:  # its output layer follows its (shared) input table
        assert pair.mlm.mlm_head.decoder_weight is g.word_embeddings.weight
    apart = kind(_electra("none"))
    assert apart.main.encoder.embeddings.word_embeddings is not apart.generator.encoder.embeddings.word_embeddings


@pytest.mark.parametrize("kind", [ElectraPair, MLMPair])
def test_gdes_wraps_every_table_and_the_main_loss_reaches_only_the_deltas(kind):
    """gdes for both pair kinds: the main network's tables are stopgrad(generator's) + delta, so a
    loss on the main network alone (an MLM ablation's MLM: through its tied output layer too)
    moves the deltas and leaves the generator's tables to the generator's own loss."""
    pair = kind(_electra("gdes"))
    for name in SHARED_TABLES:
        t = getattr(pair.main.encoder.embeddings, name)
        assert isinstance(t, GDESEmbedding) and t.source[0] is getattr(pair.generator.encoder.embeddings, name)
    ids = torch.randint(5, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    out = pair.main(ids)
    (out.logits if kind is MLMPair else out).float().pow(2).mean().backward()
    g = pair.generator.encoder.embeddings
    assert g.word_embeddings.weight.grad is None and g.position_embeddings.weight.grad is None
    assert pair.main.encoder.embeddings.word_embeddings.delta.grad.abs().sum() > 0
    if kind is MLMPair:  # the output layer reads E_G + delta, live
        with torch.no_grad():
            pair.mlm.encoder.embeddings.word_embeddings.delta.add_(1.0)
        torch.testing.assert_close(pair.mlm.mlm_head.decoder_weight, g.word_embeddings.weight + 1.0)


@pytest.mark.parametrize("kind", [ElectraPair, MLMPair])
def test_unshare_of_a_gdes_pair_keeps_its_deltas_and_outputs(kind):
    """Unsharing a gdes pair (convert --unshare) keeps each table's link to the generator and its
    trained delta: the outputs are unchanged."""
    cfg = _electra("gdes")
    cfg = ModelConfig(family="electra", head="electra", encoder=tiny_encoder(num_layers=4, sharing="all"),
                      generator=cfg.generator, embedding_sharing="gdes")
    pair = kind(cfg).eval()
    with torch.no_grad():
        pair.main.encoder.embeddings.word_embeddings.delta.normal_()
    ids = torch.randint(5, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    before = pair.main(ids)
    unshare(pair)
    after = pair.main(ids)
    torch.testing.assert_close(after.logits if kind is MLMPair else after,
                               before.logits if kind is MLMPair else before, atol=0, rtol=0)
    t = pair.main.encoder.embeddings.word_embeddings
    assert isinstance(t, GDESEmbedding) and t.source[0] is pair.generator.encoder.embeddings.word_embeddings
    assert t.delta.abs().sum() > 0


def test_unshare_of_an_mlm_pair_keeps_outputs_and_sharing():
    cfg = _electra("shared")
    cfg = ModelConfig(family="electra", head="electra", encoder=tiny_encoder(num_layers=4, sharing="all"),
                      generator=cfg.generator, embedding_sharing="shared")
    pair = MLMPair(cfg).eval()
    ids = torch.randint(5, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    before = pair.mlm(ids).logits
    unshare(pair)
    torch.testing.assert_close(pair.mlm(ids).logits, before, atol=0, rtol=0)
    assert pair.mlm.encoder.embeddings.word_embeddings is pair.generator.encoder.embeddings.word_embeddings



def _perturbed(pair):
    with torch.no_grad():
        for p in pair.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return pair


@pytest.mark.parametrize("kind", [ElectraPair, MLMPair])
def test_a_pair_saves_and_restores_itself_under_the_names_checkpoints_already_use(kind):
    """networks/network_states/extra_state/load_networks: what checkpoint.py and train/state.py call
    for either kind; the extra-state names are those of extra.safetensors (ELECTRA) and of the
    trainer state (the MLM ablations), so checkpoints written before still load."""
    torch.manual_seed(0)
    args = {"copy_gate": True} if kind is MLMPair else {}
    src = _perturbed(kind(_electra("gdes"), **args))
    assert list(src.networks()) == ["generator", kind.MAIN]
    extra = src.extra_state()
    deltas = {kind.DELTA.format(n) for n in SHARED_TABLES}
    expected = {"discriminator.word_embeddings.delta"} if kind is ElectraPair else {"mlm_gdes.word_embeddings"}
    assert expected <= set(extra) and set(extra) - {"copy_gate.weight", "copy_gate.bias"} <= deltas
    if kind is MLMPair:
        assert {"copy_gate.weight", "copy_gate.bias"} <= set(extra)
    states = src.network_states()
    assert not any(k.endswith(".delta") for s in states.values() for k in s)  # plain tables, as transformers has
    dst = kind(_electra("gdes"), **args)
    dst.load_networks(states, extra)
    for k, v in src.state_dict().items():
        assert torch.equal(v, dst.state_dict()[k]), k  # each delta exactly, not E_G + delta - E_G
