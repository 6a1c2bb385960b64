"""The one tokenizer stack: training (WordPiece, BERT-style; or SentencePiece-style Unigram,
ALBERT's), loading a tokenizer directory, and encoding for the token store and for models.

Every family in a comparison shares one tokenizer; its :attr:`Tokenizer.hash` is recorded in each
token store, which refuses a different one. Special tokens are [PAD] [UNK] [CLS] [SEP] [MASK] with
ids 0..4 (so padding is id 0 everywhere). A trained directory loads with
``transformers.BertTokenizerFast.from_pretrained(dir)`` (WordPiece) or ``PreTrainedTokenizerFast``
(Unigram), and with :func:`load_tokenizer`, which also reads the directories of imported
checkpoints: ``tokenizer.json``, or a bare BERT ``vocab.txt`` rebuilt as BERT's fast tokenizer.
Lowercasing has one rule: ``do_lower_case`` in the directory's ``tokenizer_config.json``, true when
absent (transformers' BertTokenizer default); it is never guessed from the vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

from encoderlab.errors import DataError, InputNotFoundError

log = logging.getLogger("encoderlab.data")

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # what train_tokenizer writes
ROLE_NAMES = {  # accepted spellings per role, for imported tokenizers (ALBERT uses <pad>, <unk>)
    "pad": ("[PAD]", "<pad>"),
    "unk": ("[UNK]", "<unk>"),
    "cls": ("[CLS]", "<s>"),
    "sep": ("[SEP]", "</s>"),
    "mask": ("[MASK]", "<mask>"),
}


def train_tokenizer(
    texts: Iterable[str],
    *,
    vocab_size: int,
    out: str | Path | None = None,
    model: Literal["wordpiece", "unigram"] = "wordpiece",
    lowercase: bool = True,
    strip_accents: bool | None = None,
    min_frequency: int = 2,
) -> Tokenizer:
    """Train on an iterable of documents; ``strip_accents=None`` follows ``lowercase`` as BERT does.

    A corpus with no text is an error (a tokenizer of the five special tokens alone would let every
    later step run on [UNK]s); nothing is written then. A vocabulary smaller than asked for (the
    corpus has fewer distinct pieces) is kept and logged: the store records the real size.

    WordPiece training is deterministic: the same corpus gives the same files in every process, at
    every thread count (_continuation_pieces says why it was not). Unigram's is not, bit for bit:
    tokenizers' Unigram trainer sums its EM counts in hash-map order, in chunks of one per thread,
    so the scores differ in their last digits and pieces of equal score change places.
    """
    # BERT's normalizer: clean control chars, put spaces around every CJK character (so each one is
    # its own token), optional lowercasing and accent stripping.
    normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    specials = list(SPECIAL_TOKENS)
    # The trainer's progress bars (indicatif) print only blank lines when stdout is not a terminal
    # (three of them, in a log file or a pipe); on a terminal they are useful.
    bars = sys.stdout.isatty()
    if model not in ("wordpiece", "unigram"):
        raise ValueError(f"unknown tokenizer model {model!r}; expected 'wordpiece' or 'unigram'")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        seen = _Counted(texts, spool if model == "wordpiece" else None)
        if model == "wordpiece":
            pinned = specials + _continuation_pieces(seen, normalizer, specials)  # the first pass
            tok = _wordpiece_tokenizer(normalizer)
            tok.train_from_iterator(seen, trainers.WordPieceTrainer(
                vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=pinned, show_progress=bars))
            # Rebuilt with the five specials as its only added tokens (the continuation pieces were
            # passed as special only to fix their ids), numbered canonically: the trainer numbers
            # its alphabet in hash-map order too, and WordPiece ids carry no meaning.
            rest = sorted(set(tok.get_vocab()) - set(specials))
            tok = _wordpiece_tokenizer(normalizer, {t: i for i, t in enumerate([*specials, *rest])})
            tok.add_special_tokens(specials)
        else:
            tok = tokenizers.Tokenizer(models.Unigram())
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁")]
            )
            tok.decoder = decoders.Metaspace(replacement="▁")
            tok.normalizer = normalizer
            tok.train_from_iterator(seen, trainers.UnigramTrainer(
                vocab_size=vocab_size, special_tokens=specials, unk_token="[UNK]", show_progress=bars))
            log.warning("a Unigram tokenizer is not reproducible bit for bit (its scores and the order of equal "
                        "ones vary from run to run); a study's tokenizer is WordPiece, which is")
    if seen.nonblank == 0:
        where = texts.describe() if hasattr(texts, "describe") else f"{seen.total} document(s), all blank"
        raise DataError(f"no text found to train a tokenizer on: looked in {where}")
    for i, name in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(name) == i, f"{name} got id {tok.token_to_id(name)}, expected {i}"
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    wrapped = Tokenizer(tok, lowercase=lowercase)
    if wrapped.vocab_size < vocab_size:
        log.warning("vocabulary capped at %d of the %d asked for: the corpus has no more distinct pieces "
                    "(min_frequency %d)", wrapped.vocab_size, vocab_size, min_frequency)
    if out is not None:
        wrapped.save(out)
    return wrapped


def _wordpiece_tokenizer(normalizer, vocab: dict[str, int] | None = None) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]") if vocab else
                               models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def _continuation_pieces(seen: _Counted, normalizer, specials: list[str]) -> list[str]:
    """Every ``##c`` piece the corpus has (a character inside a word), sorted; read by a first pass
    of the trainer that stops before its first merge, over the documents spooled as they went by.

    Why: the WordPiece (BPE) trainer gives these pieces ids in the order it walks its word-count
    hash map, whose seed is random in every process, and it breaks ties between pairs of equal count
    by those ids. On a corpus with many ties (a Chinese one at min_frequency 2) two runs merged
    different pairs: 5,904 and 5,907 pieces, other hashes. Handed over as special tokens, which
    the trainer numbers first and in the order given, they get the same ids in every process and
    every later merge, and so the vocabulary, is the same (tests/test_tokenizer_determinism.py)."""
    first = _wordpiece_tokenizer(normalizer)
    first.train_from_iterator(seen, trainers.WordPieceTrainer(vocab_size=0, special_tokens=specials,
                                                             show_progress=False))
    seen.replay = True
    return sorted(t for t in first.get_vocab() if t.startswith("##"))


class _Counted:
    """Passes documents through to the trainer, counting them (the trainer reports nothing). With a
    ``spool`` (an open text file) the first pass writes each document to it, one JSON string a line,
    and a pass after ``replay`` is set reads them back: ``texts`` may be a one-pass generator."""

    def __init__(self, texts: Iterable[str], spool=None):
        self.texts, self.spool, self.total, self.nonblank = texts, spool, 0, 0
        self.replay = False

    def __iter__(self) -> Iterator[str]:
        if self.replay:
            self.spool.seek(0)
            for line in self.spool:
                yield json.loads(line)
            return
        for text in self.texts:
            self.total += 1
            self.nonblank += bool(text.strip())
            if self.spool is not None:
                self.spool.write(json.dumps(text, ensure_ascii=False) + "\n")
            yield text


@dataclass
class Encoded:
    """One model input: [CLS] a [SEP] (b [SEP]), truncated; see :meth:`Tokenizer.encode_inputs`."""

    ids: list[int]
    type_ids: list[int]
    special: list[bool]  # True at [CLS]/[SEP]/[PAD]: positions that are not text
    tokens: list[str]


class Tokenizer:
    """A thin wrapper over ``tokenizers.Tokenizer`` with the ids and tables the pipeline needs.

    [CLS] and [SEP] (or <s>, </s>) are required; a tokenizer without [PAD], [UNK] or [MASK] still
    encodes fine-tuning inputs (padding then uses id 0), and :meth:`require_all_roles` refuses it
    where those ids are needed (a token store)."""

    def __init__(self, tok: tokenizers.Tokenizer, *, lowercase: bool = True, source: str = ""):
        tok.no_truncation()
        tok.no_padding()
        self.tok = tok
        self.lowercase = lowercase
        self.source = source
        self.model_type: str = json.loads(tok.to_str())["model"]["type"]
        vocab = tok.get_vocab(with_added_tokens=True)
        self.vocab_size = max(vocab.values()) + 1
        self.role_ids: dict[str, int | None] = {
            role: next((vocab[n] for n in names if n in vocab), None) for role, names in ROLE_NAMES.items()}
        for role in ("cls", "sep"):
            if self.role_ids[role] is None:
                raise ValueError(f"tokenizer has no {role} token (looked for {list(ROLE_NAMES[role])})")
        self.cls_id: int = self.role_ids["cls"]
        self.sep_id: int = self.role_ids["sep"]
        self.unk_id, self.mask_id = self.role_ids["unk"], self.role_ids["mask"]
        self.pad_id: int = self.role_ids["pad"] if self.role_ids["pad"] is not None else 0
        self.special_ids = tuple(sorted(i for i in self.role_ids.values() if i is not None))

    def require_all_roles(self) -> None:
        """Refuse a tokenizer that lacks one of the five special tokens (pretraining needs each)."""
        missing = [r for r, i in self.role_ids.items() if i is None]
        if missing:
            raise DataError(f"{self.source or 'tokenizer'}: no {', '.join(missing)} token (looked for "
                            + "; ".join(f"{r}: {list(ROLE_NAMES[r])}" for r in missing) + ")")

    @property
    def mask_token(self) -> str | None:
        return self.tok.id_to_token(self.mask_id) if self.mask_id is not None else None

    # ---- identity -----------------------------------------------------------------------------
    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the tokenizer: equal hashes give equal token ids."""
        canonical = json.dumps(json.loads(self.tok.to_str()), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    # ---- token-store encoding: whole texts, no [CLS]/[SEP] unless asked --------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=add_special_tokens)]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def id_to_token(self, i: int) -> str | None:
        return self.tok.id_to_token(int(i))

    def token_to_id(self, token: str) -> int | None:
        return self.tok.token_to_id(token)

    # ---- model inputs ---------------------------------------------------------------------------
    def encode_inputs(self, a: list[str], b: list[str] | None = None, max_length: int = 128) -> list[Encoded]:
        """Texts (or pairs) as [CLS] a [SEP] (b [SEP]), truncated to ``max_length`` tokens."""
        self.tok.enable_truncation(max_length)
        try:
            out = self.tok.encode_batch(list(zip(a, b)) if b is not None else list(a), add_special_tokens=True)
        finally:
            self.tok.no_truncation()  # encode() and the token store see whole texts
        return [Encoded(e.ids, e.type_ids, [bool(s) for s in e.special_tokens_mask], e.tokens) for e in out]

    def encode_input(self, a: str, b: str | None = None, max_length: int = 512) -> Encoded:
        return self.encode_inputs([a], [b] if b is not None else None, max_length)[0]

    def word_pieces(self, word: str) -> list[int]:
        """The piece ids of a word (a verbalizer's label word): one or more, none of them [UNK] or special."""
        e = self.tok.encode(word, add_special_tokens=False)
        if not e.ids:
            raise ValueError(f"label word {word!r} is no tokens at all in {self.source}: choose a word with letters")
        if any(i in self.special_ids for i in e.ids):
            raise ValueError(f"label word {word!r} is {e.tokens} in {self.source}: a special or unknown token "
                             "cannot be scored as a word; choose a word the vocabulary spells")
        return list(e.ids)

    def word_start_table(self) -> np.ndarray:
        """(V,) bool: does token i begin a word? WordPiece: not a ``##`` piece; Unigram: starts with ▁."""
        tokens = [self.tok.id_to_token(i) or "" for i in range(self.vocab_size)]
        if self.model_type == "WordPiece":
            prefix = json.loads(self.tok.to_str())["model"].get("continuing_subword_prefix", "##")
            table = np.array([not t.startswith(prefix) for t in tokens])
        elif self.model_type == "Unigram":
            table = np.array([t.startswith("▁") for t in tokens])
        else:  # BPE and others: no cheap rule; every token counts as a word (token-level masking)
            table = np.ones(self.vocab_size, dtype=bool)
        table[list(self.special_ids)] = True
        return table

    # ---- files --------------------------------------------------------------------------------
    def save(self, out: str | Path) -> Path:
        """Write tokenizer.json, vocab.txt (WordPiece), tokenizer_config.json, special_tokens_map.json.

        Each file is written to a temporary name and renamed, tokenizer.json (what loading reads
        first) last: a save killed midway leaves whole files, never a truncated one read as good."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        files: dict[str, str] = {}
        names = {r: self.tok.id_to_token(i) for r, i in self.role_ids.items() if i is not None}
        config = {f"{r}_token": n for r, n in names.items()}
        config |= {"model_max_length": 512, "do_lower_case": self.lowercase}
        if self.model_type == "WordPiece":
            vocab = [self.tok.id_to_token(i) for i in range(self.vocab_size)]
            files["vocab.txt"] = "".join(v + "\n" for v in vocab)
            config |= {"tokenizer_class": "BertTokenizerFast", "tokenize_chinese_chars": True}
        else:
            config |= {"tokenizer_class": "PreTrainedTokenizerFast"}
        files["tokenizer_config.json"] = json.dumps(config, indent=2)
        special_map = {f"{r}_token": n for r, n in names.items()}
        files["special_tokens_map.json"] = json.dumps(special_map, indent=2)
        files["tokenizer.json"] = self.tok.to_str(pretty=True)
        for name, text in files.items():
            write_atomic(out / name, text)
        return out


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary sibling, then a rename over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of a directory written by :func:`train_tokenizer`, a checkpoint (an ELECTRA
    pair keeps it in each half) or a transformers tokenizer directory: ``tokenizer.json``, else a
    bare BERT ``vocab.txt``. Lowercasing: ``do_lower_case`` of ``tokenizer_config.json``, default true."""
    path = Path(path)
    if not path.is_dir():
        raise InputNotFoundError(f"tokenizer directory {path} does not exist")
    if not any((path / f).exists() for f in ("tokenizer.json", "vocab.txt")):
        for half in ("discriminator", "generator"):
            if any((path / half / f).exists() for f in ("tokenizer.json", "vocab.txt")):
                return load_tokenizer(path / half)
        raise InputNotFoundError(f"{path}: neither tokenizer.json nor vocab.txt found (save the checkpoint with "
                                 "tokenizer_dir=..., or pass --tokenizer DIR)")
    config = _tokenizer_config(path / "tokenizer_config.json")
    lowercase = bool(config.get("do_lower_case", True))
    if (path / "tokenizer.json").exists():
        try:
            tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as e:  # the Rust side raises a bare Exception for any malformed file
            raise DataError(f"{path / 'tokenizer.json'}: not a tokenizers file ({e})") from None
        where = path / "tokenizer.json"
    else:
        tok, where = _bert_wordpiece(path / "vocab.txt", config, lowercase), path / "vocab.txt"
    try:
        return Tokenizer(tok, lowercase=lowercase, source=str(path))
    except ValueError as e:
        raise DataError(f"{where}: {e}") from None


def _tokenizer_config(config_file: Path) -> dict:
    try:
        config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{config_file}: not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise DataError(f"{config_file}: expected a JSON object, got {type(config).__name__}")
    return config


def _bert_wordpiece(vocab_file: Path, config: dict, lowercase: bool) -> tokenizers.Tokenizer:
    """BERT's fast tokenizer around a bare vocab.txt (an old BERT checkpoint directory)."""
    try:
        tok = tokenizers.Tokenizer(models.WordPiece.from_file(str(vocab_file), unk_token="[UNK]"))
    except Exception as e:  # as above: a bare Exception for an unreadable vocabulary
        raise DataError(f"{vocab_file}: not a WordPiece vocabulary ({e})") from None
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=config.get("tokenize_chinese_chars", True),
        strip_accents=config.get("strip_accents"), lowercase=lowercase,
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    vocab = tok.get_vocab()
    # registered as special, so that a "[MASK]" written in a text is the mask token, not 3 pieces
    tok.add_special_tokens([n for names in ROLE_NAMES.values() for n in names if n in vocab])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if cls is not None and sep is not None:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok
