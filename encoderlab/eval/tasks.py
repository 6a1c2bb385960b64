"""Tasks: a small spec (files, columns, labels, metrics) and strict readers for TSV, CSV and JSONL.

Built in: the nine GLUE tasks in the standard GLUE TSV layout and ChnSentiCorp. A generic task is
a YAML ``TaskSpec`` (README, "Your own task"); for example::

    name: reviews
    format: csv            # tsv | csv | jsonl
    text_a: review
    label: stars
    kind: classification   # or regression
    labels: ["1", "2", "3", "4", "5"]   # optional: inferred (sorted) from the train file
    data_dir: data/reviews
    train: train.csv
    eval_files: {dev: dev.csv}       # or, with no dev file, dev_fraction: 0.1 (seeded, stratified)
    encoding: utf-8                  # gb18030, big5, cp1252, ... for files that are not UTF-8

TSV is read with quoting off (GLUE's files contain bare ``"``), as UTF-8 with an optional BOM
(MRPC has one). A header-less file names its columns by 0-based index ("3"). Every bad row (wrong
number of columns, unknown label, empty text, missing JSON key, bytes that are not UTF-8) raises a
TaskDataError naming the file and the line: a task file is small and curated, so unlike a corpus
a bad row stops the run rather than silently changing the data set.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from encoderlab.config import Config, ConfigError
from encoderlab.data.encoding import check_encoding
from encoderlab.errors import InputNotFoundError
from encoderlab.eval.metrics import METRICS
from encoderlab.eval.split import split_train
from encoderlab.tune.files import TaskDataError, decoded_lines, iter_jsonl  # shared with generate/


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskSpec(Config):
    name: str
    text_a: str
    label: str
    text_b: str | None = None
    kind: Literal["classification", "regression"] = "classification"
    format: Literal["tsv", "csv", "jsonl"] = "tsv"
    header: bool = True
    # Classification: the label values as written in the files, in class-id order; empty = infer
    # from the train file (sorted).
    labels: tuple[str, ...] = ()
    train: str = "train.tsv"
    eval_files: dict[str, str] = dataclasses.field(default_factory=lambda: {"dev": "dev.tsv"})
    metrics: tuple[str, ...] = ("acc",)
    epochs: float = 3.0
    data_dir: str | None = None  # where the files are; the --data-dir option overrides it
    subdir: str = ""  # built-ins: the folder under a GLUE-style root ("SST-2")
    # Prompting (PET): a template with {a}, {b} and [MASK]; one label word per label.
    template: str | None = None
    verbalizer: tuple[str, ...] = ()
    encoding: str = "utf-8"  # the files' encoding (gb18030, big5, cp1252, utf-16, ...)
    # No dev file: this share of the train file becomes the dev split (seeded by split_seed and
    # stratified by label; eval/split.py), the rest is trained on. A task that also has a dev file
    # (eval_files' "dev", where it exists) is refused: two dev sets would be a silent choice.
    dev_fraction: float | None = None
    split_seed: int = 0

    def validate(self) -> None:

        bad = [m for m in self.metrics if m not in METRICS]
        if bad:
            raise ConfigError(f"task {self.name}: unknown metric(s) {bad}; valid: {sorted(METRICS)}")
        if self.kind == "regression" and self.labels:
            raise ConfigError(f"task {self.name}: a regression task has no label set")
        if self.verbalizer and self.labels and len(self.verbalizer) != len(self.labels):
            raise ConfigError(f"task {self.name}: {len(self.verbalizer)} label words for {len(self.labels)} labels")
        if not self.eval_files and self.dev_fraction is None:
            raise ConfigError(f"task {self.name}: eval_files is empty (and no dev_fraction)")
        if self.dev_fraction is not None and not 0 < self.dev_fraction < 1:
            raise ConfigError(f"task {self.name}: dev_fraction must be in (0, 1), got {self.dev_fraction}")

        if (why := check_encoding(self.encoding)) is not None:
            raise ConfigError(f"task {self.name}: {why}")


def _glue(name, subdir, a, b, label, labels, metrics=("acc",), epochs=3.0, header=True, **kw) -> TaskSpec:
    return TaskSpec(name=name, subdir=subdir, text_a=a, text_b=b, label=label, labels=labels, metrics=metrics,
                    epochs=epochs, header=header, **kw)


BUILTIN: dict[str, TaskSpec] = {
    "cola": _glue("cola", "CoLA", "3", None, "1", ("0", "1"), ("mcc",), header=False,
                  template="{a} This is [MASK] .", verbalizer=("incorrect", "correct")),
    "sst2": _glue("sst2", "SST-2", "sentence", None, "label", ("0", "1"),
                  template="{a} It was [MASK] .", verbalizer=("terrible", "great")),
    "mrpc": _glue("mrpc", "MRPC", "#1 String", "#2 String", "Quality", ("0", "1"), ("f1", "acc"),
                  template="{a} [MASK] , {b}", verbalizer=("no", "yes")),
    "stsb": TaskSpec(name="stsb", subdir="STS-B", text_a="sentence1", text_b="sentence2", label="score",
                     kind="regression", metrics=("pearson", "spearman"), epochs=10.0),
    "qqp": _glue("qqp", "QQP", "question1", "question2", "is_duplicate", ("0", "1"), ("f1", "acc")),
    "mnli": _glue("mnli", "MNLI", "sentence1", "sentence2", "gold_label", ("contradiction", "entailment", "neutral"),
                  eval_files={"m": "dev_matched.tsv", "mm": "dev_mismatched.tsv"},
                  template="{a} ? [MASK] , {b}", verbalizer=("no", "yes", "maybe")),
    "qnli": _glue("qnli", "QNLI", "question", "sentence", "label", ("entailment", "not_entailment"),
                  template="{a} ? [MASK] , {b}", verbalizer=("yes", "no")),
    "rte": _glue("rte", "RTE", "sentence1", "sentence2", "label", ("entailment", "not_entailment"), epochs=10.0,
                 template="{a} ? [MASK] , {b}", verbalizer=("yes", "no")),
    "wnli": _glue("wnli", "WNLI", "sentence1", "sentence2", "label", ("0", "1")),
    "chnsenticorp": TaskSpec(name="chnsenticorp", subdir="chnsenticorp", text_a="text_a", label="label",
                             labels=("0", "1"), template="{a}。很[MASK]。", verbalizer=("差", "好")),
}
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "chnsenti": "chnsenticorp"}


def get_task(name_or_path: str | Path) -> TaskSpec:
    """A built-in task by name (case-insensitive) or a TaskSpec YAML file."""
    key = str(name_or_path).lower()
    key = _ALIASES.get(key, key)
    if key in BUILTIN:
        return BUILTIN[key]
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        spec = TaskSpec.from_yaml(p)
        if spec.data_dir is not None and not Path(spec.data_dir).is_absolute():  # relative to the spec file
            spec = spec.replace(data_dir=str(p.parent / spec.data_dir))
        return spec
    if not p.exists() and (p.suffix in (".yaml", ".yml") or len(p.parts) > 1):
        # A path that names no file is a misspelled spec, not a task unknown by name: say which file.
        raise InputNotFoundError(f"task spec {p}: file not found (no such file; a task is a task spec .yaml file "
                                 f"or a built-in: {sorted(BUILTIN)})")
    raise ValueError(f"unknown task {name_or_path!r}: not a built-in ({sorted(BUILTIN)}) nor a task spec .yaml file")


@dataclass
class Example:
    text_a: str
    text_b: str | None
    label: int | float
    line: int


@dataclass
class TaskData:
    spec: TaskSpec
    labels: tuple[str, ...]  # class names (empty for regression)
    train: list[Example]
    evals: dict[str, list[Example]]
    files: dict[str, str]
    split: dict | None = None  # the dev split taken from train (dev_fraction), eval/split.py
    @property
    def num_labels(self) -> int:
        return 1 if self.spec.kind == "regression" else len(self.labels)

    def summary(self) -> str:
        """Label set and class balance per split, printed before training."""
        lines = [f"task {self.spec.name} ({self.spec.kind}); files: {self.files['train']}"]
        if self.split is not None:
            lines.append(f"  dev: {self.split['dev_fraction']:g} of the train file (seed {self.split['split_seed']}"
                         f"{', stratified by label' if self.split['stratified_by_label'] else ''})")
        for split, exs in [("train", self.train), *self.evals.items()]:
            if self.spec.kind == "regression":
                ys = [e.label for e in exs]
                lo, hi = (min(ys), max(ys)) if ys else (float("nan"),) * 2
                mean = sum(ys) / max(1, len(ys))
                lines.append(f"  {split}: {len(exs)} examples, label range [{lo:g}, {hi:g}], mean {mean:.3f}")
            else:
                counts = collections.Counter(e.label for e in exs)
                bal = ", ".join(f"{self.labels[i]}: {counts[i]} ({counts[i] / max(1, len(exs)):.1%})"
                                for i in range(len(self.labels)))
                lines.append(f"  {split}: {len(exs)} examples; {bal}")
        return "\n".join(lines)


def resolve_dir(spec: TaskSpec, data_dir: str | Path | None) -> Path:
    """The folder holding the task's files: data_dir/subdir, data_dir/glue/subdir or data_dir itself."""
    root = data_dir or spec.data_dir or os.environ.get("ENCODERLAB_DATA_DIR")
    if root is None:
        raise ValueError(f"task {spec.name}: no data directory; pass --data-dir (a GLUE-style root with "
                         f"{spec.subdir or spec.name}/{spec.train}) or set ENCODERLAB_DATA_DIR")
    root = Path(root)
    candidates = [root / spec.subdir, root / "glue" / spec.subdir, root] if spec.subdir else [root]
    for c in candidates:
        if (c / spec.train).exists():
            return c
    raise TaskDataError(f"task {spec.name}: {spec.train} not found in any of {[str(c) for c in candidates]}")


def load_task(spec: TaskSpec, data_dir: str | Path | None = None) -> TaskData:
    """Every split of a task, each checked to hold at least one example before any training (an
    empty or header-only file is refused by name); with ``dev_fraction`` the dev split is taken from
    the train file (eval/split.py) and recorded in ``TaskData.split``."""
    d = resolve_dir(spec, data_dir)
    eval_files = dict(spec.eval_files)
    if spec.dev_fraction is not None and "dev" in eval_files:
        own = d / eval_files.pop("dev")
        if own.exists():
            raise TaskDataError(f"task {spec.name}: dev_fraction {spec.dev_fraction} takes a dev split from "
                                f"{d / spec.train}, but the task also has a dev file, {own}: keep one (remove "
                                "dev_fraction to score on the file, or drop eval_files' dev to split train)")
    train_rows = list(read_rows(spec, d / spec.train))
    labels = spec.labels
    if spec.kind == "classification" and not labels:
        labels = tuple(sorted({r[2] for r in train_rows}))
    train = _nonempty([_example(spec, labels, r, d / spec.train) for r in train_rows], d / spec.train)
    evals, split = {}, None
    if spec.dev_fraction is not None:

        train, evals["dev"], split = split_train(train, spec.dev_fraction, spec.split_seed,
                                                 stratified=spec.kind == "classification", path=d / spec.train)
    for name, fname in eval_files.items():
        evals[name] = _nonempty([_example(spec, labels, r, d / fname) for r in read_rows(spec, d / fname)], d / fname)
    files = {"train": str(d / spec.train), **{k: str(d / v) for k, v in eval_files.items()}}
    return TaskData(spec=spec, labels=labels, train=train, evals=evals, files=files, split=split)


def _nonempty(examples: list[Example], path: Path) -> list[Example]:
    """A split with no example would train on nothing or score nothing (an IndexError at the end
    of training, once): it is refused before anything runs."""
    if not examples:
        raise TaskDataError(f"{path}: no examples (an empty file, or a header only); every split of a task needs "
                            "at least one")
    return examples


def _example(spec: TaskSpec, labels: tuple[str, ...], row, path: Path) -> Example:
    line, (a, b), raw = row
    if spec.kind == "regression":
        try:
            y: int | float = float(raw)
        except ValueError:
            raise TaskDataError(
                f"{path}:{line}: label {raw!r} is not a number (task {spec.name} is a regression)") from None
    else:
        if raw not in labels:
            raise TaskDataError(f"{path}:{line}: unknown label {raw!r}; valid labels: {list(labels)}")
        y = labels.index(raw)
    return Example(text_a=a, text_b=b, label=y, line=line)


def read_rows(spec: TaskSpec, path: Path):
    """Yield (line number, (text_a, text_b), raw label string) for every data row of a file."""
    if not path.exists():
        raise TaskDataError(f"{path}: file not found (task {spec.name})")
    cols = [spec.text_a] + ([spec.text_b] if spec.text_b else [])
    if spec.format == "jsonl":
        yield from _jsonl_rows(spec, path, cols)
        return
    lines = decoded_lines(path, encoding=spec.encoding)
    if spec.format == "tsv":
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(lines)
    width, index = None, None
    for line, row in _csv_rows(reader, path):
        if not row:
            continue
        if index is None:
            width = len(row)
            if spec.header:
                index = _column_index(row, cols + [spec.label], path)
                continue
            index = _column_index([str(i) for i in range(width)], cols + [spec.label], path)
        if len(row) != width:
            raise TaskDataError(f"{path}:{line}: expected {width} columns, got {len(row)} (is a tab or quote "
                                f"inside a field?)")
        texts = [row[index[c]].strip() for c in cols]
        for c, t in zip(cols, texts):
            if not t:
                raise TaskDataError(f"{path}:{line}: empty text in column {c!r}")
        yield line, (texts[0], texts[1] if len(texts) > 1 else None), row[index[spec.label]].strip()


def _csv_rows(reader, path: Path):
    """(line number, row) from a csv reader; the csv module's own errors get the file and line."""
    while True:
        try:
            row = next(reader, None)
        except csv.Error as e:  # e.g. a field over the csv module's size limit
            raise TaskDataError(f"{path}:{reader.line_num}: {e}") from None
        if row is None:
            return
        yield reader.line_num, row


def _column_index(names: list[str], wanted: list[str], path: Path) -> dict[str, int]:
    index = {n.strip(): i for i, n in enumerate(names)}
    missing = [w for w in wanted if w not in index]
    if missing:
        raise TaskDataError(f"{path}:1: column(s) {missing} not found; columns: {list(index)}")
    return {w: index[w] for w in wanted}




def _jsonl_rows(spec: TaskSpec, path: Path, cols: list[str]):
    for line, obj in iter_jsonl(path, TaskDataError, spec.encoding):
        missing = [k for k in cols + [spec.label] if k not in obj]
        if missing:
            raise TaskDataError(f"{path}:{line}: missing key(s) {missing}")
        texts = [str(obj[c]).strip() if obj[c] is not None else "" for c in cols]
        for c, t in zip(cols, texts):
            if not t:
                raise TaskDataError(f"{path}:{line}: empty text in field {c!r}")
        label = obj[spec.label]
        label = str(int(label)) if isinstance(label, bool) else str(label)
        yield line, (texts[0], texts[1] if len(texts) > 1 else None), label.strip()
