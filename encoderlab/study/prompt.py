"""The prompting probe (issue 36, claim 17): every variant's final checkpoints prompted zero- and
few-shot on the study's prompt tasks (StudyConfig.prompt_tasks) with eval/prompting.py.

An ELECTRA pair is prompted through its discriminator (each label word's pieces put in the [MASK]
slot, the word least likely "replaced" on average over its pieces wins), every other variant through
its MLM (the mean log-probability of the word's pieces, each at its own [MASK]; GPT-BERT's head reads
a position's token at t - 1, as it was trained). Label words may be several pieces of a small
vocabulary (eval/prompting.py). A causal-only variant (objective kind
clm) is left out: its head predicts the token after a position, not the one at [MASK], so its
"MLM" score would measure a network it does not have.

For every pretraining run of a variant (seed 0's first, then ``<variant>@seed<k>``), the final
checkpoint is scored on each task at each k of prompt_shots: k=0 once (zero-shot is deterministic);
k > 0 once per few-shot seed 0 .. prompt_seeds-1. eval/prompting.sample_k_shot draws a seed's k
examples per class from the task's training split by the seed alone, so every run of every variant
sees the same draws and the comparisons pair by draw. One stage per (run, task, k), fingerprinted by
the run's recipe, the checkpoint, the task's pattern and data folder and the prompt settings. The
stages not done yet run as fine-tuning does: in worker processes, finetune_jobs (else pretrain_jobs)
at once with a share of the cores each, each stored as it finishes (a prompt's batches of 8 keep one
thread busier than two).

The variant's ``measure["prompt"]`` gets what study/claims_arms.py reads: {task: {"k=K": {"method",
"per_run": [[accuracy per few-shot seed] per pretraining run], ...}}}. A task with several eval
splits (MNLI's matched and mismatched) scores a seed by the mean of its splits' accuracies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from encoderlab.eval import prompting
from encoderlab.study.config import StudyConfig, TaskRef, VariantSpec
from encoderlab.study.measure import task_spec
from encoderlab.study.plan import measure_weight, recipe_fingerprint, run_name
from encoderlab.study.progress import Progress
from encoderlab.study.results import VariantResult
from encoderlab.study.runs import have_weights
from encoderlab.study.stages import StageKey, Stages, fingerprint
from encoderlab.train.config import PretrainConfig

if TYPE_CHECKING:  # the executor's module reads the study's config, whose checks read this one
    from encoderlab.study.executor import Executor

# Objective kinds with no network that scores a token at [MASK] (see the module docstring).
NO_PROMPT_NETWORK = ("clm",)
FEW_SHOT_ONLY = ("steps", "learning_rate", "batch_size")  # PromptConfig fields only prompt training reads


def task_ref(cfg: StudyConfig, name: str) -> TaskRef:
    """The study's task of that name (its data_dir), else the name alone (glue_dir)."""
    return next((t for t in cfg.tasks if t.name == name), TaskRef(name=name))


def prompted(v: VariantSpec) -> bool:
    return v.objective.kind not in NO_PROMPT_NETWORK


def prompt_total_weight(cfg: StudyConfig) -> float:
    """ETA weight of the whole probe: every (run, task, k) stage of every prompted variant."""
    return sum(prompt_stage_weights(cfg).values())


def prompt_weight(cfg: StudyConfig, k: int) -> float:
    """ETA weight of one (run, task, k) stage: a zero-shot pass over a dev split is a fraction of a
    variant's measurements; each few-shot seed adds a short prompt training (prompt.steps batches)."""
    base = measure_weight(cfg) / 4
    return base if k == 0 else base * cfg.prompt_seeds * (1 + cfg.prompt.steps / 100)


def prompt_stage_weights(cfg: StudyConfig) -> dict[str, float]:
    """Every (run, task, k) stage's key and ETA weight: the stages run_prompting reaches."""
    return {str(StageKey.prompt(run_name(v.name, seed), task, k)): prompt_weight(cfg, k)
            for v in cfg.variants if prompted(v) for seed in range(cfg.pretrain_seeds)
            for task in cfg.prompt_tasks for k in cfg.prompt_shots}


@dataclass(frozen=True)
class PromptUnit:
    """One (run, task, k) stage of the probe: what a worker needs, and where its result is kept."""

    run: str
    checkpoint: str
    task: str
    k: int
    spec: object  # the task's TaskSpec
    data_dir: str | None
    seeds: tuple[int, ...]
    fingerprint: str

    @property
    def key(self) -> StageKey:
        return StageKey.prompt(self.run, self.task, self.k)

    @property
    def label(self) -> str:
        return f"{self.run} on {self.task}, " + ("zero-shot" if self.k == 0 else f"{self.k}-shot")


def run_prompting(cfg: StudyConfig, recipes: dict[str, PretrainConfig], variants: dict[str, VariantResult],
                  data: dict, stages: Stages, progress: Progress, executor: Executor) -> None:
    """Every prompted variant's ``measure["prompt"]``; off while prompt_tasks is empty."""
    if not cfg.prompt_tasks:
        return
    units = {v.name: prompt_units(cfg, v, recipes, variants[v.name], data)
             for v in cfg.variants if prompted(v) and v.name in variants}
    todo = []
    for u in (u for us in units.values() for u in us):
        if stages.get(u.key, u.fingerprint) is None:
            todo.append(u)
        else:
            progress.advance(prompt_weight(cfg, u.k), cached=True, key=str(u.key))
    run_units(cfg, [u for u in todo if have_weights(stages, {u.run: u.checkpoint}, f"prompting {u.label}")],
              data, stages, progress, executor)
    for name, us in units.items():
        if all(stages.get(u.key, u.fingerprint) is not None for u in us):  # else left out for want of weights
            variants[name].measure.prompt = collect(cfg, us, stages)


def prompt_units(cfg: StudyConfig, v: VariantSpec, recipes: dict[str, PretrainConfig], res: VariantResult,
                 data: dict) -> list[PromptUnit]:
    """The variant's stages: every pretraining run's final checkpoint (seed 0's run first) on each task
    at each k."""
    final = max(cfg.eval_fractions)
    runs = [(run_name(v.name, 0), res.checkpoints[final].path)]
    runs += [(run_name(v.name, r.seed), r.checkpoints[final].path) for r in res.replicas]
    out = []
    for task in cfg.prompt_tasks:
        spec, data_dir = task_spec(task_ref(cfg, task), data)
        for k in cfg.prompt_shots:
            seeds = (0,) if k == 0 else tuple(range(cfg.prompt_seeds))
            settings = cfg.prompt.to_dict()
            if k == 0:  # no training: the few-shot settings leave zero-shot scores as they are
                settings = {n: x for n, x in settings.items() if n not in FEW_SHOT_ONLY}
            for run, ck in runs:
                fp = fingerprint(recipe_fingerprint(recipes[run]), ck, spec.to_dict(), data_dir, settings, k,
                                 list(seeds))
                out.append(PromptUnit(run, str(ck), task, k, spec, data_dir, seeds, fp))
    return out


def run_units(cfg: StudyConfig, todo: list[PromptUnit], data: dict, stages: Stages, progress: Progress,
              executor: Executor) -> None:
    if not todo:
        return
    jobs = min(cfg.finetune_jobs or cfg.pretrain_jobs, len(todo))

    def store(done: tuple[PromptUnit, dict]) -> None:
        u, r = done
        stages.put(u.key, u.fingerprint, r)
        progress.advance(prompt_weight(cfg, u.k), key=str(u.key))
        progress.stage(f"prompted {u.label}: accuracy " + ", ".join(f"{a:.3f}" for a in r["per_seed"]))

    # Its own rate: BLiMP scorings before it advance no units, so the phase's rate, read from their
    # minutes and a first prompt's units, once put a 30-minute probe at "~286,654 s left".
    progress.new_phase()
    progress.stage(f"prompting: {len(todo)} stages (run, task, shots), {jobs} at once")
    executor.map(_prompt_unit, [(u, cfg, data) for u in todo], keys=[(str(u.key), u.fingerprint) for u in todo],
                 jobs=jobs, on_result=store, progress=progress,
                 describe=lambda n: f"prompting: {n} of {len(todo)} stages done, {jobs} at once")


def collect(cfg: StudyConfig, units: list[PromptUnit], stages: Stages) -> dict:
    """{task: {"k=K": {"method", "per_run": [accuracies per few-shot seed, per run], ...}}} from the stages."""
    out: dict = {}
    for task in cfg.prompt_tasks:
        for k in cfg.prompt_shots:
            recs = [stages.get(u.key, u.fingerprint) for u in units if u.task == task and u.k == k]
            first = recs[0]
            out.setdefault(task, {})[f"k={k}"] = {
                "method": first["method"], "per_run": [r["per_seed"] for r in recs], "seeds": first["seeds"],
                "template": first["template"], "verbalizer": first["verbalizer"], "num_eval": first["num_eval"],
                "majority": first.get("majority"), "label_pieces": first.get("label_pieces")}
    return out


def _prompt_unit(args: tuple) -> tuple[PromptUnit, dict]:
    u, cfg, data = args
    return u, _prompt(cfg, u.checkpoint, u.spec, u.data_dir, u.k, list(u.seeds), data)


def _prompt(cfg: StudyConfig, ck: str, spec, data_dir, k: int, seeds: list[int], data: dict) -> dict:
    r = prompting.prompt_classify(Path(ck), spec, cfg.prompt, k=k, seeds=seeds, data_dir=data_dir,
                        tokenizer_dir=data["tokenizer"], log=lambda *a: None)
    # one accuracy per few-shot seed: the eval split's, or the mean of several splits' (MNLI m/mm)
    per_seed = [sum(s["scores"].values()) / len(s["scores"]) for s in r["seeds"]]
    majority = [m for m in r["majority"].values() if m is not None]
    return {"method": r["method"], "k": k, "seeds": [s["seed"] for s in r["seeds"]], "per_seed": per_seed,
            "scores": [s["scores"] for s in r["seeds"]], "template": r["template"], "verbalizer": r["verbalizer"],
            "label_pieces": r["label_pieces"], "precision": r["precision"], "num_eval": r["num_eval"],
            "majority": sum(majority) / len(majority) if majority else None}
