"""The demo corpus is real prose from the standard library, deduplicated, with a real labelled task."""

from __future__ import annotations

import ast
import csv

from encoderlab.study import demo_corpus
from encoderlab.study.demo_corpus import _definitions, build, build_cached, clean, stdlib_dir


def test_clean_drops_code_and_keeps_prose():
    doc = "Return the sum.\n\n>>> add(1, 2)\n3\nclass Foo(Bar):\nA class that adds numbers.\nimport os\n"
    assert clean(doc) == "Return the sum. 3 A class that adds numbers."


def test_definitions_are_ast_walks_definitions_in_its_order():
    """The statement-only walk finds what the full ast.walk finds, in the same order (the corpus's
    passage order, so its text, depend on it): a nested class, defs under if/try/except/with/match."""
    src = """
\"\"\"Module.\"\"\"
def f(x=lambda y: y):
    class Inner:
        def g(self): pass
    if x:
        def h(): pass
    else:
        async def k(): pass
try:
    def t(): pass
except ValueError:
    def e(): pass
finally:
    def z(): pass
with open("p") as fh:
    class W: pass
match x:
    case 1:
        def m(): pass
"""
    files = [src, *(p.read_text() for p in [stdlib_dir() / "argparse.py", stdlib_dir() / "json" / "decoder.py"])]
    for text in files:
        tree = ast.parse(text)
        kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        expected = [n for n in ast.walk(tree) if isinstance(n, kinds)]
        assert list(_definitions(tree)) == expected and len(expected) > 10


def test_build_is_deterministic_splits_cleanly_and_is_cached_once_per_python(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_CACHE_DIR", str(tmp_path / "cache"))
    built = []
    monkeypatch.setattr(demo_corpus, "build", lambda out, **kw: built.append(out) or build(out, **kw))
    a = build_cached(tmp_path / "a")  # builds, into the cache, then copies
    b = build(tmp_path / "b")  # a second extraction, for determinism
    c = build_cached(tmp_path / "c")  # from the cache
    assert len(built) == 1 and a == b == c and not list((tmp_path / "cache" / "demo-corpus").glob("*.tmp*"))
    assert sorted(p.name for p in (tmp_path / "c").rglob("*")) == ["corpus.txt", "dev.tsv", "task", "train.tsv"]
    for f in ("corpus.txt", "task/train.tsv", "task/dev.tsv"):
        assert len({(tmp_path / d / f).read_bytes() for d in "abc"}) == 1, f
    assert a["passages"] > 2000 and a["words"] > 100_000  # enough text to pretrain a tiny model
    assert len(a["labels"]) == 8
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
