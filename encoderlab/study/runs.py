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
    # A finished run's record first: a folder beside it may hold a run being recreated (part-way through,
    # or done with other numerics), and the report reads the run that its fine-tunings read.
    if done is not None and "checkpoints" in done:
        return [tuple(c) for c in done["checkpoints"]], Curve.from_json(done["curve"])
    here = found_checkpoints(run_dir)
    if here:
        if done is not None:  # a stage written before the record
            stages.put(key, fp, {**done, **record(run_dir)})
        return here, read_metrics(run_dir / METRICS)
    raise RuntimeError(f"{run_dir}: the pretraining left no checkpoint"
                       + ("" if done is None else ", and its stage in stages.json keeps no record of them"))


def checkpoints(stages: Stages, name: str, recipe: PretrainConfig, budget: float, fractions) -> dict[float, Checkpoint]:
    """Run ``name``'s checkpoint nearest each fraction of the budget."""
    return nearest_checkpoints(_read(stages, name, recipe)[0], budget, fractions)


def curve(stages: Stages, name: str, recipe: PretrainConfig) -> Curve:
    """Run ``name``'s logged curve: its record once finished, else from its folder (part-way through)."""
    done = stages.get(StageKey.pretrain(name), recipe_fingerprint(recipe))
    if done and "curve" in done:
        return Curve.from_json(done["curve"])
    path = Path(recipe.trainer.run_dir) / METRICS
    return read_metrics(path) if path.exists() else Curve()


def require_weights(paths: dict[str, str], what: str) -> None:
    """Stop, naming the runs, when stages still to compute need checkpoints that are not on this machine
    (their runs' records came from stages.json)."""
    missing = {run: p for run, p in paths.items() if not Path(p).exists()}
    if missing:
        raise ConfigError(
            f"{what} need the weights of {', '.join(f'{r} ({p})' for r, p in missing.items())}, which are not on this "
            "machine: the study has those runs' records (stages.json), not their checkpoints. Run it where the run "
            "folders are, or with recreate_weights=true to pretrain them again here from their recipes and seeds")


def needed_runs(skipped: list[str]) -> set[str]:
    """The runs named by have_weights' entries in ``stages.skipped`` ("<stage> (needs <run>, ...)")."""
    return {r for s in skipped for r in s.rsplit("(needs ", 1)[-1].rstrip(")").split(", ")}


def have_weights(stages: Stages, paths: dict[str, str], what: str) -> bool:
    """Whether the checkpoints a stage still to compute needs ({run: path}) are on this machine; when
    they are not: False and the stage named in ``stages.skipped`` where the study skips missing
    weights, else the error of require_weights."""
    missing = {run: p for run, p in paths.items() if not Path(p).exists()}
    if not missing:
        return True
    if not stages.skip_missing_weights:
        require_weights(missing, what)
    stages.skipped.append(f"{what} (needs {', '.join(missing)})")
    return False


def missing_weights(stages: Stages, recipes: dict[str, PretrainConfig]) -> dict[str, dict]:
    """{run: its recorded pretraining stage} of the ``recipes``' finished runs whose checkpoints are not
    on this machine (recreate_weights pretrains again those a stage still to compute needs)."""
    out = {}
    for name, recipe in recipes.items():
        done = stages.get(StageKey.pretrain(name), recipe_fingerprint(recipe))
        if done is None:
            continue
        paths = [c[0] for c in done.get("checkpoints", [])]
        if not (all(Path(p).exists() for p in paths) if paths else found_checkpoints(Path(recipe.trainer.run_dir))):
            out[name] = done
    return out


# Logged per eval record but not a property of the weights.
_NOT_METRICS = {"split", "step", "tokens", "flops", "progress", "elapsed_s", "tokens_per_s"}


def recreation(recorded: dict, here: dict) -> dict:
    """How a run pretrained again (``here``: runs.record of its folder) compares with its ``recorded``
    stage: {"machines": where each computed, "steps_match": the same checkpoint steps, "compared": eval
    records at common steps, "max_abs_diff": {metric: largest |difference|}, "identical": every metric
    equal}. Equal records on the same kind of machine mean the same weights in all but name; else the
    new weights are another run of the same recipe and seed, which the report says."""
    old, new = Curve.from_json(recorded.get("curve")), Curve.from_json(here.get("curve"))
    at = {r["step"]: r for r in new.eval}
    diffs: dict[str, float] = {}
    compared = 0
    for r in old.eval:
        if (n := at.get(r["step"])) is None:
            continue
        compared += 1
        for k, x in r.items():
            if k not in _NOT_METRICS and isinstance(x, (int, float)) and isinstance(n.get(k), (int, float)):
                diffs[k] = max(diffs.get(k, 0.0), abs(float(n[k]) - float(x)))
    steps_match = [c[1] for c in recorded.get("checkpoints", [])] == [c[1] for c in here.get("checkpoints", [])]
    return {"machines": {"recorded": old.machine_kinds(), "here": new.machine_kinds()},
            "steps_match": steps_match, "compared": compared, "max_abs_diff": diffs,
            "identical": steps_match and compared == len(old.eval) > 0 and not any(diffs.values())}


def check_recreation(recreate: dict[str, dict], here: str) -> None:
    """Stop before pretraining recorded runs again on another kind of machine than they ran on (``here``
    is this one's): the new weights would differ by the kind's precision and kernels. The study's
    mixed_machines: true skips this and takes the new runs as other runs of the same recipes and seeds."""
    other = {n: kinds for n, rec in recreate.items()
             if (kinds := [k for k in Curve.from_json(rec.get("curve")).machine_kinds() if k != "not recorded"])
             and kinds != [here]}
    if other:
        ran = "; ".join(f"{n} ran on {', '.join(map(repr, k))}" for n, k in other.items())
        raise ConfigError(f"recreate_weights: {ran}, and this machine is {here!r}: recreate them on that kind, or set "
                          "mixed_machines: true to take the new runs as other runs of the same recipes and seeds")
