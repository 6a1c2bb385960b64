"""Fine-tuning learning rates chosen per model family and task on held-out training data, never on
dev (StudyConfig.finetune_lrs).

For each family at each width (bert-128, albert-256, electra-128: plan.family_of) the study's first
variant of that family and width stands for it: its seed-0 checkpoint at the last fine-tuned fraction
is fine-tuned once (seed 0) at each candidate rate on four fifths of the task's (capped) training
examples and scored on the other fifth. The best rate is then every variant of that family's on that
task. One seed at each rate is a coarse choice; it is made once, before any fine-tuning the claims
read, and recorded in report.json (data.learning_rates) with every held-out score.
"""

from __future__ import annotations

import dataclasses

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.finetune import subset, train_seed
from encoderlab.eval.split import HELDOUT, SPLIT_SEED, heldout_split
from encoderlab.eval.tasks import load_task
from encoderlab.study import runs
from encoderlab.study.config import StudyConfig, TaskRef
from encoderlab.study.measure import task_spec
from encoderlab.study.plan import family_of
from encoderlab.study.stages import StageKey, Stages, fingerprint
from encoderlab.train.config import PretrainConfig


def heldout_score(ck: str, task: TaskRef, cfg: StudyConfig, data: dict, lr: float) -> float:
    """One fine-tuning (seed 0) of the checkpoint at rate ``lr`` on the rest, scored on the held-out part."""
    spec, data_dir = task_spec(task, data)
    td = load_task(spec, data_dir)
    rest, held = heldout_split(subset(td.train, cfg.finetune.max_train_examples))
    td = dataclasses.replace(td, train=rest, evals={"heldout": held})
    fcfg = cfg.finetune.replace(learning_rate=lr, max_train_examples=None, max_eval_examples=None)
    return train_seed(load_model(ck), load_tokenizer(data["tokenizer"]), td, fcfg, 0, log=lambda *a: None)["score"]


def pick_learning_rates(cfg: StudyConfig, recipes: dict[str, PretrainConfig], stages: Stages, data: dict,
                        progress) -> dict:
    """{family: {task: {"chosen": lr, "heldout": {lr: score}, "variant": name}}}; {} when finetune_lrs is empty."""
    if not cfg.finetune_lrs:
        return {}
    out: dict[str, dict] = {}
    ft = {k: x for k, x in cfg.finetune.to_dict().items() if k not in ("device", "learning_rate")}
    for v in cfg.variants:
        family = family_of(cfg, recipes[v.name])
        if family in out:
            continue
        recipe = recipes[v.name]
        ck = runs.checkpoints(stages, v.name, recipe, cfg.budget_flops, cfg.eval_fractions)[
            max(cfg.finetune_fractions)].path
        out[family] = {}
        for task in cfg.tasks:
            scores = {}
            for lr in cfg.finetune_lrs:
                fp = fingerprint(ck, task.to_dict(), ft, lr, HELDOUT, SPLIT_SEED)
                label = f"learning rate for {family} on {task.name}: {v.name} at {lr:g}, held-out fifth"
                scores[f"{lr:g}"] = stages.cached(
                    StageKey.learning_rate_trial(family, task.name, lr), fp,
                    lambda task=task, lr=lr, ck=ck: heldout_score(ck, task, cfg, data, lr), progress=progress,
                    label=label, ready=lambda ck=ck, label=label, n=v.name: runs.have_weights(stages, {n: ck}, label))
            if None in scores.values():  # left out for want of weights: so are the family's fine-tunings
                continue
            best = max(cfg.finetune_lrs, key=lambda lr: scores[f"{lr:g}"])
            out[family][task.name] = {"chosen": best, "heldout": scores, "variant": v.name}
    return out


def chosen(data: dict, family: str) -> dict[str, float]:
    """{task: the rate chosen for this family}; {} when the study chose none."""
    return {t: c["chosen"] for t, c in data.get("learning_rates", {}).get(family, {}).items()}
