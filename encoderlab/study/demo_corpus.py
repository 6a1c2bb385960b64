"""The demo's embedded corpus: English prose that every Python installation carries.

Passages are the docstrings of the standard library's modules, classes and functions, read from
the source files with ``ast`` (nothing is imported, so no module's side effects run), plus the
pydoc topics. They are cleaned (dedented, whitespace collapsed, doctest and code lines dropped) and
deduplicated. Nothing is copied into the repository: the text is extracted at run time.

The downstream task is derived from the same source with real labels: which standard-library
package a passage documents (the most frequent packages, balanced by capping).
"""

from __future__ import annotations

import ast
import gc
import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from encoderlab.precision import cache_root

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "__pycache__", "turtledemo", "ensurepip"}
_CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.|\$ |[{}\[\]]|def \w+\(|class \w+[:(]|import [\w.]+\s*$|from [\w.]+ import )")


@dataclass(frozen=True)
class Passage:
    package: str  # top-level stdlib package or module ("email", "json", "collections", ...)
    source: str  # dotted name of the documented object
    text: str


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def clean(doc: str) -> str:
    """Keep the prose: drop doctest/code lines and collapse whitespace."""
    lines = [ln for ln in doc.splitlines() if not _CODE_LINE.match(ln)]
    text = re.sub(r"\s+", " ", " ".join(lines)).strip()
    return text


_BLOCK = ast.stmt | ast.excepthandler | ast.match_case  # what a statement list holds


def _parse(source: str) -> ast.Module:
    """ast.parse with the cyclic garbage collector paused: a syntax tree holds no reference cycles
    (it is freed by reference counting), and in a process that holds many objects (a test session, a
    study) the collections its many allocations trigger took longer than the parse itself."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if paused:
            gc.enable()


def _definitions(tree: ast.Module):
    """The module and every class and function in it, in ast.walk's breadth-first order. Only the
    statement lists are walked: a definition is never inside an expression, and the expressions are
    most of a file's nodes (the full walk was half of the extraction's time)."""
    queue = [tree]
    for node in queue:  # grows as it is read: breadth first
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                queue.extend(item for item in value if isinstance(item, _BLOCK))


def iter_passages(root: Path | None = None, min_words: int = 8):
    """Yield the cleaned docstrings of every stdlib source file under root, in sorted path order."""
    root = root or stdlib_dir()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS for part in rel.parts) or rel.name.startswith("_") and rel.name != "__init__.py":
            continue
        try:
            tree = _parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        package = rel.parts[0].removesuffix(".py")
        dotted = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for node in _definitions(tree):
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            text = clean(doc)
            if len(text.split()) >= min_words:
                name = dotted if isinstance(node, ast.Module) else f"{dotted}.{node.name}"
                yield Passage(package=package, source=name, text=text)


def pydoc_topics(min_words: int = 8):
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip pydoc_data
        return
    for name in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[name]):
            text = clean(para)
            if len(text.split()) >= min_words:
                yield Passage(package="pydoc", source=f"pydoc.{name}", text=text)


def build(out_dir: str | Path, *, num_classes: int = 8, max_per_class: int = 400, dev_fraction: float = 0.2) -> dict:
    """Write ``corpus.txt`` (blank-line separated documents) and ``task/{train,dev}.tsv`` (label, text).

    Deterministic for a given Python installation. Returns counts.
    """
    out = Path(out_dir)
    (out / "task").mkdir(parents=True, exist_ok=True)
    seen, passages = set(), []
    for p in [*iter_passages(), *pydoc_topics()]:
        key = hashlib.sha1(p.text.lower().encode()).hexdigest()
        if key not in seen:
            seen.add(key)
            passages.append(p)
    # The pretraining corpus: every passage, one document each.
    with open(out / "corpus.txt", "w", encoding="utf-8") as f:
        for p in passages:
            f.write(p.text + "\n\n")
    # The task: which package a passage documents, over the most frequent packages.
    counts = Counter(p.package for p in passages if p.package != "pydoc")
    labels = sorted(name for name, _ in counts.most_common(num_classes))
    per_class: dict[str, list[Passage]] = {name: [] for name in labels}
    for p in passages:
        if p.package in per_class and len(per_class[p.package]) < max_per_class:
            per_class[p.package].append(p)
    rows = {"train": [], "dev": []}
    for name in labels:
        for p in per_class[name]:
            h = int(hashlib.sha1(p.source.encode()).hexdigest(), 16) % 1000
            rows["dev" if h < dev_fraction * 1000 else "train"].append((name, p.text))
    for split, items in rows.items():
        with open(out / "task" / f"{split}.tsv", "w", encoding="utf-8") as f:
            f.write("label\ttext\n")
            for label, text in items:
                f.write(f"{label}\t{text.replace(chr(9), ' ')}\n")
    return {"passages": len(passages), "words": sum(len(p.text.split()) for p in passages), "labels": labels,
            "train": len(rows["train"]), "dev": len(rows["dev"])}


def build_cached(out_dir: str | Path) -> dict:
    """build() into ``out_dir`` through encoderlab's cache folder (precision.cache_root()): the
    extraction parses some 600 standard-library files (3-8 s on 2 cores), the same for every study
    run with one Python installation. The entry's key is Python's version, the standard library's
    path and a digest of this module's code, so another Python or a changed extraction builds anew.
    An entry is written to a temporary folder and renamed, so a crash leaves no half entry; the files
    are copied into ``out_dir`` (a study's folder needs no cache to be read). A cache that cannot be
    written is passed by: the corpus is built in place."""
    key = hashlib.sha256(f"{sys.version}|{stdlib_dir()}|".encode() + Path(__file__).read_bytes()).hexdigest()[:16]
    entry = cache_root() / "demo-corpus" / key
    if not (entry / "info.json").exists():
        tmp = entry.with_name(f"{key}.tmp{os.getpid()}")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            info = build(tmp)
            (tmp / "info.json").write_text(json.dumps(info))
            tmp.rename(entry)
        except OSError:  # unwritable cache, or another process renamed its entry first
            shutil.rmtree(tmp, ignore_errors=True)
            if not (entry / "info.json").exists():
                return build(out_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(entry / "corpus.txt", out / "corpus.txt")
    shutil.copytree(entry / "task", out / "task", dirs_exist_ok=True)
    return json.loads((entry / "info.json").read_text())
