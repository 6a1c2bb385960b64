"""Fine-tuning that is fair to every network: a checkpoint and its random-init twin on one protocol.

Issue 52 found the claims study's controls fine-tuned at other learning rates than their variants
(one rate chosen per family, from the pretrained variant), so a control could collapse at a rate its
variant never ran at. Here every network, pretrained or fresh, gets the same grid and chooses for
itself, on held-out training data only:

1. The task's training examples (capped at ``max_train_examples``, the same seeded subset for every
   network) are split once: a seeded fifth held out, the rest trained on (eval/split.heldout_split).
2. Each network is fine-tuned at every (learning rate, layer decay) of the grid with every seed for
   ``epochs`` epochs (a linear schedule over them), scored on the held-out fifth and on dev at the end
   of each epoch.
3. It takes the (rate, decay, epoch) whose mean held-out score over the seeds is best, and its dev
   score at that point, one per seed, is what it reports. Every other score is recorded too.
4. A fine-tuning whose dev predictions use one class at that point is a **collapse**: counted, kept in
   the scores (it is what the protocol produced) and reported beside them, never silently averaged.

Beside them, seed-free: the frozen-feature linear probe of the checkpoint and of the fresh network,
the n-gram baseline (eval/probe.py) and the majority class, on the same split.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from torch import nn

from encoderlab.config import Config, ConfigError
from encoderlab.data.tokenizer import Tokenizer
from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.finetune import one_class_scores, prepare_task, subset, train_seed
from encoderlab.eval.probe import ngram_baseline
from encoderlab.eval.split import HELDOUT, SPLIT_SEED, heldout_split
from encoderlab.eval.tasks import TaskData
from encoderlab.models.pairs import deployed


@dataclasses.dataclass(frozen=True, kw_only=True)
class FairConfig(Config):
    """The protocol's grid and sizes; every network of a comparison runs the same one."""

    # The grid the claims study chose from at width 128 (study/lr.py: 3e-4 and 1e-3 won; 3e-3 did not),
    # with no layer-wise decay (0.8, the ELECTRA paper's, slows a fresh network's low layers 3x: a
    # handicap the twin should not carry). Each epoch's end is a candidate stopping point. The size of
    # this grid is what a 2-core CPU affords for 3 networks x 5 tasks in a session (docs/transfer.md).
    learning_rates: tuple[float, ...] = (3e-4, 1e-3)
    layer_decays: tuple[float, ...] = (1.0,)
    seeds: int = 3
    epochs: float = 3.0
    max_train_examples: int | None = 4000
    max_eval_examples: int | None = None
    heldout: float = HELDOUT
    split_seed: int = SPLIT_SEED
    batch_size: int = 32
    max_length: int = 128
    precision: str = "auto"

    def validate(self) -> None:
        if not self.learning_rates or any(lr <= 0 for lr in self.learning_rates):
            raise ConfigError(f"learning_rates must be positive and at least one, got {self.learning_rates}")
        if not self.layer_decays or any(not 0 < d <= 1 for d in self.layer_decays):
            raise ConfigError(f"layer_decays must lie in (0, 1], got {self.layer_decays}")
        if self.seeds < 1 or self.epochs <= 0:
            raise ConfigError(f"seeds must be >= 1 and epochs > 0, got {self.seeds} and {self.epochs}")
        if not 0 < self.heldout < 1:
            raise ConfigError(f"heldout must be in (0, 1), got {self.heldout}")

    def finetune_config(self, lr: float, decay: float) -> FinetuneConfig:
        return FinetuneConfig(learning_rate=lr, layer_decay=decay, epochs=self.epochs, batch_size=self.batch_size,
                              max_length=self.max_length, precision=self.precision, max_train_examples=None,
                              max_eval_examples=self.max_eval_examples)




DEFAULT_SIZE = FairConfig().max_train_examples  # the frontier's training-set size (4,000)
def split(data: TaskData, cfg: FairConfig) -> TaskData:
    """The task as every network of the protocol sees it: trained on the rest of the capped training
    subset, scored on the held-out fifth ("heldout") and on the task's dev split(s)."""
    rest, held = heldout_split(subset(data.train, cfg.max_train_examples), cfg.heldout, cfg.split_seed)
    if "heldout" in data.evals:
        raise ValueError(f"task {data.spec.name}: an eval split may not be named 'heldout' (the protocol's own)")
    evals = {"heldout": held, **{k: subset(v, cfg.max_eval_examples) for k, v in data.evals.items()}}
    return dataclasses.replace(data, train=rest, evals=evals)


def dev_split(data: TaskData) -> str:
    """The eval split a task reports (its first that is not the protocol's held-out fifth)."""
    return next(k for k in data.evals if k != "heldout")


def fair_finetune(pretrained: nn.Module, tok: Tokenizer, data: TaskData, cfg: FairConfig, *, init: str,
                  log=print) -> dict:
    """Step 2-4 of the protocol for one network (``init``: "pretrained" or "random") on a split task
    (:func:`split`): every trial's curve, the chosen point and its dev score per seed."""
    dev = dev_split(data)
    trials = []
    # tokenized once for the whole grid: rate and decay change nothing prepare_task reads
    prepared = prepare_task(tok, data, cfg.finetune_config(cfg.learning_rates[0], cfg.layer_decays[0]),
                            deployed(pretrained).encoder.config.max_position_embeddings)
    for decay in cfg.layer_decays:
        for lr in cfg.learning_rates:
            fcfg = cfg.finetune_config(lr, decay)
            for seed in range(cfg.seeds):
                t0 = time.perf_counter()
                r = train_seed(pretrained, tok, data, fcfg, seed, log=lambda *a: None, init=init,
                               prepared=prepared, every_epoch=True)
                trials.append({"learning_rate": lr, "layer_decay": decay, "seed": seed, "curve": r["curve"],
                               "final_loss": r["final_loss"], "steps": r["steps"],
                               "seconds": round(time.perf_counter() - t0, 2), "precision": r["precision"]})
            log(f"  {init}: lr {lr:g}, layer decay {decay:g}: held-out "
                + " ".join(f"{np.mean([t['curve'][i]['score']['heldout'] for t in trials[-cfg.seeds:]]):.3f}"
                           for i in range(len(trials[-1]["curve"]))) + " by epoch")
    best = choose(trials)
    chosen = [t for t in trials if (t["learning_rate"], t["layer_decay"]) == best[:2]]
    points = [t["curve"][best[2]] for t in chosen]
    dev_scores = [p["score"][dev] for p in points]
    collapsed = [bool(p["classes"]) and p["classes"].get(dev, 2) <= 1 for p in points]
    return {"init": init, "trials": trials, "dev_split": dev,
            "chosen": {"learning_rate": best[0], "layer_decay": best[1], "epoch": points[0]["epoch"],
                       "heldout": float(np.mean([p["score"]["heldout"] for p in points]))},
            "dev": dev_scores, "collapsed": collapsed, "seconds": sum(t["seconds"] for t in trials)}


def choose(trials: list[dict]) -> tuple[float, float, int]:
    """(rate, decay, epoch index) with the best mean held-out score over seeds (NaN counts as worst;
    ties go to the earlier grid point and the earlier epoch)."""
    groups: dict[tuple[float, float], list[dict]] = {}
    for t in trials:
        groups.setdefault((t["learning_rate"], t["layer_decay"]), []).append(t)
    best, best_score = None, -np.inf
    for (lr, decay), ts in groups.items():
        for i in range(min(len(t["curve"]) for t in ts)):
            s = float(np.mean([t["curve"][i]["score"]["heldout"] for t in ts]))
            if np.isfinite(s) and s > best_score:
                best, best_score = (lr, decay, i), s
    if best is None:  # every held-out score NaN (a constant regression): the first point, said so in the record
        lr, decay = next(iter(groups))
        best = (lr, decay, 0)
    return best


def baselines(data: TaskData) -> dict:
    """The rows with no network on a split task: the majority class and the n-gram baseline."""
    dev = dev_split(data)
    evals = {dev: data.evals[dev]}
    major = one_class_scores(dataclasses.replace(data, evals=evals), FinetuneConfig(max_eval_examples=None))
    ngram = ngram_baseline(data.spec, data.train, data.evals["heldout"], evals)
    return {"majority": max(major), "ngram": ngram["score"][dev], "ngram_regularisation": ngram["regularisation"],
            "ngram_analyzers": ngram["analyzers"]}


def summary(result: dict) -> dict:
    """Median, mean and count of a network's reported dev scores, and its collapses."""
    xs = np.asarray(result["dev"], dtype=float)
    return {"mean": float(np.nanmean(xs)), "median": float(np.nanmedian(xs)), "n": int(xs.size),
            "collapses": int(sum(result["collapsed"]))}
