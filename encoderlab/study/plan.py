"""The plan of a study: each variant's PretrainConfig, and the fine-tunings owed for each.

A variant's recipe is the study's base recipe with the variant's model and objective, the study's
token store, and a FLOPs budget; the budget becomes steps through the train side's own count
(train/flops.steps_for_budget), and the steps decide the warm-up, the short-sequence phase, and when
to log, evaluate and checkpoint. The variant's overrides come last. The child process that pretrains
a variant is given exactly this config, as YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from encoderlab.config import ConfigError
from encoderlab.data.store import TokenStore
from encoderlab.models.presets import preset
from encoderlab.models.spec import FAMILY_MODEL_FIELDS, ModelSpec
from encoderlab.objectives import build_networks
from encoderlab.objectives.base import with_defaults
from encoderlab.study.config import StudyConfig, TaskRef, VariantSpec, task_label
from encoderlab.study.results import Checkpoint, FinetuneKey
from encoderlab.study.stages import StageKey, fingerprint
from encoderlab.train.config import InitConfig, PretrainConfig
from encoderlab.train.flops import encoder_flops, steps_for_budget
from encoderlab.train.init import resolve_model


def plan(cfg: StudyConfig, data: dict, out: Path) -> dict[str, PretrainConfig]:
    """{run name: its PretrainConfig}: every variant's pretraining runs (run_name), in the study's order."""
    check_networks(cfg)
    names = {v.name for v in cfg.variants}
    recipes = {}
    for v in cfg.variants:
        for seed in range(cfg.pretrain_seeds):
            name = run_name(v.name, seed)
            if seed and name in names:
                raise ConfigError(f"variant {name!r}: the name of {v.name!r}'s run from pretraining seed {seed}")
            recipes[name] = variant_recipe(cfg, v, data, out / "runs" / name, seed=seed)
    return recipes


def run_name(variant: str, seed: int) -> str:
    """The name (stage key, run folder) of a variant's pretraining run from pretraining seed ``seed``:
    seed 0's is the variant's own, so a study written before pretraining seeds keeps its stages."""
    return variant if seed == 0 else f"{variant}@seed{seed}"


def check_networks(cfg: StudyConfig) -> None:
    """Build every variant's networks on the meta device (no memory, no time), so that a model and
    objective that do not go together stop the study before it starts, not when that variant's
    pretraining does, possibly an hour in."""
    import torch


    for v in cfg.variants:
        try:
            model_cfg = resolve_model(family_model(cfg.base.model, v.model), InitConfig(), cfg.vocab_size)
            with torch.device("meta"):
                build_networks(model_cfg, with_defaults(v.objective, 3, (0, 1, 2, 3)))
        except (ConfigError, ValueError) as e:
            raise ConfigError(f"variant {v.name!r}: {e}") from None


def variant_recipe(cfg: StudyConfig, v: VariantSpec, data: dict, run_dir: Path, *, seed: int = 0,
                   vocab_size: int | None = None) -> PretrainConfig:
    """The variant's recipe; pretraining seed ``seed`` > 0 adds to base's trainer.seed (initialisation,
    data order and the held-out masks), seed 0's is base's own. ``vocab_size``: in place of the token
    store's (the store not made yet: study/inputs.py checks every recipe before the data stage)."""

    base = cfg.base
    model = family_model(base.model, v.model)
    vocab = TokenStore(data["store"]).vocab_size if vocab_size is None else vocab_size
    model_cfg = resolve_model(model, InitConfig(), vocab)
    steps = steps_for_budget(model_cfg, v.objective, base.data.batch_size, base.data.seq_len, cfg.budget_flops)
    every = max(1, round(min(cfg.eval_fractions) * steps))
    try:
        recipe = base.replace(
            model=model, objective=v.objective,
            optimizer=base.optimizer.replace(warmup_steps=max(1, round(cfg.warmup_fraction * steps))),
            # Steps are counted at full length; the short ones cost a little less, so the warm-up's
            # share of the budget is slightly below short_seq_fraction, for every variant alike.
            data=base.data.replace(kind="store", path=data["store"], tokenizer_dir=data["tokenizer"],
                                   short_seq_steps=round(cfg.short_seq_fraction * steps)),
            trainer=base.trainer.replace(run_dir=str(run_dir), seed=base.trainer.seed + seed,
                                         max_flops=cfg.budget_flops, max_steps=None,
                                         max_tokens=None, max_time_s=None, log_every=max(1, every // 4),
                                         eval_every=every, checkpoint_every=every, keep_last=10_000,
                                         progress=False))
        return recipe.with_overrides(list(v.overrides)) if v.overrides else recipe
    except ConfigError as e:
        raise ConfigError(f"variant {v.name!r}: {e}") from None


def family_model(base: ModelSpec, variant: ModelSpec) -> ModelSpec:
    """The variant's model with the base's family-wide options filled in where it leaves them unset."""
    given = {f: getattr(base, f) for f in FAMILY_MODEL_FIELDS
             if getattr(base, f) is not None and getattr(variant, f) is None}
    return variant.replace(**given) if given else variant


def recipe_fingerprint(recipe: PretrainConfig) -> str:
    """The recipe's hash, unset (None) options left out: an option added to the configs later, unset,
    leaves a study's finished stages valid; any value that is set, default or not, is hashed."""
    return fingerprint(_set_only(recipe.to_dict()))


def _set_only(d):
    if isinstance(d, dict):
        return {k: _set_only(v) for k, v in d.items() if v is not None}
    return d


def per_family_settings(cfg: StudyConfig) -> dict[str, list[str]]:
    """The settings in which variants differ beyond model and objective (their overrides): the
    report lists them, since equal compute is only equal when everything else is."""
    return {v.name: list(v.overrides) for v in cfg.variants if v.overrides}


@dataclass(frozen=True)
class FinetuneUnit:
    """One checkpoint fine-tuned on one task with all the study's seeds: a stage of its own."""

    variant: str
    key: FinetuneKey
    checkpoint: str
    task: TaskRef
    fingerprint: str
    weight: float  # its share of the ETA (finetune_weight), against a pretraining's PRETRAIN_UNITS
    learning_rate: float | None = None  # chosen on held-out training data (finetune_lrs); None: the study's

    @property
    def stage(self) -> str:  # a name in stages.json, never read back
        return str(StageKey.finetune(self.variant, self.key.task, self.key.fraction, self.key.unshared))

    @property
    def label(self) -> str:
        return f"{self.variant}{' (unshared)' if self.key.unshared else ''} at {self.key.fraction:g} of the budget " \
               f"on {task_label(self.key.task)}"


def finetune_units(cfg: StudyConfig, v: VariantSpec, recipe: PretrainConfig,
                   checkpoints: dict[float, Checkpoint], run: str | None = None,
                   lrs: dict[str, float] | None = None) -> list[FinetuneUnit]:
    """A pretraining run's fine-tunings (``run``: its name, default the variant's seed-0 run): every task
    at every fine-tuning fraction, and for an unshare variant also its unshared copy at the last fraction."""
    rfp = recipe_fingerprint(recipe)
    weight = finetune_weight(cfg, recipe)
    ft = {k: x for k, x in cfg.finetune.to_dict().items() if k != "device"}  # a study may move between machines
    units = []
    for frac, task, unshared in finetune_grid(cfg, v):
        ck = checkpoints[frac].path
        lr = (lrs or {}).get(task.name)
        fp = fingerprint(rfp, ck, task.to_dict(), ft, cfg.seeds, unshared, *([lr] if lr is not None else []))
        units.append(FinetuneUnit(run or v.name, FinetuneKey(task.name, frac, unshared), ck, task, fp, weight, lr))
    return units


def finetune_grid(cfg: StudyConfig, v: VariantSpec):
    """A run's (fraction, task, unshared) fine-tunings: every task at every fine-tuning fraction, and
    for an unshare variant its unshared copy at the last fraction too."""
    for frac in finetune_fractions(cfg, v.name):
        for task in cfg.tasks:
            for unshared in [False] + ([True] if v.unshare and frac == max(cfg.finetune_fractions) else []):
                yield frac, task, unshared


def family_of(cfg: StudyConfig, recipe: PretrainConfig) -> str:
    """The model family and width of a variant's recipe ("bert-128", "electra-128"): the variants that
    share a chosen fine-tuning learning rate (the rate's scale follows the width as well as the family)."""

    m = resolve_model(recipe.model, recipe.init, cfg.vocab_size)
    return f"{m.family}-{m.encoder.hidden_size}"


def finetune_fractions(cfg: StudyConfig, variant: str) -> list[float]:
    """The fractions of the budget at which a variant's checkpoints are fine-tuned."""
    return sorted(set(cfg.finetune_fractions) | set(cfg.extra_finetune_fractions.get(variant, ())))


# A fine-tuning's share of the ETA, where a pretraining counts PRETRAIN_UNITS (10) at any budget: a
# pair costs a fixed share (data, tokenization, small batches and evaluation do not grow with the
# model) plus a share that grows with its encoder's FLOPs ratio to bert-tiny's; the two shares were
# measured in docs/studies/claims-rope-sentence (docs/studies.md, "The ETA's weights").
_FT_REF_UNITS, _FT_REF_BUDGET, _FT_REF_EXAMPLES = 2.6, 5e13, 5 * 3 * 4000
_FT_FIXED_SHARE = 0.74


def finetune_weight(cfg: StudyConfig, recipe: PretrainConfig) -> float:
    """The ETA weight of one of this recipe's checkpoint-task pairs (every seed). A task's size is
    unknown until it is read, so without max_train_examples it counts as 4,000 examples; the ETA's
    one overall rate then absorbs the difference as pairs finish, for the rest of the study too."""

    enc = resolve_model(recipe.model, recipe.init, cfg.vocab_size).encoder
    examples = cfg.seeds * (cfg.finetune.epochs or 3) * (cfg.finetune.max_train_examples or 4000)
    return _FT_REF_UNITS * pair_cost_share(enc) * examples / _FT_REF_EXAMPLES * _FT_REF_BUDGET / cfg.budget_flops


def pair_cost_share(encoder) -> float:
    """A fine-tuning pair's cost relative to one of bert-tiny's shape: the fixed share plus the share
    that grows with the encoder's FLOPs per example."""
    ratio = encoder_flops(encoder, 1, 128) / encoder_flops(preset("bert-tiny").encoder, 1, 128)
    return _FT_FIXED_SHARE + (1 - _FT_FIXED_SHARE) * ratio


def measure_weight(cfg: StudyConfig) -> float:
    """The ETA weight of a variant's measurements (size, minimal pairs at every checkpoint), and of
    the side-by-side speed stage and the report: about a minute whatever the budget, so against a
    pretraining's fixed units it shrinks as the budget grows. One unit at 5e13 FLOPs; claims-deep
    (1.72e14) measured about 40 s a variant against 113 s a unit of its pretraining, 0.35 units,
    where this gives 0.29 (a flat unit each had put its measurements at 9 minutes; they took 2)."""
    return _FT_REF_BUDGET / cfg.budget_flops
