"""Helpers for the evaluation tests: a tiny WordPiece vocabulary, tiny checkpoints, a toy task."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from encoderlab.checkpoint import save_model
from encoderlab.models.build import build_model
from encoderlab.models.config import ModelConfig
from encoderlab.nn.config import EncoderConfig

POSITIVE = ["good", "great", "fine", "nice"]
NEGATIVE = ["bad", "awful", "poor", "terrible"]
FILLER = ["the", "movie", "was", "it", "is", "a", "this", "film", "plot", "actor", "story", "really", "very",
          "and", "but", "of", "cat", "dog", "sat", "on", "mat", "ran", "cats", "dogs", "sits", "run", "." , ","]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = SPECIALS + POSITIVE + NEGATIVE + FILLER + ["yes", "no", "zzz", "##s"]


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: these models are tiny, and the two cores are shared with other jobs,
    where two spinning OpenMP threads per process run ~5x slower than one."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def write_vocab(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    return d


def tiny_config(family: str = "bert", head: str = "mlm", **enc) -> ModelConfig:
    base = dict(vocab_size=len(WORDS), hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
                max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0)
    if family == "albert":
        base.update(sharing="all", embedding_size=16)
    if family == "electra":
        base.update(pooler=False)
    base.update(enc)
    e = EncoderConfig(**base)
    if head == "electra":
        g = EncoderConfig(**{**base, "hidden_size": 16, "num_heads": 2, "intermediate_size": 32, "embedding_size": 32})
        return ModelConfig(family="electra", head="electra", encoder=e, generator=g)
    return ModelConfig(family=family, head=head, encoder=e)


def tiny_checkpoint(tmp: Path, family: str = "bert", head: str = "mlm", **enc) -> Path:
    vocab = write_vocab(tmp / "tok")
    model = build_model(tiny_config(family, head, **enc))
    return save_model(model, tmp / f"{family}-{head}", tokenizer_dir=vocab)


def sentiment_rows(n: int, seed: int = 0, n_words: int = 4) -> list[tuple[str, int]]:
    """Toy sentiment: filler words around one label word (from n_words per class) that decides the class."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        y = rng.randrange(2)
        words = rng.choices(FILLER[:16], k=rng.randrange(2, 9))
        words.insert(rng.randrange(len(words) + 1), rng.choice((POSITIVE if y else NEGATIVE)[:n_words]))
        rows.append((" ".join(words), y))
    return rows


def write_sentiment_task(d: Path, n_train: int = 256, n_dev: int = 64, n_words: int = 4) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train.tsv", n_train, 0), ("dev.tsv", n_dev, 1)):
        lines = ["sentence\tlabel"] + [f"{t}\t{y}" for t, y in sentiment_rows(n, seed, n_words)]
        (d / name).write_text("\n".join(lines) + "\n")
    (d / "task.yaml").write_text(
        "name: toy\ntext_a: sentence\nlabel: label\nlabels: ['0', '1']\ndata_dir: .\n"
        "template: '{a} it was [MASK] .'\nverbalizer: [bad, good]\n")
    return d / "task.yaml"
