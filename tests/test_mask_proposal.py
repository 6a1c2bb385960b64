"""The mask proposal (masking scheme "proposal"): unbiased importance-weighted loss, lower variance
when the proposal follows the loss, bounded weights, and a proposal that learns the hard tokens."""

from __future__ import annotations

import pytest
import torch

from encoderlab.config import ConfigError
from encoderlab.data.masking import MaskingConfig, mask_tokens, maskable_positions, proposal_inclusion
from encoderlab.objectives import Objective, ObjectiveConfig, build_objective
from encoderlab.objectives.proposal import MaskProposal
from encoderlab.train.flops import step_flops
from tests.pretrain_helpers import read_metrics, tiny_model, tiny_recipe

SPECIAL = (0, 1, 2, 3)
CFG = MaskingConfig(scheme="proposal", rate=0.15, proposal_uniform=0.3)


def _estimates(losses: torch.Tensor, scores: torch.Tensor, draws: int, seed: int = 0) -> torch.Tensor:
    """``draws`` Horvitz-Thompson estimates of the mean of ``losses`` (1, T) under the proposal."""
    ids = torch.arange(10, 10 + losses.shape[1]).repeat(draws, 1)  # (draws, T), nothing special
    maskable = maskable_positions(ids, SPECIAL)
    pi = proposal_inclusion(scores.expand_as(ids), maskable, CFG)
    _, labels = mask_tokens(ids, None, SPECIAL, 100, 3, CFG, torch.Generator().manual_seed(seed), inclusion=pi)
    chosen = labels != -100
    return (chosen * losses / pi).sum(1) / maskable.sum(1)  # (draws,)


def test_weighted_loss_is_unbiased_and_variance_falls_with_a_good_proposal():
    g = torch.Generator().manual_seed(0)
    T = 40
    losses = torch.rand(1, T, generator=g) ** 4 * 10  # skewed: a few hard tokens carry most of the loss
    truth = losses.mean()
    uniform = _estimates(losses, torch.ones(1, T), 20000)
    matched = _estimates(losses, losses, 20000, seed=1)  # scores proportional to the loss
    wrong = _estimates(losses, 1 / (losses + 0.1), 20000, seed=2)  # inverse: still unbiased, noisier
    for est in (uniform, matched, wrong):
        se = est.std() / len(est) ** 0.5
        assert abs(est.mean() - truth) < 4 * se, (est.mean(), truth, se)
    assert matched.var() < 0.6 * uniform.var(), (matched.var(), uniform.var())
    assert wrong.var() > uniform.var()


def test_inclusion_keeps_the_budget_and_bounds_the_weights():
    ids = torch.tensor([[1] + list(range(10, 40)) + [2, 0, 0]])  # [CLS] 30 tokens [SEP] pad pad
    maskable = maskable_positions(ids, SPECIAL)
    scores = torch.rand(ids.shape, generator=torch.Generator().manual_seed(0))
    pi = proposal_inclusion(scores, maskable, CFG)
    assert pi[~maskable].eq(0).all() and pi[maskable].gt(0).all()
    assert pi.sum().item() == pytest.approx(0.15 * 30, rel=1e-5)  # no clipping at these scores
    assert (CFG.rate / pi[maskable]).max() <= 1 / CFG.proposal_uniform + 1e-6
    assert proposal_inclusion(torch.ones_like(scores), maskable, CFG)[maskable].allclose(torch.tensor(0.15))


def test_config_errors():
    with pytest.raises(ConfigError, match="proposal_uniform"):
        MaskingConfig(scheme="proposal", proposal_uniform=0.0)
    with pytest.raises(ConfigError, match="kind: mlm"):
        ObjectiveConfig(kind="rtd", masking=MaskingConfig(scheme="proposal"))
    with pytest.raises(ValueError, match="inclusion"):
        ids = torch.tensor([[1, 10, 11, 2]])
        mask_tokens(ids, None, SPECIAL, 100, 3, CFG, torch.Generator())


def test_proposal_learns_which_tokens_are_hard():
    """Regressed on losses where token 7 is always hard and the others easy, the proposal scores
    token 7 highest, so it is masked more often."""
    prop = MaskProposal()
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        ids = torch.randint(5, 20, (8, 16), generator=g)
        positions = torch.arange(ids.numel())
        losses = torch.where(ids.reshape(-1) == 7, 5.0, 0.2)
        prop.scores(ids, 20)
        prop.update(ids, positions, losses)
    ids = torch.randint(5, 20, (4, 16), generator=g)
    s = prop.scores(ids, 20)
    assert s[ids == 7].min() > 3 * s[ids != 7].max()


def test_proposal_pretraining_runs_and_counts_its_flops(tmp_path):
    ocfg = dict(kind="mlm", masking=CFG, mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
    cfg = tiny_recipe(tmp_path, tiny_model("bert", head="mlm"), ocfg, steps=80, lr=1e-2, repeat_one=True)
    from encoderlab.train import pretrain

    result = pretrain(cfg)
    m = read_metrics(tmp_path)
    assert {"mlm_loss_weighted", "proposal_error", "proposal_max_weight"} <= set(m[-1])
    assert m[-1]["proposal_error"] < m[0]["proposal_error"]
    weighted = [r["mlm_loss_weighted"] for r in m]  # the unbiased estimate of the uniform-masking loss
    assert sum(weighted[-3:]) / 3 < sum(weighted[:3]) / 3 - 0.5, weighted
    uniform = ObjectiveConfig(**dict(ocfg, masking=MaskingConfig()))
    extra = (step_flops(cfg.model.config, cfg.objective, 8, 16, 20).total
             - step_flops(cfg.model.config, uniform, 8, 16, 20).total)
    assert extra == 4 * 2 * 8 * 16 * (3 * 32 * 32 + 32)  # scoring + regression fwd, its backward twice
    assert result.flops > 0


def test_every_objective_owns_its_state_through_one_interface():
    """The trainer calls state_dict / load_state_dict / on_step_start on any objective (no hasattr);
    the proposal's tensor names are the ones old checkpoints hold under "objective."."""
    for kind in ("mlm", "rtd", "clm", "gptbert", "clm_then_mlm"):
        obj = build_objective(ObjectiveConfig(kind=kind))
        assert isinstance(obj, Objective) and obj.state_dict() == {}
        obj.load_state_dict({}, torch.device("cpu"))
    obj = build_objective(ObjectiveConfig(kind="mlm", masking=CFG))
    assert obj.state_dict() == {}  # nothing proposed yet
    ids = torch.randint(5, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    obj.proposal.scores(ids, 100)
    obj.proposal.update(ids, torch.tensor([1, 4, 12]), torch.tensor([2.0, 3.0, 0.5]))
    saved = obj.state_dict()
    assert {"net.embed.weight", "net.conv.weight", "net.out.bias", "adam.0.exp_avg", "adam.0.step"} <= set(saved)
    fresh = build_objective(ObjectiveConfig(kind="mlm", masking=CFG))
    fresh.load_state_dict(saved, torch.device("cpu"))
    assert saved.keys() == fresh.state_dict().keys()
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in saved.items())
