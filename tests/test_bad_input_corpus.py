"""Property tests: corpus readers and tokenizer training on bad input (docs/reliability.md).

Properties, for every format: nothing but the project's own error escapes; a bad record is skipped
and counted, and the good records around it come out once each, in order; bytes that are not
UTF-8 are replaced and counted; an over-long line is split without losing a character.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.tokenizer import load_tokenizer, train_tokenizer
from encoderlab.errors import DataError, EncoderlabError

# Text a record may hold: letters, CJK, punctuation, quotes and commas; no NUL (that makes a file
# "binary") and no "\r" (line endings are normalized).
CHARS = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\u2028\u2029\x85") | st.sampled_from(
    list(' ,"\'\t'))
WORDS = st.text(CHARS, min_size=1, max_size=40).filter(lambda s: s.strip() and "\n" not in s)


def _read(path: Path, **kw) -> tuple[list[str], Corpus]:
    corpus = Corpus(CorpusConfig(paths=(str(path),), **kw))
    return list(corpus), corpus


def _write(path: Path, data: bytes, gz: bool) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@given(data=st.binary(max_size=3000), name=st.sampled_from(["a.txt", "a.jsonl", "a.csv", "a.tsv", "wiki_00",
                                                               "a.txt.gz", "a.csv.gz"]))
def test_any_bytes_in_any_format_give_documents_or_our_error(data, name):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(data)  # raw bytes even for .gz: a corrupt archive
        try:
            docs, corpus = _read(f, format="auto")
        except EncoderlabError as e:  # fatal: a CSV/TSV header without the text column, or bytes in another
            msg = str(e)  # encoding (over 1% of the characters do not decode, or a UTF-16 byte-order mark)
            assert str(f) in msg and ("no column 'text'" in msg or "not utf-8 text" in msg or "UTF-16 text" in msg)
            return
        assert all(doc.strip() for doc in docs)
        assert corpus.stats.documents == len(docs)
        if corpus.stats.damaged_files or corpus.stats.skipped_files:
            assert (corpus.stats.damaged_files + corpus.stats.skipped_files) == [str(f)]


BAD_JSONL = st.sampled_from(['{"text": "unclosed', '{"body": "no text key"}', '{"text": 3}', '["a", "list"]',
                             '"a bare string"', "not json at all", '{"text": null}', "[[[[[[[["])


@given(records=st.lists(st.one_of(WORDS.map(lambda s: ("good", s)), BAD_JSONL.map(lambda s: ("bad", s))),
                        max_size=25), gz=st.booleans())
def test_jsonl_bad_lines_are_counted_and_good_ones_kept_in_order(records, gz):
    lines = [json.dumps({"text": s, "id": 1}) if kind == "good" else s for kind, s in records]
    with tempfile.TemporaryDirectory() as d:
        f = _write(Path(d) / "c.jsonl", ("\n".join(lines) + "\n").encode(), gz)
        docs, corpus = _read(f)
    assert docs == [s for kind, s in records if kind == "good"]
    assert corpus.stats.bad_records == sum(kind == "bad" for kind, _ in records)


# A good CSV record may span lines (a quoted field with a newline); bad ones: a row without the
# text column, and a stray opening quote that would otherwise swallow the rest of the file.
CSV_TEXT = st.lists(WORDS, min_size=1, max_size=3).map("\n".join)
BAD_CSV = st.sampled_from(["7", '8,"unterminated quote', '9,"bad"quoting"', ""])


@given(records=st.lists(st.one_of(CSV_TEXT.map(lambda s: ("good", s)), BAD_CSV.map(lambda s: ("bad", s))),
                        max_size=20), gz=st.booleans())
def test_csv_bad_rows_and_stray_quotes_lose_no_good_row(records, gz):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "text"])
    for i, (kind, s) in enumerate(records):
        if kind == "good":
            writer.writerow([i, s])
        else:
            out.write(s + "\n")
    with tempfile.TemporaryDirectory() as d:
        f = _write(Path(d) / "c.csv", out.getvalue().encode(), gz)
        docs, corpus = _read(f)
    assert docs == [s for kind, s in records if kind == "good"]
    assert corpus.stats.bad_records == sum(kind == "bad" and s != "" for kind, s in records)


@given(records=st.lists(st.one_of(WORDS.filter(lambda s: "\t" not in s).map(lambda s: ("good", s)),
                                  st.just(("bad", "lonely-id"))), max_size=20))
def test_tsv_rows_without_the_text_column_are_counted(records):
    body = "id\ttext\n" + "".join(f"{i}\t{s}\n" if k == "good" else f"{s}\n" for i, (k, s) in enumerate(records))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.tsv"
        f.write_text(body, encoding="utf-8")
        docs, corpus = _read(f)
    assert docs == [s for k, s in records if k == "good"]
    assert corpus.stats.bad_records == sum(k == "bad" for k, _ in records)


@given(chunks=st.lists(st.tuples(WORDS, st.integers(0, 3)), min_size=1, max_size=20))
def test_invalid_utf8_bytes_are_replaced_one_for_one_and_counted(chunks):
    # \xff and \xfe never occur in UTF-8; \xc3 alone is a truncated two-byte sequence
    data = b"".join(s.encode() + b"\xff\xfe\xc3 "[:n] + b"\n" for s, n in chunks)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.txt"
        f.write_bytes(data)
        docs, corpus = _read(f, doc_split="file", max_invalid_share=1.0)  # any share: replaced and counted
    expected = data.decode("utf-8", errors="replace").strip("\n")
    assert corpus.stats.replaced_bytes == sum(min(n, 3) for _, n in chunks)
    assert docs == ([expected] if expected.strip() else [])


@given(lines=st.lists(st.text(st.sampled_from("ab c"), max_size=5000), min_size=1, max_size=4))
def test_over_long_lines_are_split_without_losing_or_repeating_a_character(lines):
    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.txt"
        f.write_text(text)
        docs, corpus = _read(f, doc_split="file", max_line_chars=1024, max_doc_chars=1024)
    joined = "".join(docs)  # documents cut at max_doc_chars follow each other exactly
    assert joined.replace("\n", "") == text.strip("\n").replace("\n", "") or not text.strip()
    assert all(len(doc) <= 1024 + 1 for doc in docs)


@given(bodies=st.lists(st.lists(WORDS.filter(lambda s: not s.startswith("<")), min_size=1, max_size=3),
                       max_size=6))
def test_wikiextractor_keeps_every_body_and_drops_every_tag_and_title(bodies):
    text = "".join(f'<doc id="{i}" url="u" title="T{i}">\nT{i}\n\n' + "\n".join(b) + "\n</doc>\n"
                   for i, b in enumerate(bodies))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "wiki_00"
        f.write_text(text)
        docs, _ = _read(f)
    assert docs == ["\n".join(b).strip("\n") for b in bodies if "\n".join(b).strip()]


def test_truncated_gzip_keeps_what_was_read_and_names_the_file(tmp_path, caplog):
    data = gzip.compress("".join(f"line {i}\n" for i in range(100_000)).encode(), mtime=0)
    f = tmp_path / "c.txt.gz"
    f.write_bytes(data[: len(data) // 2])
    docs, corpus = _read(f, doc_split="line")
    # kept: every line up to the last 64 KiB block decompressed before the damage, in order, once
    assert 100_000 // 4 < len(docs) < 100_000 and docs == [f"line {i}" for i in range(len(docs))]
    assert corpus.stats.damaged_files == [str(f)] and "damaged" in corpus.stats.summary()
    assert str(f) in caplog.text


@pytest.mark.parametrize("name,module", [("c.zst", "zstandard"), ("c.parquet", "pyarrow")])
def test_missing_optional_readers_are_our_errors_naming_the_file(tmp_path, name, module):
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed: the missing-package message cannot be seen")
    (tmp_path / name).write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(DataError, match=f"pip install {module}") as info:
        _read(tmp_path / name)
    assert str(tmp_path / name) in str(info.value)


def test_a_missing_path_is_our_error_and_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope") as info:
        _read(tmp_path / "nope.txt")
    assert isinstance(info.value, EncoderlabError)


# ---- tokenizer training: the "no text" defect and the vocabulary cap --------------------------------------
@pytest.mark.parametrize("contents", [{"empty.txt": b""}, {"blank.txt": b"\n\n  \n"}, {"bin.txt": b"\x00\x01" * 9},
                                      {"c.jsonl": b'{"body": "no text field"}\n'}])
def test_tokenizer_on_a_corpus_without_text_fails_naming_where_it_looked(tmp_path, contents):
    for name, data in contents.items():
        (tmp_path / "corpus").mkdir(exist_ok=True)
        (tmp_path / "corpus" / name).write_bytes(data)
    with pytest.raises(DataError, match="no text found") as info:
        train_tokenizer(Corpus(CorpusConfig(paths=(str(tmp_path / "corpus"),))), vocab_size=100,
                        out=tmp_path / "tok")
    assert str(tmp_path / "corpus" / name) in str(info.value)
    assert not (tmp_path / "tok").exists(), "a failed training wrote a tokenizer"


def test_cli_tokenizer_train_on_an_empty_file_exits_with_the_reason(tmp_path, capsys):
    from encoderlab.cli import main

    (tmp_path / "empty.txt").write_text("")
    rc = main(["tokenizer", "train", "--corpus", str(tmp_path / "empty.txt"), "--vocab-size", "50",
               "--out", str(tmp_path / "tok")])
    err = capsys.readouterr().err
    assert rc == 1 and "no text found" in err and str(tmp_path / "empty.txt") in err
    assert not (tmp_path / "tok").exists()


def test_vocabulary_larger_than_the_corpus_allows_is_capped_with_a_note(tmp_path, caplog):
    tok = train_tokenizer(["tiny corpus tiny corpus"] * 3, vocab_size=5000, out=tmp_path / "tok")
    assert tok.vocab_size < 100
    assert f"capped at {tok.vocab_size} of the 5000" in caplog.text
    assert load_tokenizer(tmp_path / "tok").vocab_size == tok.vocab_size


@given(data=st.binary(max_size=400), name=st.sampled_from(["tokenizer.json", "tokenizer_config.json", "vocab.txt"]))
def test_a_damaged_tokenizer_directory_is_refused_by_name_or_loads(data, name):
    with tempfile.TemporaryDirectory() as d:
        good = Path(d) / "tok"
        train_tokenizer(["a small corpus of words", "words and more words"], vocab_size=60, out=good)
        (good / name).write_bytes(data)
        try:
            tok = load_tokenizer(good)
        except EncoderlabError as e:
            assert str(good) in str(e)
        else:
            assert tok.vocab_size >= 5
