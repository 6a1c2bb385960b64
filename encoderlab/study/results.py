"""A study's results as types: checkpoints at budget fractions, fine-tunings keyed by (task,
fraction, unshared), one record per variant, and their round trip to report.json.

The runner fills these; claims.py and report.py read them. No key is a string to be parsed: a
fine-tuning is found by its FinetuneKey's fields. report.json written before these types (its
fine-tunings keyed "task+unshared@0.5", its checkpoints "0.5") still loads, through the one legacy
reader below.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True, order=True)
class FinetuneKey:
    """One fine-tuning of a variant: a task, the budget fraction of the checkpoint, and whether the
    checkpoint's layer sharing was removed first (ALBERT, claim 4)."""

    task: str
    fraction: float
    unshared: bool = False


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint nearest a fraction of the budget (by the FLOPs its trainer counted)."""

    path: str
    step: int
    flops: float
    fraction_of_budget: float


@dataclass(frozen=True)
class Pretraining:
    """How a variant's (seed 0's) pretraining went, as its stage recorded it."""

    wall_s: float

    def to_json(self) -> dict:
        return {"wall_s": self.wall_s}

    @classmethod
    def from_json(cls, d: dict | None) -> Pretraining | None:
        return None if d is None else cls(wall_s=d["wall_s"])


@dataclass(frozen=True)
class Speed:
    """A variant's training throughput, timed side by side with the others (study/speed.py): the
    best of its ``rounds``, on ``threads`` threads, on ``device`` (None: recorded before devices)."""

    threads: int
    tokens_per_s: float
    rounds: list[float]
    device: str | None = None

    def to_json(self) -> dict:
        return {"threads": self.threads, "tokens_per_s": self.tokens_per_s, "rounds": self.rounds,
                **({"device": self.device} if self.device is not None else {})}

    @classmethod
    def from_json(cls, d: dict | None) -> Speed | None:
        return None if d is None else cls(threads=d["threads"], tokens_per_s=d["tokens_per_s"], rounds=d["rounds"],
                                          device=d.get("device"))


@dataclass
class Curve:
    """A pretraining run's logged records (metrics.jsonl): ``train`` and held-out ``eval``, in step
    order. A record stays a dict: its keys are whatever the objective logs (study/metrics.py names
    the ones the study reads)."""

    train: list[dict] = field(default_factory=list)
    eval: list[dict] = field(default_factory=list)
    # Where it computed: {"step", "machine", "precision"} at each (re)start that changed either
    # (measure.read_metrics); empty in reports written before the field.
    machines: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"train": self.train, "eval": self.eval, **({"machines": self.machines} if self.machines else {})}

    @classmethod
    def from_json(cls, d: dict | None) -> Curve:
        if d is None:
            return cls()
        return cls(train=d.get("train", []), eval=d.get("eval", []), machines=d.get("machines", []))

    def machine_kinds(self) -> list[str]:
        """The kinds of machine the run computed on, in order of first use."""
        return list(dict.fromkeys(m["machine"] for m in self.machines))


@dataclass
class Measure:
    """What was measured of a run beyond its pretraining and fine-tunings; each part None where the
    study did not measure it. The parts' own values stay JSON as their producers write them (their
    keys are networks, fractions, tasks, precisions):

    - ``params_total``, ``params_encoder``, ``checkpoint_mb``: sizes of the last checkpoint (claim 1);
    - ``minimal_pairs``: {network: accuracy record} at the last checkpoint (study/measure.py);
    - ``zeroshot``: {fraction: {"flops", "step", "minimal_pairs"}} at every evaluated checkpoint;
    - ``blimp``: {fraction: BLiMP dev record} (study/blimp.py);
    - ``latency_ms``: {precision/batch: ms} of the deployed encoder, timed on ``latency_threads``;
    - ``generation``, ``robustness``: the probes' records (study/probes.py, claims 12, 13);
    - ``prompt``: {task: {"k=K": record}} (study/prompt.py, claim 17).
    """

    params_total: int | None = None
    params_encoder: int | None = None
    checkpoint_mb: float | None = None
    minimal_pairs: dict | None = None
    zeroshot: dict | None = None
    blimp: dict | None = None
    latency_ms: dict | None = None
    latency_threads: int | None = None
    generation: dict | None = None
    robustness: dict | None = None
    prompt: dict | None = None

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, d: dict | None) -> Measure:
        d = d or {}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"measure: unknown key(s) {unknown}; the measurements are {sorted(known)}")
        return cls(**d)


@dataclass
class Replica:
    """A further pretraining run of a variant, from pretraining seed ``seed`` (> 0; seed 0's run is
    the variant's own record): its checkpoints, curves and fine-tunings."""

    seed: int
    run_dir: str
    checkpoints: dict[float, Checkpoint] = field(default_factory=dict)
    curve: Curve = field(default_factory=Curve)
    finetune: dict[FinetuneKey, dict | None] = field(default_factory=dict)
    measure: Measure = field(default_factory=Measure)  # BLiMP dev at its last checkpoint, when the study scores it

    def to_json(self) -> dict:
        return {"seed": self.seed, "run_dir": self.run_dir, **({"measure": m} if (m := self.measure.to_json()) else {}),
                "checkpoints": [{"fraction": f, **dataclasses.asdict(c)} for f, c in sorted(self.checkpoints.items())],
                "curve": self.curve.to_json(),
                "finetune": [{**dataclasses.asdict(k), "result": r} for k, r in sorted(self.finetune.items())]}

    @classmethod
    def from_json(cls, d: dict) -> Replica:
        return cls(seed=d["seed"], run_dir=d["run_dir"], checkpoints=_checkpoints(d["checkpoints"]),
                   curve=Curve.from_json(d.get("curve")), finetune=_finetunings(d["finetune"]),
                   measure=Measure.from_json(d.get("measure")))


def _checkpoints(cks: list) -> dict[float, Checkpoint]:
    return {float(c["fraction"]): Checkpoint(c["path"], c["step"], c["flops"], c["fraction_of_budget"]) for c in cks}


def _finetunings(fts: list) -> dict[FinetuneKey, dict | None]:
    return {FinetuneKey(f["task"], float(f["fraction"]), bool(f.get("unshared"))): f["result"] for f in fts}


@dataclass
class VariantResult:
    """Everything the study learned about one variant. ``finetune`` maps each key to the fine-tuning
    summary (score median/min/max/std/n over seeds, per-metric summary, per-seed scores), or None for
    one not run yet; ``measure`` holds size, parameters, minimal pairs and latency; ``speed`` the
    side-by-side training throughput (absent for two-stage variants, whose logged rate is used).
    These are pretraining seed 0's; ``replicas`` holds the runs from further pretraining seeds
    (StudyConfig.pretrain_seeds), whose fine-tunings the claims' statistics read beside seed 0's."""

    name: str
    spec: dict
    run_dir: str
    pretrain: Pretraining | None = None
    checkpoints: dict[float, Checkpoint] = field(default_factory=dict)
    curve: Curve = field(default_factory=Curve)
    finetune: dict[FinetuneKey, dict | None] = field(default_factory=dict)
    measure: Measure = field(default_factory=Measure)
    speed: Speed | None = None
    replicas: list[Replica] = field(default_factory=list)

    # ---- what the claims and the report read ---------------------------------------------------
    def fine_tunings(self, *, unshared: bool = False) -> dict[FinetuneKey, dict]:
        return {k: r for k, r in self.finetune.items() if r is not None and k.unshared == unshared}

    def final_score(self, *, unshared: bool = False) -> dict | None:
        """Downstream score at the last fine-tuned fraction, averaged over tasks: median and std."""
        done = self.fine_tunings(unshared=unshared)
        if not done:
            return None
        last = max(k.fraction for k in done)
        rows = [r for k, r in done.items() if k.fraction == last]
        return {"median": statistics.mean(r["score"]["median"] for r in rows),
                "std": statistics.mean(r["score"]["std"] for r in rows), "n": rows[0]["score"]["n"]}

    def seed_scores(self, fraction: float | None = None, *, unshared: bool = False) -> dict[str, np.ndarray]:
        """{task: (P, S) scores}: one row per pretraining run that has the fine-tuning (seed 0's first),
        one column per fine-tuning seed, at ``fraction`` (None: the last fine-tuned one). A fine-tuning
        recorded before per-seed scores (only its summary) gives no row."""
        done = self.fine_tunings(unshared=unshared)
        if fraction is None:
            if not done:
                return {}
            fraction = max(k.fraction for k in done)
        rows: dict[str, list] = {}
        for finetune in [self.finetune] + [r.finetune for r in self.replicas]:
            for k, ft in finetune.items():
                if ft is not None and k.fraction == fraction and k.unshared == unshared and ft.get("per_seed"):
                    rows.setdefault(k.task, []).append(ft["per_seed"])
        out = {}
        for task, rs in rows.items():
            n = min(len(r) for r in rs)
            out[task] = np.array([r[:n] for r in rs], dtype=float)
        return out

    def score_at(self, fraction: float) -> float | None:
        rows = [r for k, r in self.fine_tunings().items() if k.fraction == fraction]
        return statistics.mean(r["score"]["median"] for r in rows) if rows else None

    def finetuned_fractions(self) -> list[float]:
        return sorted({k.fraction for k in self.fine_tunings()})

    def final_eval(self) -> dict:
        ev = self.curve.eval
        return ev[-1] if ev else {}

    def objective(self) -> dict:
        return self.spec.get("objective", {})

    # ---- report.json ---------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"name": self.name, "spec": self.spec, "run_dir": self.run_dir,
                "pretrain": self.pretrain.to_json() if self.pretrain is not None else None,
                "checkpoints": [{"fraction": f, **dataclasses.asdict(c)} for f, c in sorted(self.checkpoints.items())],
                "curve": self.curve.to_json(),
                "finetune": [{**dataclasses.asdict(k), "result": r} for k, r in sorted(self.finetune.items())],
                "measure": self.measure.to_json(),
                **({"speed": self.speed.to_json()} if self.speed is not None else {}),
                **({"replicas": [r.to_json() for r in self.replicas]} if self.replicas else {})}

    @classmethod
    def from_json(cls, name: str, d: dict) -> VariantResult:
        cks, fts = d.get("checkpoints", []), d.get("finetune", [])
        if isinstance(cks, dict) or isinstance(fts, dict):
            cks, fts = _legacy_lists(cks, fts)
        return cls(name=d.get("name", name), spec=d.get("spec", {}), run_dir=d.get("run_dir", ""),
                   pretrain=Pretraining.from_json(d.get("pretrain")),
                   checkpoints=_checkpoints(cks), curve=Curve.from_json(d.get("curve")),
                   finetune=_finetunings(fts), measure=Measure.from_json(d.get("measure")),
                   speed=Speed.from_json(d.get("speed")),
                   replicas=[Replica.from_json(r) for r in d.get("replicas", [])])


def _legacy_lists(cks: dict, fts: dict) -> tuple[list, list]:
    """report.json before typed results: checkpoints keyed "0.5", fine-tunings "task+unshared@0.5"."""
    checkpoints = [{"fraction": float(f), **c} for f, c in cks.items()]
    finetune = []
    for key, r in fts.items():
        task, frac = key.rsplit("@", 1)
        unshared = task.endswith("+unshared")
        finetune.append({"task": task.removesuffix("+unshared"), "fraction": float(frac), "unshared": unshared,
                         "result": r})
    return checkpoints, finetune


@dataclass
class StudyResults:
    """A study's results: its config (as a dict), data, per-task baselines, the held-out count
    baselines and every variant's result."""

    config: dict
    data: dict
    variants: dict[str, VariantResult]
    baselines: dict = field(default_factory=dict)
    mlm_baselines: dict | None = None
    # The random-init controls: {"variant": the main one's architecture, "tasks": {task: its fine-tuning},
    # "blimp": ..., and where variants fine-tune other architectures "shapes": {variant: {"tasks", "blimp"}}
    # and "of": {variant: the shape standing for it}} (study/runner.random_control, judge.control_of).
    controls: dict = field(default_factory=dict)
    # Stages left out because the weights they need were not on this machine (skip_missing_weights),
    # each as "<stage> (needs <runs>)" (study/runs.have_weights).
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"config": self.config, "data": self.data, "baselines": self.baselines,
                "mlm_baselines": self.mlm_baselines, **({"controls": self.controls} if self.controls else {}),
                **({"skipped": self.skipped} if self.skipped else {}),
                "variants": {n: v.to_json() for n, v in self.variants.items()}}

    @classmethod
    def from_json(cls, d: dict) -> StudyResults:
        return cls(config=d["config"], data=d.get("data", {}), baselines=d.get("baselines", {}),
                   mlm_baselines=d.get("mlm_baselines"), controls=d.get("controls", {}), skipped=d.get("skipped", []),
                   variants={n: VariantResult.from_json(n, v) for n, v in d["variants"].items()})


# report.json's keys that StudyResults holds (the rest: study, environment, claims).
RESULT_KEYS = ("config", "data", "baselines", "mlm_baselines", "controls", "skipped", "variants")


def load_report(path: str | Path) -> tuple[StudyResults, dict]:
    """The results of a report.json, old or new, and the rest of the file (environment, claims)."""
    d = json.loads(Path(path).read_text())
    return StudyResults.from_json(d), {k: v for k, v in d.items() if k not in RESULT_KEYS}
