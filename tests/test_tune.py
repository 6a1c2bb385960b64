"""The fine-tuning loop (encoderlab/tune/): it overfits one tiny batch, clips gradients, follows the
schedule, draws batches lazily, and its config round-trips. Tiny: the file runs in a second or two."""

import numpy as np
import pytest
import torch
from torch import nn

from encoderlab.config import ConfigError
from encoderlab.tune import TuneConfig, TuneLimits, TuneOptim, epochs, fit, tune_lr_scale
from encoderlab.tune.optim import warmup_steps


def _cfg(steps=60, **optim):
    return TuneConfig(optim=TuneOptim(**{"lr": 1e-2, "warmup": 0.1, **optim}), limits=TuneLimits(steps=steps))


def _mse(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def test_fit_overfits_one_tiny_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    losses = fit(model, epochs(lambda: [(x, y)]), _mse, _cfg(steps=200, lr=3e-2, weight_decay=0.0, grad_clip=0.0))
    assert len(losses) == 200 and all(isinstance(v, float) for v in losses)
    assert losses[-1] < 0.05 * losses[0], (losses[0], losses[-1])


def test_fit_clips_the_global_gradient_norm():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x, y = torch.randn(8, 4), 1e3 * torch.ones(8, 1)  # a huge loss: its gradient norm is far above 0.5
    norms = []  # read after the step: the clipped gradients are what the optimizer used
    cfg = _cfg(steps=1, grad_clip=0.5, schedule="constant", weight_decay=0.0)
    fit(model, [(x, y)], _mse, cfg, on_step=lambda s, ls: norms.append(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()))
    assert norms[0] == pytest.approx(0.5, rel=1e-5)
    unclipped = _cfg(steps=1, grad_clip=0.0, schedule="constant", weight_decay=0.0)
    norms.clear()
    fit(model, [(x, y)], _mse, unclipped, on_step=lambda s, ls: norms.append(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()))
    assert norms[0] > 100


def test_fit_follows_the_schedule_and_the_group_rates(monkeypatch):
    model = nn.Linear(2, 1)
    x, y = torch.randn(4, 2), torch.randn(4, 1)
    opt_lrs = []
    cfg = _cfg(steps=20, lr=1.0, warmup=0.25)  # 5 warm-up steps
    groups = [{"params": [model.weight], "lr": 0.5}, {"params": [model.bias]}]
    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        opt_lrs.append([g["lr"] for g in self.param_groups])
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    fit(model, epochs(lambda: [(x, y)]), _mse, cfg, groups=groups)
    lrs = [b for _, b in opt_lrs]
    assert warmup_steps(0.25, 20) == 5
    assert lrs[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])  # linear warm-up, the first step already > 0
    assert lrs[5:] == pytest.approx([(20 - s) / 15 for s in range(5, 20)])  # then linear decay towards 0
    assert [a for a, _ in opt_lrs] == pytest.approx([0.5 * v for v in lrs])  # a group's own rate is scaled
    assert [tune_lr_scale(s, 20, 5, "constant") for s in (0, 19)] == [1.0, 1.0]


def test_batches_are_drawn_lazily_one_per_step():
    rng = np.random.default_rng(0)
    drawn = []

    def one_epoch():
        order = rng.permutation(3)  # drawn when the epoch starts, as a hand-written loop draws it
        drawn.append(order)
        return [(torch.ones(1, 2), torch.zeros(1, 1))] * len(order)

    fit(nn.Linear(2, 1), epochs(one_epoch), _mse, _cfg(steps=6))
    assert len(drawn) == 2  # exactly two epochs of three: no third shuffle drawn
    with pytest.raises(ValueError, match="ran out after 2 of 6 steps"):
        fit(nn.Linear(2, 1), [(torch.ones(1, 2), torch.zeros(1, 1))] * 2, _mse, _cfg(steps=6))
    with pytest.raises(ValueError, match="ran out after 0"):
        fit(nn.Linear(2, 1), epochs(list), _mse, _cfg(steps=6))  # an empty epoch ends, rather than spins


def test_config_round_trip_and_errors():
    cfg = _cfg(steps=7, layer_decay=0.8)
    assert TuneConfig.from_dict(cfg.to_dict()) == cfg
    assert TuneConfig.from_yaml(cfg.to_yaml()) == cfg
    assert TuneLimits.of_epochs(2.5, 10, 4).steps == 8 and TuneLimits.of_epochs(3, 10, 4, max_steps=5).steps == 5
    with pytest.raises(ConfigError, match="warmup must be in"):
        TuneOptim(lr=1e-3, warmup=1.0)
    with pytest.raises(ConfigError, match="unknown key"):
        TuneConfig.from_dict({**cfg.to_dict(), "epochs": 3})
