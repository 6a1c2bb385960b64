"""Reading the small, curated files of fine-tuning tasks (classification and generation alike):
decoded lines and JSON lines, where a bad line stops the run with an error naming the file and the
line (unlike a corpus, whose bad lines are skipped and counted).
"""

from __future__ import annotations

import json
from pathlib import Path

from encoderlab.data.encoding import conversion_hint, read_sample
from encoderlab.errors import EncoderlabError


class TaskDataError(EncoderlabError):
    """A task file is missing or has a malformed row; the message names the file and line."""


def decoded_lines(path: Path, error: type[Exception] = TaskDataError, encoding: str = "utf-8",
                  setting: str = "encoding: NAME in the task spec"):
    """The lines of a text file (UTF-8 unless ``encoding`` says otherwise; an optional BOM dropped),
    each with its line ending; a line that does not decode raises ``error`` naming the file, the
    line and the byte (Python's own message names neither file nor line), and the file's likely
    encoding with the command that converts it (data/encoding.py)."""

    utf8 = encoding.replace("_", "-").lower() in ("utf-8", "utf8")

    def refuse(line: int, byte: int, column: int):
        return error(f"{path}:{line}: not {'UTF-8' if utf8 else encoding} text (byte 0x{byte:02x} at column "
                     f"{column}); " + conversion_hint(path, read_sample(path), setting))

    if not utf8:  # other codecs: the whole (small) file at once
        raw = path.read_bytes()
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as e:
            line = raw.count(b"\n", 0, e.start) + 1
            raise refuse(line, raw[e.start], e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1) from None
        for line, part in enumerate(text.splitlines(keepends=True), 1):
            yield part.removeprefix("\ufeff") if line == 1 else part
        return
    with open(path, "rb") as f:
        for line, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise refuse(line, raw[e.start], e.start + 1) from None
            yield text.removeprefix("\ufeff") if line == 1 else text


def iter_jsonl(path: Path, error: type[Exception] = TaskDataError, encoding: str = "utf-8"):
    """(line number, object) for each non-blank line; bad JSON, a line that is not a JSON object and
    bytes that do not decode raise ``error`` naming file and line."""
    for line, text in enumerate(decoded_lines(path, error, encoding), 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{line}: invalid JSON ({e.msg})") from None
        except RecursionError:  # "[[[[...": nested deeper than the parser's stack
            raise error(f"{path}:{line}: invalid JSON (nested too deeply)") from None
        if not isinstance(obj, dict):
            raise error(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
        yield line, obj
