"""A study's finished stages, each stored with a fingerprint of everything it depends on, so a rerun
skips what is done and redoes what changed (stages.json, rewritten by rename after every stage:
a study killed at any moment keeps every stage it had finished).

A stage is named by a StageKey: what kind of work, for which run, task, fraction... Its string is
the key in stages.json, so those strings are the on-disk format: a study written before StageKey
keeps its stages because ``str(StageKey)`` gives exactly the strings written then.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from encoderlab.study.progress import Progress

T = TypeVar("T")


@dataclass(frozen=True)
class StageKey:
    """The name of one stage. ``run`` is whose stage it is (a variant, a pretraining run such as
    "bert@seed1", or for a learning-rate stage the family); the other fields are set by the kinds
    that have them. Build one with the constructors below, which say which fields each kind has."""

    kind: str
    run: str | None = None
    task: str | None = None
    fraction: float | None = None
    unshared: bool = False
    network: str | None = None
    learning_rate: float | None = None
    shots: int | None = None

    # ---- the study's stages ---------------------------------------------------------------------
    @classmethod
    def data(cls) -> StageKey:
        return cls("data")

    @classmethod
    def mlm_baselines(cls) -> StageKey:
        return cls("mlm_baselines")

    @classmethod
    def speed(cls, variants: tuple[str, ...] = ()) -> StageKey:
        """The side-by-side timing of these variants: one record per variant set, so the parts of a study
        that share an out_dir keep theirs (a record without variants is from before that)."""
        return cls("speed", ",".join(variants) or None)

    @classmethod
    def pretrain(cls, run: str) -> StageKey:
        return cls("pretrain", run)

    @classmethod
    def measure(cls, variant: str) -> StageKey:
        return cls("measure", variant)

    @classmethod
    def zeroshot(cls, variant: str, fraction: float) -> StageKey:
        return cls("zeroshot", variant, fraction=fraction)

    @classmethod
    def blimp(cls, run: str, fraction: float) -> StageKey:
        return cls("blimp", run, fraction=fraction)

    @classmethod
    def bow(cls, task: str) -> StageKey:
        return cls("bow", task=task)

    @classmethod
    def ngram(cls, task: str) -> StageKey:
        return cls("ngram", task=task)

    @classmethod
    def control(cls, task: str, shape: str | None = None) -> StageKey:
        """The random-init control fine-tuned on ``task``: the main one (``shape`` None: the bert role's
        architecture), or that of variant ``shape``'s architecture where it differs."""
        return cls("control", shape, task=task)

    @classmethod
    def control_blimp(cls, shape: str | None = None, causal: bool = False) -> StageKey:
        """The random-init control scored on BLiMP (``shape`` as in control); ``causal``: scored left to
        right, as a causal LM variant is (study/blimp.py)."""
        return cls("control_blimp", shape, network="clm" if causal else None)

    @classmethod
    def learning_rate_trial(cls, family: str, task: str, learning_rate: float) -> StageKey:
        return cls("lr", family, task=task, learning_rate=learning_rate)

    @classmethod
    def finetune(cls, run: str, task: str, fraction: float, unshared: bool = False) -> StageKey:
        return cls("finetune", run, task=task, fraction=fraction, unshared=unshared)

    @classmethod
    def probe(cls, kind: str, variant: str, network: str | None = None) -> StageKey:
        """A generation or robustness probe (study/probes.py) of a variant, of one of its networks."""
        if kind not in ("generation", "robustness"):
            raise ValueError(f"probe kind {kind!r}: expected 'generation' or 'robustness'")
        return cls(kind, variant, network=network)

    @classmethod
    def prompt(cls, run: str, task: str, shots: int) -> StageKey:
        return cls("prompt", run, task=task, shots=shots)

    # ---- the string in stages.json (the on-disk format: never change one) -----------------------
    def __str__(self) -> str:
        k = self.kind
        if k in ("data", "mlm_baselines"):
            return k
        if k == "speed":
            return k if self.run is None else f"{k}:{self.run}"
        if k in ("pretrain", "measure"):
            return f"{k}:{self.run}"
        if k in ("zeroshot", "blimp"):
            return f"{k}:{self.run}@{self.fraction:g}"
        if k in ("bow", "ngram"):
            return f"{k}:{self.task}"
        if k in ("control", "control_blimp"):  # the main control's keys as they always were
            name = self.task or "blimp" + (f"+{self.network}" if self.network else "")
            return f"control:{name}" + (f"@{self.run}" if self.run else "")
        if k == "lr":
            return f"lr:{self.run}:{self.task}:{self.learning_rate:g}"
        if k == "finetune":  # the fraction as str(float) ("1.0"), as study/plan.py has always written it
            return f"finetune:{self.run}{'+unshared' if self.unshared else ''}:{float(self.fraction)}:{self.task}"
        if k in ("generation", "robustness"):
            return f"{k}:{self.run}" + (f":{self.network}" if self.network else "")
        if k == "prompt":
            return f"prompt:{self.run}:{self.task}:k={self.shots}"
        raise ValueError(f"stage kind {k!r} has no key format")


class Stages:
    """Finished stages, keyed by name, each with the fingerprint it was computed under."""

    def __init__(self, path: Path, *, skip_missing_weights: bool = False):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}
        # skip_missing_weights (the study's key): a stage still to compute whose runs' weights are not on
        # this machine is left out, named in ``skipped`` (study/runs.have_weights), not an error.
        self.skip_missing_weights = skip_missing_weights
        self.skipped: list[str] = []

    def get(self, key: StageKey | str, fingerprint: str):
        rec = self.data.get(str(key))
        return rec["result"] if rec and rec["fingerprint"] == fingerprint else None

    def recorded(self, key: StageKey | str) -> bool:
        """A record under this key, whatever its fingerprint (get checks that)."""
        return str(key) in self.data

    def put(self, key: StageKey | str, fingerprint: str, result) -> None:
        self.data[str(key)] = {"fingerprint": fingerprint, "result": result}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def cached(self, key: StageKey | str, fingerprint: str, compute: Callable[[], T], *,
               progress: Progress | None = None, label: str | None = None, weight: float | None = None,
               ready: Callable[[], bool] | None = None) -> T | None:
        """The stage's stored result, else ``compute()``'s, stored before it is returned. With a
        ``progress``: ``label`` is announced before computing, and ``weight`` units are advanced
        either way (counted as cached when the stored result was used). ``ready``: asked before
        computing (whether the weights it needs are here, study/runs.have_weights); False: None."""
        got = self.get(key, fingerprint)
        hit = got is not None
        if not hit and ready is not None and not ready():
            return None
        if not hit:
            if progress is not None and label:
                progress.stage(label)
            got = compute()
            self.put(key, fingerprint, got)
        if progress is not None and weight is not None:
            progress.advance(weight, cached=hit)
        return got


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
