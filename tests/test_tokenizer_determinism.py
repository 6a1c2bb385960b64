"""A WordPiece tokenizer trains the same way twice: the same corpus gives byte-identical files in
separate processes, whatever their hash seeds and thread counts (issue 51: three runs on a Chinese
review corpus gave 7,473, 7,472 and 7,475 pieces)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Trains with encoderlab's train_tokenizer, and with tokenizers' trainer as it comes (the cause):
# prints the hash of the latter's sorted vocabulary.
SCRIPT = """
import hashlib, json, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from encoderlab.data.tokenizer import SPECIAL_TOKENS, train_tokenizer
docs = json.load(open(sys.argv[1], encoding="utf-8"))
train_tokenizer(docs, vocab_size=200, out=sys.argv[2])
raw = Tokenizer(models.WordPiece(unk_token="[UNK]"))
raw.normalizer = normalizers.BertNormalizer(lowercase=True)
raw.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
raw.train_from_iterator(docs, trainers.WordPieceTrainer(vocab_size=200, min_frequency=2,
                                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False))
print(hashlib.sha256("\\n".join(sorted(raw.get_vocab())).encode()).hexdigest())
"""


def tied_corpus(path: Path) -> Path:
    """400 made-up words over 12 letters, each written exactly twice, and runs of CJK characters:
    every pair count is even and most are equal, so which pair the trainer merges first among equals
    decides which pieces fit in the vocabulary of 200."""
    rng = random.Random(0)
    words = sorted({"".join(rng.choice("abcdefghijkl") for _ in range(rng.randint(3, 6))) for _ in range(400)})
    han = [chr(0x4E00 + i) for i in range(65)]
    docs = [" ".join(words[i:i + 8]) + " " + "".join(han[i // 8 % 60:i // 8 % 60 + 5])
            for _ in range(2) for i in range(0, len(words), 8)]
    path.write_text(json.dumps(docs, ensure_ascii=False), encoding="utf-8")
    return path


def test_wordpiece_training_is_byte_identical_across_processes_seeds_and_threads(tmp_path):
    corpus = tied_corpus(tmp_path / "docs.json")
    settings = [{"PYTHONHASHSEED": "1", "RAYON_NUM_THREADS": "1", "RAYON_RS_NUM_CPUS": "1"},
                {"PYTHONHASHSEED": "2", "RAYON_NUM_THREADS": "2", "RAYON_RS_NUM_CPUS": "2"},
                {"PYTHONHASHSEED": "3", "TOKENIZERS_PARALLELISM": "false"}]
    raw = set()
    for i, extra in enumerate(settings):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAYON", "TOKENIZERS_PARALLELISM"))}
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(corpus), str(tmp_path / f"tok{i}")],
                              env={**env, "PYTHONPATH": str(ROOT), **extra}, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        raw.add(done.stdout.split()[-1])
    files = sorted(p.name for p in (tmp_path / "tok0").iterdir())
    assert "tokenizer.json" in files and "vocab.txt" in files
    for i in (1, 2):
        assert sorted(p.name for p in (tmp_path / f"tok{i}").iterdir()) == files
        for name in files:
            assert (tmp_path / f"tok{i}" / name).read_bytes() == (tmp_path / "tok0" / name).read_bytes(), (i, name)
    # The corpus reaches the cause: the trainer as it comes gave different vocabularies. Should a
    # tokenizers release make it agree with itself, this fails, and tokenizer._continuation_pieces
    # (a second pass over the corpus) is no longer needed.
    assert len(raw) > 1, "tokenizers' own WordPiece trainer was deterministic on the tied corpus"
    saved = json.loads((tmp_path / "tok0" / "tokenizer.json").read_text(encoding="utf-8"))
    # The continuation pieces pinned during training are ordinary pieces afterwards, not special tokens.
    assert [t["content"] for t in saved["added_tokens"]] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = saved["model"]["vocab"]
    assert len(vocab) == 200 and any(t.startswith("##") and len(t) > 3 for t in vocab)  # merged pieces too
