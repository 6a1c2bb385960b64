"""Budgets scale the recipe: a time or FLOPs budget that allows fewer steps than the recipe's
max_steps gets its warm-up and short-sequence steps scaled to them, said in the first log line; a
budget smaller than one step is refused; a step count that exceeds the budget is named (issue 34:
bert-tiny with max_time_s=300 did 389 steps, all at length 32, its learning rate peaking at 5e-5)."""

from __future__ import annotations

import pytest
import torch

from encoderlab.config import ConfigError
from encoderlab.objectives.base import with_defaults
from encoderlab.train import Trainer, pretrain
from encoderlab.train.budget import plan_budget
from encoderlab.train.flops import step_flops
from tests.pretrain_helpers import read_metrics, tiny_model, tiny_recipe

IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))


def _recipe(tmp_path, **trainer):
    """bert-tiny.yaml's shape in miniature: written for 100,000 steps, 2,000 of warm-up and 4,000 short."""
    cfg = tiny_recipe(tmp_path / "run", tiny_model("bert", head="mlm"), dict(kind="mlm", **IDS), steps=100_000,
                      lr=1e-2, log_every=5, **trainer)
    return cfg.replace(optimizer=cfg.optimizer.replace(warmup_steps=2000),
                       data=cfg.data.replace(short_seq_len=8, short_seq_steps=4000))


def _step_flops(cfg) -> float:
    ocfg = with_defaults(cfg.objective, 3, (0, 1, 2, 3, 4))
    B, T = cfg.data.batch_size, cfg.data.seq_len
    return step_flops(cfg.model.config, ocfg, B, T, round(0.15 * B * (T - 2))).total


def _plan(cfg, **kw):
    return plan_budget(cfg, cfg.model.config, with_defaults(cfg.objective, 3, (0, 1, 2, 3, 4)), **kw)


def test_a_flops_budget_scales_warmup_and_short_steps_and_the_run_uses_them(tmp_path, capsys):
    base = _recipe(tmp_path)
    cfg = base.replace(trainer=base.trainer.replace(max_flops=20.5 * _step_flops(base)))
    plan = _plan(cfg)
    assert (plan.binding, plan.steps, plan.scale) == ("trainer.max_flops", 20, 20 / 100_000)
    assert plan.changes == {"optimizer.warmup_steps": [2000, 1], "data.short_seq_steps": [4000, 1]}
    assert plan.warnings == []
    result = pretrain(cfg)
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("encoderlab pretrain: budget: trainer.max_flops binds at ~20 step(s)")
    assert "optimizer.warmup_steps 2,000 -> 1, data.short_seq_steps 4,000 -> 1" in first
    lrs = [r["lr"] for r in read_metrics(tmp_path / "run")]
    # Unscaled, the warm-up would still be at 20/2000 of the peak when the budget ends.
    assert max(lrs) > 0.5 * cfg.optimizer.lr and result.step >= 20


def test_a_time_budget_times_a_step_first_and_puts_everything_back(tmp_path):
    cfg = _recipe(tmp_path, max_time_s=60.0)
    trainer = Trainer(cfg)
    plan = trainer.budget
    assert plan.binding == "trainer.max_time_s" and plan.seconds_per_step > 0
    assert plan.steps == int(60.0 / plan.seconds_per_step) and plan.scale == plan.steps / 100_000
    assert trainer.cfg.optimizer.warmup_steps == plan.changes["optimizer.warmup_steps"][1]
    assert trainer.source.switch_at == plan.changes["data.short_seq_steps"][1]  # the data source's own switch
    # The timing steps left no trace: the weights and the random stream are those of a run without it.
    after_timing = torch.get_rng_state()
    untimed = Trainer(cfg.replace(trainer=cfg.trainer.replace(max_time_s=None, run_dir=str(tmp_path / "u"))))
    assert torch.equal(after_timing, torch.get_rng_state())
    assert all(torch.equal(a, b) for a, b in zip(trainer.model.state_dict().values(),
                                                 untimed.model.state_dict().values()))


@pytest.mark.parametrize("key, value, match", [
    ("max_flops", 1e3, r"trainer\.max_flops=1e\+03 is less than one step"),
    ("max_tokens", 10, r"trainer\.max_tokens=10 is less than one step \(128 tokens"),
])
def test_a_budget_smaller_than_one_step_is_refused(tmp_path, key, value, match):
    cfg = _recipe(tmp_path)
    with pytest.raises(ConfigError, match=match):
        pretrain(cfg.replace(trainer=cfg.trainer.replace(**{key: value})))
    assert not (tmp_path / "run").exists()  # refused before anything was written
    with pytest.raises(ConfigError, match=r"trainer\.max_time_s=0\.1 is less than one step \(0\.5 s"):
        _plan(cfg.replace(trainer=cfg.trainer.replace(max_time_s=0.1)), seconds_per_step=lambda: 0.5)


def test_fixed_steps_beyond_the_budget_are_named_and_kept_without_max_steps(tmp_path):
    base = _recipe(tmp_path)
    cfg = base.replace(trainer=base.trainer.replace(max_steps=None, max_flops=30.5 * _step_flops(base),
                                                    eval_every=5000))
    plan = _plan(cfg)
    assert plan.scale is None and plan.changes == {}  # no max_steps: the counts are the user's own
    assert plan.warnings == [
        "optimizer.warmup_steps=2,000 exceeds the ~30 steps trainer.max_flops allows: the learning rate never "
        "reaches optimizer.lr",
        "data.short_seq_steps=4,000 exceeds the ~30 steps trainer.max_flops allows: every step is at "
        "data.short_seq_len",
        "trainer.eval_every=5,000 exceeds the ~30 steps trainer.max_flops allows: held-out evaluation only at the end"]


def test_max_steps_alone_plans_nothing_and_a_resume_keeps_the_plan_it_started_with(tmp_path, monkeypatch):
    base = _recipe(tmp_path)
    plan = _plan(base)
    assert (plan.binding, plan.steps, plan.scale, plan.changes) == ("trainer.max_steps", 100_000, None, {})
    cfg = base.replace(trainer=base.trainer.replace(max_time_s=60.0, checkpoint_every=3, max_steps=6))
    first = Trainer(cfg)
    first.fit()
    import encoderlab.train.trainer as trainer_mod

    monkeypatch.setattr(trainer_mod, "plan_budget", lambda *a, **k: pytest.fail("re-planned on resume"))
    resumed = Trainer(cfg.replace(trainer=cfg.trainer.replace(max_steps=6)))
    assert resumed.budget == first.budget and resumed.step == 6
