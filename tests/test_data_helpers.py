"""Helpers shared by the tests/test_data_*.py files: tiny corpora, a tiny tokenizer, the shared data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
_SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "zu", "pel", "dor", "ith", "ban", "qua", "sen", "tor"]
_ZH = ["我们", "北京", "天安门", "人民", "发展", "经济", "中国", "今天", "学习", "新年", "讲话", "世界"]


def english_text(n_docs: int = 40, seed: int = 0) -> str:
    """Blank-line-separated documents of pseudo-English sentences (words may split into ## pieces)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(120)]
    docs = []
    for _ in range(n_docs):
        paragraphs = []
        for _ in range(rng.randint(1, 3)):
            sents = []
            for _ in range(rng.randint(2, 7)):
                s = " ".join(rng.choices(words, k=rng.randint(4, 14)))
                sents.append(s[0].upper() + s[1:] + rng.choice([".", ".", "!", "?"]))
            paragraphs.append(" ".join(sents))
        docs.append("\n".join(paragraphs))
    return "\n\n".join(docs) + "\n"


def chinese_lines(n: int = 60, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        sents = ["".join(rng.choices(_ZH, k=rng.randint(3, 8))) + rng.choice("。！？") for _ in range(3)]
        lines.append("".join(sents))
    return "\n".join(lines) + "\n"


def write_corpus(directory: Path, n_docs: int = 40, seed: int = 0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "corpus.txt"
    path.write_text(english_text(n_docs, seed), encoding="utf-8")
    return path


def tiny_tokenizer(directory: Path, corpus: Path, vocab_size: int = 300, model: str = "wordpiece"):
    from encoderlab.data.corpus import Corpus, CorpusConfig
    from encoderlab.data.tokenizer import train_tokenizer

    return train_tokenizer(
        Corpus(CorpusConfig(paths=(str(corpus),))), vocab_size=vocab_size, out=directory, model=model
    )


def shared(sub: str) -> Path:
    path = SHARED_DATA / sub
    if not path.exists():
        pytest.skip(f"shared data {path} is absent (repo checkouts live beside shared/)")
    return path
