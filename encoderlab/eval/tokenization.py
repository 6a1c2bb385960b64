"""Tokenizers for evaluation, loaded from a checkpoint or tokenizer directory with `tokenizers`.

A small wrapper of our own so that evaluation does not depend on the data module being built in
parallel; ``load_tokenizer`` is the one function to re-point at ``encoderlab.data`` later.

Accepted directories: ``tokenizer.json`` (a transformers fast tokenizer), else ``vocab.txt`` (a
BERT WordPiece vocabulary). For a bare ``vocab.txt`` the lowercasing comes from
``tokenizer_config.json``'s ``do_lower_case`` when present, else it is guessed: lowercase when no
vocabulary entry outside ``[...]`` has an ASCII capital (true for every uncased BERT vocabulary).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

SPECIALS = {"cls": ("[CLS]", "<s>"), "sep": ("[SEP]", "</s>"), "pad": ("[PAD]", "<pad>"),
            "mask": ("[MASK]", "<mask>"), "unk": ("[UNK]", "<unk>")}


@dataclass
class Encoded:
    ids: list[int]
    type_ids: list[int]
    special: list[bool]  # True at [CLS]/[SEP]/[PAD]: positions that are not text
    tokens: list[str]


class TextTokenizer:
    """Encodes single texts and pairs as [CLS] a [SEP] (b [SEP]), truncated to max_length."""

    def __init__(self, tokenizer: Tokenizer, *, source: str = ""):
        self.tok = tokenizer
        self.source = source
        self.tok.no_padding()
        ids = {}
        for name, candidates in SPECIALS.items():
            ids[name] = next((i for c in candidates if (i := tokenizer.token_to_id(c)) is not None), None)
        if ids["cls"] is None or ids["sep"] is None:
            raise ValueError(f"tokenizer {source}: no [CLS]/[SEP] (or <s>/</s>) token in its vocabulary")
        self.cls_id, self.sep_id, self.mask_id, self.unk_id = ids["cls"], ids["sep"], ids["mask"], ids["unk"]
        self.pad_id = ids["pad"] if ids["pad"] is not None else 0
        self.mask_token = self.tok.id_to_token(self.mask_id) if self.mask_id is not None else None

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        return self.tok.token_to_id(token)

    def id_to_token(self, i: int) -> str:
        return self.tok.id_to_token(i)

    def encode_batch(self, a: list[str], b: list[str] | None = None, max_length: int = 128) -> list[Encoded]:
        self.tok.enable_truncation(max_length)
        inputs = list(zip(a, b)) if b is not None else list(a)
        out = self.tok.encode_batch(inputs, add_special_tokens=True)
        return [Encoded(e.ids, e.type_ids, [bool(s) for s in e.special_tokens_mask], e.tokens) for e in out]

    def encode(self, a: str, b: str | None = None, max_length: int = 512) -> Encoded:
        return self.encode_batch([a], [b] if b is not None else None, max_length)[0]

    def word_id(self, word: str) -> int:
        """The id of a word that must be a single token (a verbalizer's label word)."""
        pieces = self.tok.encode(word, add_special_tokens=False).ids
        if len(pieces) != 1:
            toks = self.tok.encode(word, add_special_tokens=False).tokens
            raise ValueError(f"label word {word!r} is {len(pieces)} tokens {toks} in {self.source}; "
                             "choose words that are one token each")
        return pieces[0]


def load_tokenizer(path: str | Path) -> TextTokenizer:
    """The tokenizer stored in a checkpoint or tokenizer directory (see the module docstring)."""
    path = Path(path)
    if (path / "tokenizer.json").exists():
        return TextTokenizer(Tokenizer.from_file(str(path / "tokenizer.json")), source=str(path))
    if (path / "vocab.txt").exists():
        return TextTokenizer(wordpiece_from_vocab(path / "vocab.txt"), source=str(path))
    for sub in ("discriminator", "generator"):  # an ELECTRA pair keeps copies in each half
        if (path / sub).is_dir() and ((path / sub / "tokenizer.json").exists() or (path / sub / "vocab.txt").exists()):
            return load_tokenizer(path / sub)
    raise FileNotFoundError(f"{path}: no tokenizer.json or vocab.txt; save the checkpoint with tokenizer_dir=... "
                            "or pass --tokenizer DIR")


def wordpiece_from_vocab(vocab_file: str | Path, lowercase: bool | None = None) -> Tokenizer:
    """BERT's WordPiece pipeline around a vocab.txt: normalizer, pre-tokenizer, [CLS]/[SEP] template."""
    vocab_file = Path(vocab_file)
    words = vocab_file.read_text(encoding="utf-8").splitlines()
    if lowercase is None:
        cfg = vocab_file.parent / "tokenizer_config.json"
        if cfg.exists() and "do_lower_case" in (d := json.loads(cfg.read_text())):
            lowercase = bool(d["do_lower_case"])
        else:
            lowercase = not any(c.isascii() and c.isupper() for w in words if not w.startswith("[") for c in w)
    tok = Tokenizer(WordPiece.from_file(str(vocab_file), unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = [w for w in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if w in words]
    tok.add_special_tokens(specials)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if cls is not None and sep is not None:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok
