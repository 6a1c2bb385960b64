"""Corpus readers: formats, document splitting and bad input (counted, named, never lost)."""

from __future__ import annotations

import gzip
import json
import logging
import tracemalloc

import pytest

from encoderlab.data.corpus import Corpus, CorpusConfig


def read(*paths, **kw) -> tuple[list[str], Corpus]:
    corpus = Corpus(CorpusConfig(paths=tuple(str(p) for p in paths), **kw))
    return list(corpus), corpus


def test_text_document_splits(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one a\none b\n\n\ntwo\n\nthree\n")
    assert read(f)[0] == ["one a\none b", "two", "three"]
    assert read(f, doc_split="line")[0] == ["one a", "one b", "two", "three"]
    assert read(f, doc_split="file")[0] == ["one a\none b\n\n\ntwo\n\nthree"]


def test_wikiextractor_drops_tags_and_title(tmp_path):
    f = tmp_path / "wiki_00"
    f.write_text(
        '<doc id="1" url="?curid=1" title="Alpha">\nAlpha\n\n'
        'Alpha is a letter.\nHistory.\nIt is old.\n</doc>\n'
        '<doc id="2" url="?curid=2" title="Stub">\nStub\n\n</doc>\n'
        '<doc id="3" url="?curid=3" title="Beta">\nBeta\n\nBeta follows alpha.\n</doc>\n'
    )
    docs, corpus = read(f)
    assert docs == ["Alpha is a letter.\nHistory.\nIt is old.", "Beta follows alpha."]
    assert corpus.stats.documents == 2


def test_directories_globs_and_gzip(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("bee\n")
    with gzip.open(tmp_path / "a.txt.gz", "wt") as f:
        f.write("ay\n\nay two\n")
    assert read(tmp_path)[0] == ["ay", "ay two", "bee"]
    assert read(tmp_path / "*.gz")[0] == ["ay", "ay two"]


def test_jsonl_csv_tsv(tmp_path, caplog):
    j = tmp_path / "d.jsonl"
    j.write_text(json.dumps({"text": "first"}) + "\n{broken\n" + json.dumps({"body": "x"}) + "\n"
                 + json.dumps({"text": "second"}) + "\n")
    with caplog.at_level(logging.WARNING):
        docs, corpus = read(j)
    assert docs == ["first", "second"]
    assert corpus.stats.bad_records == 2 and "d.jsonl:2" in caplog.text
    c = tmp_path / "d.csv"
    c.write_text('id,text\n1,"hello, world"\n2,bye\n')
    assert read(c)[0] == ["hello, world", "bye"]
    t = tmp_path / "d.tsv"
    t.write_text('label\tsentence\n1\tsays "hi\n0\tno\n')
    assert read(t, text_field="sentence")[0] == ['says "hi', "no"]
    with pytest.raises(ValueError, match="no column 'text'.*sentence"):
        read(t)


def test_missing_paths_are_errors_naming_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        Corpus(CorpusConfig(paths=(str(tmp_path / "nope.txt"),)))
    with pytest.raises(FileNotFoundError, match=r"\*\.zzz"):
        Corpus(CorpusConfig(paths=(str(tmp_path / "*.zzz"),)))


def test_empty_and_binary_files_are_skipped_by_name(tmp_path, caplog):
    (tmp_path / "a_empty.txt").write_bytes(b"")
    (tmp_path / "b_blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    (tmp_path / "c_good.txt").write_text("kept\n")
    with caplog.at_level(logging.WARNING):
        docs, corpus = read(tmp_path)
    assert docs == ["kept"]
    assert [p.split("/")[-1] for p in corpus.stats.skipped_files] == ["a_empty.txt", "b_blob.bin"]
    assert "a_empty.txt: empty file" in caplog.text and "b_blob.bin: binary" in caplog.text
    assert "skipped 2 file(s)" in corpus.stats.summary()


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"caf\xe9 ok\n\n\xff\xfe tail \xe4\xb8\xad\n")  # 3 bad bytes, then a valid 中
    docs, corpus = read(f)
    assert docs == ["caf\ufffd ok", "\ufffd\ufffd tail 中"]
    assert corpus.stats.replaced_bytes == 3
    assert "replaced 3 invalid" in corpus.stats.summary()


def test_utf8_split_across_read_blocks_is_not_replaced(tmp_path, monkeypatch):
    import encoderlab.data.corpus as corpus_mod

    monkeypatch.setattr(corpus_mod, "_BLOCK", 7)  # cut multi-byte characters between reads
    f = tmp_path / "zh.txt"
    f.write_text("中文字符测试\n\n第二篇\n", encoding="utf-8")
    docs, corpus = read(f)
    assert docs == ["中文字符测试", "第二篇"] and corpus.stats.replaced_bytes == 0


def test_missing_optional_packages_give_clear_errors(tmp_path):
    pytest.importorskip("encoderlab")
    try:
        import zstandard  # noqa: F401
    except ImportError:
        (tmp_path / "a.zst").write_bytes(b"\x28\xb5\x2f\xfd")
        with pytest.raises(ValueError, match="pip install zstandard"):
            read(tmp_path / "a.zst")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        (tmp_path / "a.parquet").write_bytes(b"PAR1")
        with pytest.raises(ValueError, match="pip install pyarrow"):
            read(tmp_path / "a.parquet")


def test_100mb_line_streams_in_bounded_memory(tmp_path):
    f = tmp_path / "huge.txt"
    line = ("abcdefghi " * 1_000_000).encode()  # 10 MB
    with open(f, "wb") as out:
        for _ in range(10):
            out.write(line)
        out.write(b"\n\nafter\n")
    tracemalloc.start()
    total, n_docs, last = 0, 0, ""
    corpus = Corpus(CorpusConfig(paths=(str(f),)))
    for doc in corpus:
        total += len(doc)
        n_docs += 1
        last = doc
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert last == "after"
    assert total == 100_000_000 + len("after")  # nothing lost
    assert corpus.stats.split_documents >= 15 and n_docs == corpus.stats.split_documents + 2
    assert peak < 60 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"
