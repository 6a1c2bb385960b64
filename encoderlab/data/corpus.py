"""Streaming corpus readers: files, directories and globs -> documents (str), never the whole corpus.

Formats: plain text (``.txt``, ``.gz``, ``.zst``; one document per blank-line block, per line or per
file), WikiExtractor output (``<doc ...>`` blocks, tags and title line dropped), JSONL with a text
field, CSV/TSV with a text column, Parquet (needs ``pyarrow``) and Hugging Face ``datasets`` saved
with ``save_to_disk`` (needs ``datasets``).

Bad input is counted, not fatal and never silent: invalid UTF-8 bytes become U+FFFD and are
counted, unless they are more than ``max_invalid_share`` (1%) of a file's characters (and at least
16): then the file is in another encoding and is refused, naming its likely encoding and the
``iconv`` command (data/encoding.py; ``encoding`` reads a file that is not UTF-8); empty and
binary files are skipped with a warning naming them; a bad record (JSONL that does not parse, a
CSV row without the text column, an unterminated CSV quote) is skipped and counted with its file
and line, and the records around it are kept; a compressed file that ends
early keeps what was read and is counted in ``damaged_files``; a missing path is an error naming
it. Files are read in fixed-size blocks, so a single 100 MB line never sits in memory whole:
lines longer than ``max_line_chars`` arrive in pieces and documents longer than ``max_doc_chars``
are emitted as consecutive documents (counted in ``split_documents``).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import glob
import gzip
import json
import logging
import re
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from encoderlab.config import Config, ConfigError
from encoderlab.data.encoding import MIN_INVALID, check_encoding, conversion_hint
from encoderlab.errors import DataError, InputNotFoundError

log = logging.getLogger("encoderlab.data")

Format = Literal["auto", "text", "wikiextractor", "jsonl", "csv", "tsv", "parquet", "hf_dataset"]
_BLOCK = 1 << 20  # bytes read at a time
_SURROGATE = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of each invalid byte


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusConfig(Config):
    paths: tuple[str, ...] = ()
    format: Format = "auto"
    # text files only: a document per blank-line-separated block, per line, or per file
    doc_split: Literal["blank_line", "line", "file"] = "blank_line"
    text_field: str = "text"  # JSONL key / CSV, TSV, Parquet, datasets column
    max_line_chars: int = 1 << 20
    max_doc_chars: int = 4 << 20
    # Text files' encoding (any Python codec: gb18030, big5, shift_jis, cp1252, utf-16, ...).
    encoding: str = "utf-8"
    # A file whose bytes that do not decode are more than this share of its characters (and at
    # least 16) is refused as being in another encoding; 1.0 replaces and counts them, whatever
    # their share.
    max_invalid_share: float = 0.01

    def validate(self) -> None:
        if self.max_line_chars < 1024 or self.max_doc_chars < self.max_line_chars:
            raise ConfigError("need max_doc_chars >= max_line_chars >= 1024")
        if (why := check_encoding(self.encoding)) is not None:
            raise ConfigError(why)
        if not 0.0 <= self.max_invalid_share <= 1.0:
            raise ConfigError(f"max_invalid_share must be in [0, 1], got {self.max_invalid_share}")


@dataclasses.dataclass
class CorpusStats:
    files: int = 0
    documents: int = 0
    characters: int = 0
    replaced_bytes: int = 0
    split_documents: int = 0
    bad_records: int = 0
    skipped_files: list[str] = dataclasses.field(default_factory=list)
    damaged_files: list[str] = dataclasses.field(default_factory=list)  # read up to a decoding error

    def summary(self) -> str:
        return (
            f"{self.documents:,} documents, {self.characters:,} characters from {self.files} file(s); "
            f"skipped {len(self.skipped_files)} file(s), replaced {self.replaced_bytes:,} invalid "
            f"UTF-8 byte(s), {self.bad_records} bad record(s), split {self.split_documents} "
            f"over-long document(s)" + (f"; {len(self.damaged_files)} damaged file(s) read up to the damage"
                                        if self.damaged_files else "")
        )


def resolve_paths(paths: tuple[str, ...] | list[str], *, keep_dirs: bool = False) -> list[Path]:
    """Expand globs and directories (recursively, sorted); a path that matches nothing is an error."""
    if not paths:
        raise DataError("no corpus paths given")
    out: list[Path] = []
    for p in paths:
        p = str(p)
        if any(c in p for c in "*?["):
            matches = sorted(Path(m) for m in glob.glob(p, recursive=True))
            if not matches:
                raise InputNotFoundError(f"corpus glob {p!r} matches no file")
            out.extend(m for m in matches if m.is_file())
        elif Path(p).is_dir() and not keep_dirs:
            out.extend(sorted(f for f in Path(p).rglob("*") if f.is_file() and not f.name.startswith(".")))
        elif Path(p).exists():
            out.append(Path(p))
        else:
            raise InputNotFoundError(f"corpus path {p} does not exist")
    return out


class Corpus:
    """Iterate documents of a corpus; ``stats`` is filled as it goes (complete after one pass)."""

    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg
        self.files = resolve_paths(cfg.paths, keep_dirs=cfg.format == "hf_dataset")
        self.stats = CorpusStats()

    def __iter__(self) -> Iterator[str]:
        self.stats = CorpusStats()
        for path in self.files:
            self.stats.files += 1
            try:
                for doc in self._documents(path):
                    if doc.strip():
                        self.stats.documents += 1
                        self.stats.characters += len(doc)
                        yield doc
            except (OSError, EOFError, zlib.error) as e:  # a truncated .gz/.zst, an unreadable file
                log.warning("%s: read error after %s document(s) so far, rest of the file skipped: %s",
                            path, f"{self.stats.documents:,}", e)
                self.stats.damaged_files.append(str(path))

    def describe(self) -> str:
        """Where this corpus looked and what it found, for messages such as "no text found"."""
        shown = ", ".join(str(f) for f in self.files[:5]) + (f" and {len(self.files) - 5} more"
                                                             if len(self.files) > 5 else "")
        return f"{', '.join(self.cfg.paths)} ({len(self.files)} file(s): {shown or 'none'}); {self.stats.summary()}"

    # ---- per format ---------------------------------------------------------------------------
    def _documents(self, path: Path) -> Iterator[str]:
        fmt = self.cfg.format if self.cfg.format != "auto" else _format_from_name(path)
        if fmt == "parquet":
            yield from self._parquet(path)
            return
        if fmt == "hf_dataset":
            yield from self._hf_dataset(path)
            return
        if path.stat().st_size == 0:
            self._skip(path, "empty file")
            return
        try:
            pieces = _read_pieces(path, self.cfg, self.stats)
            first = next(pieces, None)
        except _Binary:
            self._skip(path, "binary file (NUL bytes)")
            return
        if first is None:
            self._skip(path, "empty file")
            return
        if fmt == "text" and first[0].startswith("<doc "):
            fmt = "wikiextractor"
        pieces = _chain(first, pieces)
        if fmt == "jsonl":
            yield from self._jsonl(path, pieces)
        elif fmt in ("csv", "tsv"):
            yield from self._csv(path, pieces, delimiter="," if fmt == "csv" else "\t")
        else:
            yield from self._text(pieces, wiki=fmt == "wikiextractor")

    def _skip(self, path: Path, why: str) -> None:
        log.warning("skipping %s: %s", path, why)
        self.stats.skipped_files.append(str(path))

    def _text(self, pieces: Iterator[tuple[str, bool]], *, wiki: bool) -> Iterator[str]:
        mode = "wiki" if wiki else self.cfg.doc_split
        limit = self.cfg.max_doc_chars
        parts: list[str] = []
        size = 0
        expect_title = False
        for text, line_end in pieces:
            if mode == "wiki" and line_end and not parts and (text.startswith("<doc ") or expect_title):
                expect_title = text.startswith("<doc ")  # the title line follows the tag: drop both
                continue
            boundary = (
                (mode == "line" and line_end)
                or (mode == "blank_line" and line_end and not text.strip())
                or (mode == "wiki" and line_end and text.startswith("</doc>"))
            )
            if boundary:
                if mode == "line":
                    parts.append(text)
                yield "".join(parts).strip("\n")
                parts, size = [], 0
                continue
            parts.append(text + ("\n" if line_end else ""))
            size += len(text)
            if size >= limit:  # keep memory bounded: an over-long document continues as the next one
                self.stats.split_documents += 1
                yield "".join(parts).strip("\n")
                parts, size = [], 0
        if parts:
            yield "".join(parts).strip("\n")

    def _jsonl(self, path: Path, pieces: Iterator[tuple[str, bool]]) -> Iterator[str]:
        for lineno, line in enumerate(_whole_lines(pieces), 1):
            if not line.strip():
                continue
            try:
                text = json.loads(line)[self.cfg.text_field]
                if not isinstance(text, str):
                    raise TypeError(f"{self.cfg.text_field!r} is {type(text).__name__}, not a string")
            except (ValueError, KeyError, TypeError) as e:
                self._bad(f"{path}:{lineno}: {type(e).__name__}: {e}")
                continue
            yield from _cap(text, self.cfg.max_doc_chars, self.stats)

    def _csv(self, path: Path, pieces: Iterator[tuple[str, bool]], delimiter: str) -> Iterator[str]:
        csv.field_size_limit(1 << 30)
        records = self._csv_records(path, pieces, delimiter)  # TSVs: quoting off, they hold bare quotes
        header_line, header = next(records, (1, []))
        header = [h.lstrip("\ufeff") for h in header]
        if self.cfg.text_field not in header:
            raise DataError(f"{path}:{header_line}: no column {self.cfg.text_field!r}; columns are {header}")
        col = header.index(self.cfg.text_field)
        for line, row in records:
            if len(row) <= col:
                self._bad(f"{path}:{line}: {len(row)} field(s), expected > {col}")
                continue
            yield from _cap(row[col], self.cfg.max_doc_chars, self.stats)

    def _csv_records(self, path: Path, pieces: Iterator[tuple[str, bool]],
                     delimiter: str) -> Iterator[tuple[int, list[str]]]:
        """``(line, fields)`` per record. A quoted CSV field may span lines; a stray quote would then
        swallow every later line into one record, silently. So a record still open at the end of
        the file or after max_doc_chars characters, or one the (strict) parser refuses, is counted
        bad by its first line, and reading resumes at the line after that one."""
        if delimiter == "\t":  # TSVs are read with quoting off: one record per line, fields between tabs
            for line, text in enumerate(_whole_lines(pieces), 1):  # (not csv: it refuses a bare "\r")
                if text.strip():
                    yield line, text.split("\t")
            return
        numbered = enumerate(_whole_lines(pieces), 1)
        pending: deque[tuple[int, str]] = deque()  # lines read ahead and given back after a bad record
        while (first := pending.popleft() if pending else next(numbered, None)) is not None:
            if not first[1].strip():
                continue
            group, quotes, size = [first], first[1].count('"'), len(first[1])
            while quotes % 2 and size <= self.cfg.max_doc_chars:
                nxt = pending.popleft() if pending else next(numbered, None)
                if nxt is None:
                    break
                group.append(nxt)
                quotes, size = quotes + nxt[1].count('"'), size + len(nxt[1])
            rows: list[list[str]] = []
            why = "unterminated quote"
            if quotes % 2 == 0:
                try:
                    rows = list(csv.reader(["\n".join(t for _, t in group)], delimiter=delimiter, strict=True))
                    why = f"{len(rows)} records in one"
                except csv.Error as e:
                    why = f"malformed quoting ({e})"
            if len(rows) == 1:
                yield first[0], rows[0]
                continue
            self._bad(f"{path}:{first[0]}: {why}")
            pending.extendleft(reversed(group[1:]))

    def _bad(self, msg: str) -> None:
        self.stats.bad_records += 1
        if self.stats.bad_records <= 10:
            log.warning("skipping bad record %s", msg)

    def _parquet(self, path: Path) -> Iterator[str]:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        for batch in pq.ParquetFile(path).iter_batches(columns=[self.cfg.text_field], batch_size=1024):
            for text in batch.column(0).to_pylist():
                if text:
                    yield from _cap(text, self.cfg.max_doc_chars, self.stats)

    def _hf_dataset(self, path: Path) -> Iterator[str]:
        try:
            import datasets
        except ImportError:
            raise DataError(f"{path}: a saved dataset needs `pip install datasets`") from None
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            ds = ds["train"]
        if self.cfg.text_field not in ds.column_names:
            raise DataError(f"{path}: no column {self.cfg.text_field!r}; columns are {ds.column_names}")
        for start in range(0, len(ds), 1024):
            for text in ds[start : start + 1024][self.cfg.text_field]:
                if text:
                    yield from _cap(text, self.cfg.max_doc_chars, self.stats)


class _Binary(Exception):
    pass


def _format_from_name(path: Path) -> str:
    name = path.name.lower()
    for comp in (".gz", ".zst"):
        name = name.removesuffix(comp)
    for suffix, fmt in ((".jsonl", "jsonl"), (".json", "jsonl"), (".csv", "csv"), (".tsv", "tsv")):
        if name.endswith(suffix):
            return fmt
    return "parquet" if name.endswith(".parquet") else "text"


def _open_binary(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".zst":
        try:
            import zstandard
        except ImportError:
            raise DataError(f"{path}: reading .zst needs zstandard (pip install zstandard)") from None
        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
    return open(path, "rb")


def _read_pieces(path: Path, cfg: CorpusConfig, stats: CorpusStats) -> Iterator[tuple[str, bool]]:
    """Yield ``(text, line_end)``: whole lines (without "\\n") or pieces of over-long lines."""
    decoder = codecs.getincrementaldecoder(cfg.encoding)(errors="surrogateescape")
    wide = codecs.lookup(cfg.encoding).name.startswith(("utf-16", "utf-32"))  # NUL bytes are text there
    buf = ""
    bad = chars = 0  # this file's bytes that did not decode, and its characters so far
    # A truncated archive loses the block being decompressed when it fails: keep those small.
    size = _BLOCK if path.suffix not in (".gz", ".zst") else _BLOCK // 16
    with _open_binary(path) as f:
        first, head = True, b""
        while True:
            block = f.read(size)
            if first:
                head = block
                if not wide and block[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a UTF-16 byte-order mark
                    raise DataError(f"{path}: UTF-16 text, not {cfg.encoding}: "
                                    + conversion_hint(path, block, "--encoding NAME (corpus encoding: NAME)"))
                if not wide and b"\x00" in block[:8192]:
                    raise _Binary()
            first = False
            text = decoder.decode(block, final=not block)
            text, n_bad = _SURROGATE.subn("\ufffd", text)
            stats.replaced_bytes += n_bad
            bad, chars = bad + n_bad, chars + len(text)
            if bad >= MIN_INVALID and bad > cfg.max_invalid_share * chars:
                raise DataError(
                    f"{path}: not {cfg.encoding} text: {bad:,} of the first {chars:,} characters were bytes that do "
                    f"not decode ({bad / chars:.0%}; the limit is {cfg.max_invalid_share:.0%}, max_invalid_share); "
                    + conversion_hint(path, head, "--encoding NAME (corpus encoding: NAME)"))
            buf += text
            lines = buf.split("\n")
            buf = lines.pop()
            for line in lines:
                yield line.removesuffix("\r"), True
            while len(buf) > cfg.max_line_chars:  # one huge line: hand it on in pieces, cut at a space if any
                cut = buf.rfind(" ", cfg.max_line_chars - 1000, cfg.max_line_chars)
                cut = cut + 1 if cut > 0 else cfg.max_line_chars
                yield buf[:cut], False
                buf = buf[cut:]
            if not block:
                break
    if buf:
        yield buf.removesuffix("\r"), True


def _chain(first: tuple[str, bool], rest: Iterator[tuple[str, bool]]) -> Iterator[tuple[str, bool]]:
    yield first
    yield from rest


def _whole_lines(pieces: Iterator[tuple[str, bool]]) -> Iterator[str]:
    """Records (JSONL, CSV) must be whole lines; pieces of a long one are joined again."""
    parts: list[str] = []
    for text, line_end in pieces:
        parts.append(text)
        if line_end:
            yield "".join(parts)
            parts = []


def _cap(text: str, limit: int, stats: CorpusStats) -> Iterator[str]:
    if len(text) > limit:
        stats.split_documents += (len(text) - 1) // limit
    for i in range(0, len(text), limit):
        yield text[i : i + limit]
