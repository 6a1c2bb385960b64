"""Text helpers for ``prepare``: sentence splitting (English and Chinese) and jieba word starts."""

from __future__ import annotations

import logging
import re

log = logging.getLogger("encoderlab.data")

# A sentence ends at Chinese 。！？… (closing quotes/brackets stay with it), or at English .!? followed
# by whitespace and something that can open a sentence. "Mr. Smith" is split: rare and harmless here.
_SENTENCE_END = re.compile(
    # every branch starts with a literal character class, which keeps the scan fast
    r"(?:\n"  # a line break (a paragraph in most corpora)
    r"|[。！？…]+[”’」』）)]*"  # Chinese (full-width) enders: no space needed after
    r"|[.!?]+[\"')\]]*(?=\s+[\"“‘(\[]?[A-Z0-9])"  # English: space, then something that opens a sentence
    r")\s*"
)
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")


def split_sentences(document: str) -> list[str]:
    """Lines are always boundaries; within a line, split at sentence-ending punctuation."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(document):  # one pass over the document, not one per line
        piece = document[start : m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    piece = document[start:].strip()
    if piece:
        out.append(piece)
    return out


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def mostly_cjk(text: str, share: float = 0.3) -> bool:
    """Chinese enough for jieba: an English sentence quoting a Chinese name keeps per-character words."""
    return len(_CJK.findall(text)) >= share * len(text)


_jieba = None


def jieba_word_starts(text: str) -> set[int]:
    """Character offsets where jieba starts a word (for Chinese whole-word masking)."""
    global _jieba
    if _jieba is None:
        try:
            import jieba
        except ImportError:
            raise ValueError(
                "Chinese word boundaries need jieba (pip install jieba, or encoderlab[zh]); "
                "or prepare with word_boundaries=subword"
            ) from None
        jieba.setLogLevel(logging.WARNING)
        _jieba = jieba
    starts, pos = set(), 0
    for word in _jieba.cut(text, HMM=True):
        starts.add(pos)
        pos += len(word)
    return starts
