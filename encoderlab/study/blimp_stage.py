"""BLiMP dev as study stages: each checkpoint scored once (study/blimp.py scores), as a batch of jobs
before the variants' results are read (blimp_all: a SLURM job each under executor: slurm), then read
per run with its learning curve (blimp_curve)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.study import blimp, runs
from encoderlab.study.config import StudyConfig
from encoderlab.study.executor import Executor
from encoderlab.study.plan import recipe_fingerprint, run_name
from encoderlab.study.progress import Progress
from encoderlab.study.stages import StageKey, Stages, fingerprint
from encoderlab.train.config import PretrainConfig


def blimp_curve(cfg: StudyConfig, run: str, checkpoints: dict, data: dict, stages: Stages, fp: str,
                progress: Progress, *, causal: bool = False) -> dict:
    """BLiMP dev at each of a run's ``checkpoints`` (study/blimp.py; every evaluated one of seed 0's,
    the last of a further pretraining seed's; ``causal``: scored left to right, a clm variant's), one stage each;
    {fraction: record}, the per-pair outcomes kept at the last checkpoint only (the paired comparisons
    read those; report.json stays small). blimp_all has computed those it could as a batch of jobs."""
    out, last = {}, max(checkpoints)
    for frac, ck in sorted(checkpoints.items()):
        unit = _blimp_unit(cfg, run, frac, ck, fp, stages, causal)
        got = stages.cached(unit.key, unit.fingerprint, lambda unit=unit: score_blimp(unit, cfg, data),
                            progress=progress, label=unit.label,
                            ready=lambda ck=ck, unit=unit: runs.have_weights(stages, {run: ck.path}, unit.label))
        if got is None:
            continue
        if frac != last:
            got = {**got, "networks": {n: {k: x for k, x in r.items() if k != "correct"}
                                       for n, r in got["networks"].items()}}
        out[f"{frac:g}"] = {"flops": ck.flops, "step": ck.step, "label": blimp.label(cfg.blimp), **got}
    return out


@dataclass(frozen=True)
class BlimpUnit:
    """One BLiMP scoring of one checkpoint: its stage, and what the scoring needs."""

    key: StageKey
    fingerprint: str
    label: str
    checkpoint: str
    causal: bool
    recreated: dict | None  # weights pretrained again (recreate_weights): how they compare with the record


def _blimp_unit(cfg: StudyConfig, run: str, frac: float, ck, fp: str, stages: Stages, causal: bool) -> BlimpUnit:
    made = (stages.get(StageKey.pretrain(run), fp) or {}).get("recreated")
    cfp = fingerprint(fp, ck.path, cfg.blimp, cfg.blimp_pairs_per_paradigm,
                      *(["causal"] if causal else []))  # the other variants' stages stay valid
    label = f"{blimp.label(cfg.blimp)} zero-shot{' left to right' if causal else ''}: {run} at {frac:g} of the budget"
    return BlimpUnit(StageKey.blimp(run, frac), cfp, label, ck.path, causal, made)


def score_blimp(unit: BlimpUnit, cfg: StudyConfig, data: dict) -> dict:
    return {**blimp.score(load_model(unit.checkpoint).eval(), load_tokenizer(data["tokenizer"]),
                          blimp.load_pairs(cfg.blimp, cfg.blimp_pairs_per_paradigm), causal=unit.causal),
            **({"recreated": unit.recreated} if unit.recreated else {})}


def _score_blimp_job(args: tuple) -> tuple[BlimpUnit, dict]:
    unit, cfg, data = args
    return unit, score_blimp(unit, cfg, data)


def blimp_all(cfg: StudyConfig, recipes: dict[str, PretrainConfig], stages: Stages, data: dict, progress: Progress,
              executor: Executor) -> None:
    """Every BLiMP scoring still to compute whose weights are here, as one batch (a SLURM job each under
    executor: slurm; one after another in this process locally), before run_variant reads them: every
    evaluated checkpoint of each variant's seed-0 run, the last of each further run."""
    if not cfg.blimp:
        return
    todo: list[BlimpUnit] = []
    for v in cfg.variants:
        for seed in range(cfg.pretrain_seeds):
            run = run_name(v.name, seed)
            cks = runs.checkpoints(stages, run, recipes[run], cfg.budget_flops, cfg.eval_fractions)
            if seed > 0:
                cks = {max(cks): cks[max(cks)]}
            for frac, ck in sorted(cks.items()):
                u = _blimp_unit(cfg, run, frac, ck, recipe_fingerprint(recipes[run]), stages,
                                blimp.causal(v.objective.kind))
                if stages.get(u.key, u.fingerprint) is None and Path(ck.path).exists():  # the rest: blimp_curve's
                    todo.append(u)

    def store(done: tuple[BlimpUnit, dict]) -> None:
        u, r = done
        stages.put(u.key, u.fingerprint, r)

    executor.map(_score_blimp_job, [(u, cfg, data) for u in todo], keys=[(str(u.key), u.fingerprint) for u in todo],
                 jobs=1, on_result=store, progress=progress, announce=lambda item: progress.stage(item[0].label),
                 describe=lambda n: f"BLiMP: {n} of {len(todo)} checkpoints scored")
