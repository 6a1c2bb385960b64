"""Generation tasks: (source, target) pairs split into train / dev / test.

Two kinds of input:

- WikiExtractor output (files whose first line is ``<doc id=... title=...>``, such as
  ../shared/data/enwiki_extract): the *title task*, an article's title generated from its first
  paragraph. The first paragraph is the first non-empty line after the title line; articles
  without one (redirects and stubs, about two thirds of that extract) are skipped. An article's
  split is fixed by a hash of its id, so the split of every article is the same whichever files
  are read and in whatever order (held out by article), and the held-out sets grow, never move,
  as files are added. Within a split, pairs keep file order; the limits take the first N.
- Your own pairs: a directory with ``train`` and ``dev`` (and optionally ``test``) files, or one
  file split by a hash of each row's ``id`` (or source text when there is no id). Files are TSV
  with a header naming ``source`` and ``target`` columns (quoting off: one row per line, tab
  separated) or JSONL with ``source`` and ``target`` strings per line.

Much of the title task is copying (a first paragraph usually opens with its title) and deciding
where the title ends; the benchmark reports a copy-the-lead baseline beside the models.

Every bad input raises a TaskDataError naming the file and line.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from encoderlab.tune.files import TaskDataError, decoded_lines, iter_jsonl

SPLITS = ("train", "dev", "test")
_DOC = re.compile(r'<doc\s+(?P<attrs>[^>]*)>\s*$')
_ATTR = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Pair:
    source: str
    target: str
    id: str  # the article id (title task), the row's id, or file:line


@dataclass
class GenerationTask:
    name: str
    splits: dict[str, list[Pair]]  # train, dev and, when there is one, test
    files: list[str] = field(default_factory=list)
    skipped: int = 0  # articles without a first paragraph, or rows skipped as empty

    def summary(self) -> str:
        sizes = ", ".join(f"{len(v)} {k}" for k, v in self.splits.items())
        return f"task {self.name}: {sizes} pairs from {len(self.files)} file(s); {self.skipped} skipped"

    def to_dict(self) -> dict:
        return {"name": self.name, "sizes": {k: len(v) for k, v in self.splits.items()}, "files": self.files,
                "skipped": self.skipped}


def split_of(key: str, dev: float, test: float) -> str:
    """train, dev or test by a hash of ``key``: fixed for a key, whatever else is read."""
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64  # in [0, 1)
    return "dev" if u < dev else "test" if u < dev + test else "train"


def load_task(path: str | Path, *, dev_fraction: float = 0.05, test_fraction: float = 0.05,
              limits: dict[str, int] | None = None, min_source_words: int = 8) -> GenerationTask:
    """The task at ``path`` (see the module doc). ``limits``: the most pairs to keep per split."""
    path = Path(path)
    if not path.exists():
        raise TaskDataError(f"generation task {path} does not exist")
    if path.is_dir() and any(_split_file(path, s) for s in SPLITS):
        return _split_dir(path, limits or {})
    files = sorted(f for f in path.rglob("*") if f.is_file() and not f.name.startswith(".")) if path.is_dir() \
        else [path]
    if not files:
        raise TaskDataError(f"{path}: an empty directory; expected train.tsv/dev.tsv (or .jsonl) or "
                            "WikiExtractor files")
    if all(_first_line(f).startswith("<doc ") for f in files):
        return wiki_title_task(files, dev_fraction=dev_fraction, test_fraction=test_fraction, limits=limits,
                               min_source_words=min_source_words, name=f"wiki-title:{path.name}")
    if path.is_dir():
        raise TaskDataError(f"{path}: neither a task directory (train.tsv/dev.tsv or .jsonl) nor WikiExtractor "
                            f"output (a file starting '<doc '; {files[0]} starts {_first_line(files[0])[:40]!r})")
    rows = read_pairs(path)
    splits: dict[str, list[Pair]] = {s: [] for s in SPLITS}
    for p in rows:
        splits[split_of(p.id, dev_fraction, test_fraction)].append(p)
    return GenerationTask(path.stem, _limited(splits, limits or {}), [str(path)])


# ---- WikiExtractor: the title task ---------------------------------------------------------------
def wiki_title_task(files: list[Path], *, dev_fraction: float = 0.05, test_fraction: float = 0.05,
                    limits: dict[str, int] | None = None, min_source_words: int = 8,
                    name: str = "wiki-title") -> GenerationTask:
    """(first paragraph -> title) pairs, split by article id (see the module doc)."""
    limits = limits or {}
    splits: dict[str, list[Pair]] = {s: [] for s in SPLITS}
    seen: set[str] = set()
    task = GenerationTask(name, splits)
    for f in files:
        task.files.append(str(f))
        for doc_id, title, paragraph in _articles(f):
            if doc_id in seen:
                raise TaskDataError(f"{f}: article id {doc_id} occurs twice in the files read")
            seen.add(doc_id)
            if paragraph is None or len(paragraph.split()) < min_source_words:
                task.skipped += 1
                continue
            split = split_of(doc_id, dev_fraction, test_fraction)
            if len(splits[split]) < limits.get(split, 1 << 62):
                splits[split].append(Pair(paragraph, title, doc_id))
        if all(len(splits[s]) >= limits.get(s, 1 << 62) for s in SPLITS):
            break  # every split full: later files are not read
    return task


def _articles(f: Path):
    """(id, title, first paragraph or None) per ``<doc>`` block of a WikiExtractor file."""
    doc = None  # (id, title, line of the tag) while inside a block
    state = "out"  # out | title | body
    paragraph = None
    for lineno, line in enumerate(_lines(f), 1):
        if state == "out":
            if not line.strip():
                continue
            m = _DOC.match(line)
            if not m:
                raise TaskDataError(f"{f}:{lineno}: expected a '<doc id=... title=...>' line, got {line[:60]!r}")
            attrs = dict(_ATTR.findall(m.group("attrs")))
            if not attrs.get("id") or "title" not in attrs:
                raise TaskDataError(f"{f}:{lineno}: <doc> tag without an id and a title: {line[:80]!r}")
            doc, state, paragraph = (attrs["id"], html.unescape(attrs["title"]).strip(), lineno), "title", None
        elif line.startswith("</doc>"):
            yield doc[0], doc[1], paragraph
            state = "out"
        elif line.startswith("<doc "):
            raise TaskDataError(f"{f}:{lineno}: a new <doc> before the </doc> of the one opened at line {doc[2]}")
        elif state == "title":
            state = "body"  # WikiExtractor repeats the title as the first line: skipped
        elif paragraph is None and line.strip():
            paragraph = line.strip()
    if state != "out":
        raise TaskDataError(f"{f}: the <doc> opened at line {doc[2]} has no </doc> (truncated file?)")


# ---- your own pairs ------------------------------------------------------------------------------
def read_pairs(f: Path) -> list[Pair]:
    """(source, target) rows of a TSV (header with source and target columns) or JSONL file."""
    suffix = f.suffix.lower()
    if suffix not in (".tsv", ".jsonl", ".json"):
        raise TaskDataError(f"{f}: pairs are read from .tsv or .jsonl files, not {suffix or 'no suffix'!r}")
    rows = []
    if suffix == ".tsv":
        lines = _lines(f)
        header = next(lines, "").lstrip("\ufeff").split("\t")
        missing = [c for c in ("source", "target") if c not in header]
        if missing:
            raise TaskDataError(f"{f}:1: the header has no {' and no '.join(missing)} column; columns are {header}")
        col = {c: header.index(c) for c in ("source", "target")}
        id_col = header.index("id") if "id" in header else None
        for lineno, line in enumerate(lines, 2):
            if not line.strip():
                continue
            cells = line.split("\t")
            if len(cells) != len(header):
                raise TaskDataError(f"{f}:{lineno}: {len(cells)} field(s), the header has {len(header)}")
            row_id = cells[id_col] if id_col is not None else cells[col["source"]]
            rows.append(_pair(f, lineno, cells[col["source"]], cells[col["target"]], row_id))
        return rows
    for lineno, obj in iter_jsonl(f):
        if not all(isinstance(obj.get(k), str) for k in ("source", "target")):
            raise TaskDataError(f"{f}:{lineno}: expected an object with string fields 'source' and 'target'")
        rows.append(_pair(f, lineno, obj["source"], obj["target"], str(obj.get("id", obj["source"]))))
    return rows


def _pair(f: Path, lineno: int, source: str, target: str, row_id: str) -> Pair:
    if not source.strip() or not target.strip():
        raise TaskDataError(f"{f}:{lineno}: empty {'source' if not source.strip() else 'target'}")
    return Pair(source.strip(), target.strip(), row_id)


def _split_file(d: Path, split: str) -> Path | None:
    return next((d / f"{split}{s}" for s in (".tsv", ".jsonl") if (d / f"{split}{s}").exists()), None)


def _split_dir(d: Path, limits: dict[str, int]) -> GenerationTask:
    splits, files = {}, []
    for s in SPLITS:
        f = _split_file(d, s)
        if f is None:
            if s == "test":
                continue
            raise TaskDataError(f"{d}: no {s}.tsv or {s}.jsonl (a task directory needs train and dev files)")
        splits[s], files = read_pairs(f), [*files, str(f)]
        if not splits[s]:
            raise TaskDataError(f"{f}: no pairs")
    return GenerationTask(d.name, _limited(splits, limits), files)


def _limited(splits: dict[str, list[Pair]], limits: dict[str, int]) -> dict[str, list[Pair]]:
    return {s: v[: limits[s]] if s in limits else v for s, v in splits.items()}


def _lines(f: Path):
    """Lines without their newline; bytes that are not UTF-8 are an error naming the line."""
    return (line.rstrip("\r\n") for line in decoded_lines(f))


def _first_line(f: Path) -> str:
    try:
        with open(f, "rb") as fh:
            return fh.readline(4096).decode("utf-8", "replace").lstrip("\ufeff")
    except OSError as e:
        raise TaskDataError(f"{f}: unreadable ({e})") from None
