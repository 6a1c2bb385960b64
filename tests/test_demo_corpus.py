"""The demo corpus is real prose from the standard library, deduplicated, with a real labelled task."""

from __future__ import annotations

import csv

from encoderlab.study.demo_corpus import build, clean


def test_clean_drops_code_and_keeps_prose():
    doc = "Return the sum.\n\n>>> add(1, 2)\n3\nclass Foo(Bar):\nA class that adds numbers.\nimport os\n"
    assert clean(doc) == "Return the sum. 3 A class that adds numbers."


def test_build_is_deterministic_and_splits_cleanly(tmp_path):
    a = build(tmp_path / "a", num_classes=6, max_per_class=120)
    b = build(tmp_path / "b", num_classes=6, max_per_class=120)
    assert a == b
    assert a["passages"] > 2000 and a["words"] > 100_000  # enough text to pretrain a tiny model
    assert len(a["labels"]) == 6
    assert (tmp_path / "a" / "corpus.txt").read_bytes() == (tmp_path / "b" / "corpus.txt").read_bytes()
    docs = (tmp_path / "a" / "corpus.txt").read_text().split("\n\n")
    docs = [d for d in docs if d.strip()]
    assert len(docs) == len(set(docs)) == a["passages"]
    rows = {}
    for split in ("train", "dev"):
        with open(tmp_path / "a" / "task" / f"{split}.tsv", newline="") as f:
            rows[split] = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert {r["label"] for r in rows["train"]} == set(a["labels"]) == {r["label"] for r in rows["dev"]}
    assert not {r["text"] for r in rows["train"]} & {r["text"] for r in rows["dev"]}
    assert len(rows["train"]) == a["train"] and len(rows["dev"]) == a["dev"]
