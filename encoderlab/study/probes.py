"""The study's two probes beyond fine-tuning, on the final checkpoints of the variants whose roles
the claims name:

- generation (claim 12): the bert role's MLM, the electra role's generator and its discriminator
  (given a fresh MLM head) each fine-tuned UniLM-style on a generation task (encoderlab/generate),
  ``seeds`` seeds each; scores are token F1 / ROUGE-L / exact match on the task's test split
  (dev when it has none), greedy decoding. Claim 15's arm gpt-bert too, as the causal LM it also
  is (network "next": its own MLM head read at the token before, GenerationConfig.decoding);
- robustness (claim 13): the bert and electra roles fine-tuned on a classification task and scored on
  perturbed copies of its eval split (encoderlab/eval/robustness.py).

Each result is a stage (stages.json), fingerprinted by the variant's recipe and the probe's settings,
and lands in the variant's ``measure`` under "generation" / "robustness" where the claims read it.
A probe is off while its task is unset (StudyConfig.generation_task / robustness_task).
"""

from __future__ import annotations

from encoderlab.eval.robustness import evaluate_robustness
from encoderlab.generate.config import GenerationConfig
from encoderlab.generate.train import run_generation
from encoderlab.study.config import StudyConfig, TaskRef
from encoderlab.study.measure import task_spec
from encoderlab.study.plan import finetune_weight, recipe_fingerprint
from encoderlab.study.progress import Progress
from encoderlab.study.results import VariantResult
from encoderlab.study.roles import ARMS
from encoderlab.study.runs import have_weights
from encoderlab.study.stages import StageKey, Stages, fingerprint
from encoderlab.train.config import PretrainConfig


def planned_probes(cfg: StudyConfig) -> list[tuple[str, str, str | None]]:
    """(kind, variant, network) of every probe the study runs, in order."""
    roles, names = cfg.roles, {v.name for v in cfg.variants}
    todo = []
    if cfg.generation_task:
        todo += [("generation", n, net) for n, net in
                 ((roles.bert, "mlm"), (roles.electra, "generator"), (roles.electra, "discriminator"),
                  (ARMS.gpt_bert, NEXT)) if n in names]
    if cfg.robustness_task:
        todo += [("robustness", n, None) for n in (roles.bert, roles.electra) if n in names]
    return todo


def probe_weight(cfg: StudyConfig, recipe: PretrainConfig, kind: str) -> float:
    """A probe's ETA weight: it fine-tunes every seed as a checkpoint-task pair does, generation for
    its own epochs and examples (decoding its few hundred eval examples is small beside training)."""
    w = finetune_weight(cfg, recipe)
    if kind == "generation":
        g, f = cfg.generation, cfg.finetune
        w *= g.epochs * (g.max_train_examples or 4000) / ((f.epochs or 3) * (f.max_train_examples or 4000))
    return w


def run_probes(cfg: StudyConfig, recipes: dict[str, PretrainConfig], variants: dict[str, VariantResult],
               data: dict, stages: Stages, progress: Progress) -> None:
    for kind, name, network in planned_probes(cfg):
        _probe(cfg, kind, name, network, recipes[name], variants[name], data, stages, progress)


def _probe(cfg: StudyConfig, kind: str, name: str, network: str | None, recipe: PretrainConfig,
           res: VariantResult, data: dict, stages: Stages, progress: Progress) -> None:
    ck = res.checkpoints[max(cfg.eval_fractions)].path
    settings = (cfg.generation.to_dict(), cfg.generation_task) if kind == "generation" else (
        cfg.finetune.to_dict(), cfg.robustness.to_dict(), cfg.robustness_task, cfg.glue_dir)
    fp = fingerprint(recipe_fingerprint(recipe), ck, settings, cfg.seeds)
    label = f"{kind} probe: {name}" + (f" ({network})" if network else "") + f", {cfg.seeds} seeds"
    got = stages.cached(
        StageKey.probe(kind, name, network), fp,
        lambda: _generation(cfg, ck, network, data) if kind == "generation" else _robustness(cfg, ck, data),
        progress=progress, weight=probe_weight(cfg, recipe, kind), label=label,
        ready=lambda: have_weights(stages, {name: ck}, label))
    if got is None:
        return
    probe = dict(getattr(res.measure, kind) or {})  # kind: "generation" or "robustness", a Measure field
    if network:
        probe[network] = got
    else:
        probe = got
    setattr(res.measure, kind, probe)


NEXT = "next"  # a probe "network": the MLM with its head read at the token before (decoding next)


def generation_settings(cfg: StudyConfig, network: str) -> tuple[GenerationConfig, str]:
    """(settings, network) run_generation gets for a probe's network."""
    if network == NEXT:
        return cfg.generation.replace(decoding="next"), "mlm"
    return cfg.generation, network


def _generation(cfg: StudyConfig, ck: str, network: str, data: dict) -> dict:
    settings, net = generation_settings(cfg, network)
    r = run_generation(ck, cfg.generation_task, settings, cfg.seeds, network=net,
                       tokenizer_dir=data["tokenizer"], log=lambda *a: None)
    split = "test" if any(k.startswith("test/") for k in r.summary) else "dev"
    return {"split": split, "summary": {k.split("/", 2)[2]: s for k, s in r.summary.items()
                                        if k.startswith(f"{split}/greedy/")},
            "fresh_head": r.fresh_head, "precision": r.precision, "task": r.task.get("name")}


def _robustness(cfg: StudyConfig, ck: str, data: dict) -> dict:
    spec, data_dir = task_spec(TaskRef(name=cfg.robustness_task), data)  # "demo" too, as the study's tasks
    r = evaluate_robustness(ck, spec, cfg.finetune, cfg.robustness, cfg.seeds,
                            data_dir=data_dir, tokenizer_dir=data["tokenizer"], log=lambda *a: None)
    return {"task": r.task, "precision": r.precision,
            "kinds": {kind: {"n_perturbed": k.n_perturbed, **k.summary} for kind, k in r.kinds.items()}}
