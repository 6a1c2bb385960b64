"""Every recipe in recipes/ parses, resolves and builds; every objective and ablation trains from its
recipe through the command line (`encoderlab pretrain RECIPE key=value ...`, in-process) for two
steps on synthetic batches. Base/large recipes are only built on the meta device (too big here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from encoderlab.cli import main
from encoderlab.config import ConfigError
from encoderlab.objectives import build_networks, with_defaults
from encoderlab.train import PretrainConfig
from encoderlab.train.config import InitConfig, ModelSpec
from encoderlab.train.init import resolve_model
from tests.pretrain_helpers import read_metrics

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))
BIG = ("-base", "-large")


def test_the_recipe_set_is_complete():
    names = {p.stem for p in RECIPES}
    for n in ("bert-tiny", "bert-mini", "bert-small", "bert-base", "albert-tiny", "albert-base", "albert-large",
              "electra-tiny", "electra-small", "electra-base", "electra-small-15pct", "electra-small-replace-mlm",
              "electra-small-all-tokens-mlm", "electra-small-two-stage"):
        assert n in names


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_resolves_and_builds(recipe):
    cfg = PretrainConfig.from_yaml(recipe)
    model_cfg = resolve_model(cfg.model, cfg.init, 30522)
    with torch.device("meta"):
        nets = build_networks(model_cfg, with_defaults(cfg.objective, 103, (0, 100, 101, 102, 103)))
    assert sum(p.numel() for p in nets.parameters()) > 0


@pytest.mark.parametrize("recipe", [p for p in RECIPES if not p.stem.endswith(BIG)], ids=lambda p: p.stem)
def test_recipe_trains_from_the_command_line(recipe, tmp_path):
    torch.set_num_threads(1)
    # A recipe's short-sequence warm-up runs its first step at length 8 (then 16), so both phases run.
    has_warmup = PretrainConfig.from_yaml(recipe).data.short_seq_steps > 0
    warmup = ["data.short_seq_len=8", "data.short_seq_steps=1"] if has_warmup else []
    code = main(["pretrain", str(recipe), "data.kind=synthetic", "data.batch_size=2", "data.seq_len=16", *warmup,
                 "data.eval_batches=1", "trainer.max_steps=2", "trainer.log_every=1", "trainer.checkpoint_every=0",
                 "objective.two_stage_generator_steps=0" if "two-stage" not in recipe.stem else
                 "objective.two_stage_generator_steps=1", f"trainer.run_dir={tmp_path}", "trainer.progress=false"])
    assert code == 0
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2] and all(r["loss"] == r["loss"] for r in rows)
    assert (tmp_path / "checkpoints" / "step-000002").is_dir() and (tmp_path / "config.yaml").exists()


def test_depth_options_reach_both_networks_and_the_generator_alone():
    """model.num_layers deepens every network; model.generator_layers then sets an ELECTRA generator's
    depth alone (its width stays the preset's fraction); a model with no generator refuses it."""
    spec = ModelSpec(preset="electra-tiny", num_layers=4, generator_layers=2)
    mc = resolve_model(spec, InitConfig(), 8192)
    assert (mc.encoder.num_layers, mc.generator.num_layers) == (4, 2)
    assert (mc.encoder.hidden_size, mc.generator.hidden_size) == (128, 32)
    assert resolve_model(ModelSpec(preset="bert-tiny", num_layers=3), InitConfig(), 8192).encoder.num_layers == 3
    with pytest.raises(ConfigError, match="generator_layers: the bert model has no generator"):
        resolve_model(ModelSpec(preset="bert-tiny", generator_layers=1), InitConfig(), 8192)
    with pytest.raises(ConfigError, match="model.num_layers must be >= 1"):
        ModelSpec(preset="bert-tiny", num_layers=0)
    deep = PretrainConfig.from_yaml(RECIPES[0].parent / "electra-tiny-deep.yaml")
    mc = resolve_model(deep.model, deep.init, 8192)
    assert (mc.encoder.num_layers, mc.generator.num_layers, mc.generator.hidden_size) == (4, 2, 32)
