"""Tiny pretraining recipes on synthetic data for the objective and trainer tests."""

from __future__ import annotations

import json
from pathlib import Path

from encoderlab.data.masking import MaskingConfig
from encoderlab.models.config import ModelConfig
from encoderlab.models.presets import generator_config
from encoderlab.objectives import ObjectiveConfig
from encoderlab.train import DataConfig, ModelSpec, OptimizerConfig, PretrainConfig, SyntheticConfig, TrainerConfig
from tests.conftest import tiny_encoder


def tiny_model(family: str, **kw) -> ModelConfig:
    if family == "bert":
        return ModelConfig(family="bert", head=kw.pop("head", "pretraining"), encoder=tiny_encoder(**kw))
    if family == "albert":
        enc = tiny_encoder(embedding_size=16, sharing="all", num_groups=1, hidden_act="gelu_new")
        return ModelConfig(family="albert", head="pretraining", encoder=enc)
    enc = tiny_encoder(pooler=False)
    return ModelConfig(family="electra", head="electra", encoder=enc,
                       generator=generator_config(enc, kw.pop("multiplier", 0.5)), **kw)


def objective_cases(two_stage_steps: int) -> dict[str, tuple]:
    """name -> (model factory, objective fields, sentence pairs?): every family and ablation once."""
    return {
        "bert-nsp": (lambda: tiny_model("bert"), dict(kind="mlm"), True),
        "bert-proposal": (lambda: tiny_model("bert", head="mlm"),
                          dict(kind="mlm", masking=MaskingConfig(scheme="proposal")), False),
        "albert-sop": (lambda: tiny_model("albert"), dict(kind="mlm", sentence_loss=True), True),
        "electra": (lambda: tiny_model("electra"), dict(kind="rtd"), False),
        "electra-gdes": (lambda: tiny_model("electra", embedding_sharing="gdes"), dict(kind="rtd"), False),
        "electra-15pct": (lambda: tiny_model("electra"), dict(kind="rtd", disc_positions="masked"), False),
        "replace-mlm": (lambda: tiny_model("electra"), dict(kind="rtd", variant="replace_mlm"), False),
        "replace-mlm-gdes": (lambda: tiny_model("electra", embedding_sharing="gdes"),
                             dict(kind="rtd", variant="replace_mlm"), False),
        "all-tokens-mlm": (lambda: tiny_model("electra"), dict(kind="rtd", variant="all_tokens_mlm"), False),
        "all-tokens-mlm-copy": (lambda: tiny_model("electra", embedding_sharing="gdes"),
                                dict(kind="rtd", variant="all_tokens_mlm", copy_mechanism=True), False),
        "two-stage": (lambda: tiny_model("electra", multiplier=1.0), dict(
            kind="rtd", two_stage_generator_steps=two_stage_steps, two_stage_init_discriminator=True), False),
    }


def tiny_recipe(run_dir, model: ModelConfig, objective: dict, *, steps=100, lr=3e-3, pairs=False,
                repeat_one=False, **trainer) -> PretrainConfig:
    t = dict(run_dir=str(run_dir), max_steps=steps, log_every=10, checkpoint_every=0, precision="fp32", progress=False)
    t.update(trainer)
    return PretrainConfig(
        model=ModelSpec(config=model), objective=ObjectiveConfig(**objective),
        optimizer=OptimizerConfig(lr=lr, warmup_steps=5),
        data=DataConfig(kind="synthetic", batch_size=8, seq_len=16, eval_batches=2,
                        synthetic=SyntheticConfig(pairs=pairs, repeat_one=repeat_one)),
        trainer=TrainerConfig(**t))


def read_metrics(run_dir, split="train") -> list[dict]:
    """The last record per step (a resumed run appends)."""
    by_step = {}
    text = (Path(run_dir) / "metrics.jsonl").read_text()
    lines = text.split("\n")[:-1]  # complete lines only: the run may be half-way through writing one
    for line in lines:
        rec = json.loads(line)
        if rec["split"] == split:
            by_step[rec["step"]] = rec
    return [by_step[s] for s in sorted(by_step)]
