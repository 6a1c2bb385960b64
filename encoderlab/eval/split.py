"""A dev split taken from a task's train file (``dev_fraction``): seeded and stratified by label.

Each label's examples (regression: all of them) are shuffled by one generator seeded with
``split_seed``, taken in label order, and ``round(dev_fraction * n)`` of them go to dev, at most
all but one, so every label keeps a training example. The same file, fraction and seed give the
same split on every machine; the split is recorded by the train file's line numbers (and the dev
examples themselves) in the results and in a file beside them, so it can be checked and reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from encoderlab.tune.files import TaskDataError


def split_train(train: list, fraction: float, seed: int, *, stratified: bool, path: Path) -> tuple[list, list, dict]:
    """(train, dev, record) from the train file's examples (each with .label and .line)."""

    groups: dict = {}
    for i, e in enumerate(train):
        groups.setdefault(e.label if stratified else 0, []).append(i)
    rng = np.random.default_rng(seed)
    dev_idx: list[int] = []
    for key in sorted(groups):
        idx = np.array(groups[key])
        rng.shuffle(idx)
        k = min(round(fraction * len(idx)), len(idx) - 1)
        dev_idx.extend(int(i) for i in idx[:k])
    if not dev_idx:
        raise TaskDataError(f"{path}: dev_fraction {fraction} of {len(train)} training example(s) "
                            f"{'per label ' if stratified else ''}leaves no dev example; add examples or a dev file")
    chosen = set(dev_idx)
    dev = [train[i] for i in sorted(chosen)]
    rest = [e for i, e in enumerate(train) if i not in chosen]
    record = {"from": str(path), "sha256": _sha256(path), "dev_fraction": fraction, "split_seed": seed,
              "stratified_by_label": stratified, "train": len(rest), "dev": len(dev),
              "dev_lines": [e.line for e in dev]}
    return rest, dev, record


def write_split(record: dict, dev: list, labels: tuple[str, ...], path: Path) -> Path:
    """The split beside a run's results: the record and the dev examples (line, texts, label)."""
    rows = [{"line": e.line, "text_a": e.text_a, **({"text_b": e.text_b} if e.text_b is not None else {}),
             "label": labels[e.label] if labels else e.label} for e in dev]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**record, "dev_examples": rows}, indent=1, ensure_ascii=False))
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# A seeded fifth of a (capped) training set, held out for choices made on training data, never on dev:
# the study's learning rates (study/lr.py), the transfer protocol's rate and epoch, the linear models'
# regularisation (eval/probe.py).
HELDOUT = 0.2
SPLIT_SEED = 12345


def heldout_split(train: list, fraction: float = HELDOUT, seed: int = SPLIT_SEED) -> tuple[list, list]:
    """(rest, held out): a seeded random fifth of the training examples held out, in file order."""
    idx = np.random.default_rng(seed).permutation(len(train))
    k = max(1, round(fraction * len(train)))
    held = set(idx[:k].tolist())
    return [x for i, x in enumerate(train) if i not in held], [x for i, x in enumerate(train) if i in held]
