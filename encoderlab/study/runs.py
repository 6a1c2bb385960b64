"""A pretraining run as the study reads it: its checkpoints (step, FLOPs) and its logged curve.

From the run's folder when the run is on this machine; else from the record its pretraining stage
keeps in stages.json (written when the run finished, added to older stages the next time the study
finds the folder). A study thus goes on from committed stage records on a machine without the run
folders (a fresh clone, the next session's machine): every stage already computed reads the record,
and only a stage that needs a checkpoint's weights (a new task, a new probe) asks for the run again,
naming it. The checkpoints' paths stay as the run wrote them (relative to where the study ran).
"""

from __future__ import annotations

from pathlib import Path

from encoderlab.config import ConfigError
from encoderlab.study.measure import found_checkpoints, nearest_checkpoints, read_metrics
from encoderlab.study.plan import recipe_fingerprint
from encoderlab.study.results import Checkpoint, Curve
from encoderlab.study.stages import StageKey, Stages
from encoderlab.train.config import PretrainConfig

METRICS = "metrics.jsonl"


def record(run_dir: Path) -> dict:
    """What a finished run's pretraining stage keeps of it: {"checkpoints": [[path, step, flops], ...],
    "curve": its metrics (results.Curve as JSON)}."""
    return {"checkpoints": [list(c) for c in found_checkpoints(run_dir)],
            "curve": read_metrics(run_dir / METRICS).to_json()}


def _read(stages: Stages, name: str, recipe: PretrainConfig) -> tuple[list[tuple[str, int, float]], Curve]:
    run_dir = Path(recipe.trainer.run_dir)
    key, fp = StageKey.pretrain(name), recipe_fingerprint(recipe)
    done = stages.get(key, fp)
    here = found_checkpoints(run_dir)
    if here:
        if done is not None and "checkpoints" not in done:  # a stage written before the record
            stages.put(key, fp, {**done, **record(run_dir)})
        return here, read_metrics(run_dir / METRICS)
    if done is not None and "checkpoints" in done:
        return [tuple(c) for c in done["checkpoints"]], Curve.from_json(done["curve"])
    raise RuntimeError(f"{run_dir}: the pretraining left no checkpoint"
                       + ("" if done is None else ", and its stage in stages.json keeps no record of them"))


def checkpoints(stages: Stages, name: str, recipe: PretrainConfig, budget: float, fractions) -> dict[float, Checkpoint]:
    """Run ``name``'s checkpoint nearest each fraction of the budget."""
    return nearest_checkpoints(_read(stages, name, recipe)[0], budget, fractions)


def curve(stages: Stages, name: str, recipe: PretrainConfig) -> Curve:
    """Run ``name``'s logged curve: from its folder (a run part-way through included), else its record."""
    path = Path(recipe.trainer.run_dir) / METRICS
    if path.exists():
        return read_metrics(path)
    done = stages.get(StageKey.pretrain(name), recipe_fingerprint(recipe))
    return Curve.from_json(done["curve"]) if done and "curve" in done else Curve()


def require_weights(paths: dict[str, str], what: str) -> None:
    """Stop, naming the runs, when stages still to compute need checkpoints that are not on this machine
    (their runs' records came from stages.json)."""
    missing = {run: p for run, p in paths.items() if not Path(p).exists()}
    if missing:
        raise ConfigError(
            f"{what} need the weights of {', '.join(f'{r} ({p})' for r, p in missing.items())}, which are not on this "
            "machine: the study has those runs' records (stages.json), not their checkpoints. Run it where the run "
            "folders are, or remove those runs' 'pretrain:' entries from stages.json to pretrain them again here")
