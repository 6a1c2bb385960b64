"""prepare + TokenStore: determinism, resume, validation split, boundaries, tokenizer checks, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_data_helpers import chinese_lines, english_text, tiny_tokenizer, write_corpus

import encoderlab.data.prepare as prep
from encoderlab.cli import main
from encoderlab.data.corpus import CorpusConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.store import TokenStore
from encoderlab.data.text import split_sentences


@pytest.fixture(scope="module")
def data_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    corpus = write_corpus(root / "corpus", n_docs=60)
    tok = tiny_tokenizer(root / "tok", corpus)
    return root, corpus, tok


def config(corpus: Path, **kw) -> PrepareConfig:
    kw = {"shard_chars": 3000, "valid_fraction": 0.1} | kw
    return PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), **kw)


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_byte_identical_for_any_worker_count(data_setup, tmp_path):
    root, corpus, _ = data_setup
    meta = prepare(config(corpus), root / "tok", tmp_path / "w1")
    prepare(config(corpus, workers=2), root / "tok", tmp_path / "w2")
    assert len(meta["shards"]) > 3
    assert tree(tmp_path / "w1") == tree(tmp_path / "w2")


def test_resume_after_interruption(data_setup, tmp_path, monkeypatch):
    root, corpus, _ = data_setup
    prepare(config(corpus), root / "tok", tmp_path / "full")
    calls = []
    real = prep._process_chunk

    def dies_on_third(out, shard_id, docs, valid):
        calls.append(shard_id)
        if len(calls) == 3:
            raise KeyboardInterrupt("simulated kill")
        return real(out, shard_id, docs, valid)

    monkeypatch.setattr(prep, "_process_chunk", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        prepare(config(corpus), root / "tok", tmp_path / "cut")
    assert len(json.loads((tmp_path / "cut" / "manifest.json").read_text())["shards"]) == 2
    with pytest.raises(ValueError, match="did not finish.*resume"):
        TokenStore(tmp_path / "cut")
    calls.clear()
    monkeypatch.setattr(prep, "_process_chunk", lambda *a: (calls.append(a[1]), real(*a))[1])
    prepare(config(corpus), root / "tok", tmp_path / "cut")
    assert "00000" not in calls and "00001" not in calls  # finished shards are not redone
    assert tree(tmp_path / "cut") == tree(tmp_path / "full")
    with pytest.raises(ValueError, match="other settings"):
        prepare(config(corpus, seed=5), root / "tok", tmp_path / "cut")


def test_tokenizer_mismatch_is_refused(data_setup, tmp_path):
    root, corpus, tok = data_setup
    prepare(config(corpus), root / "tok", tmp_path / "s")
    other = tiny_tokenizer(tmp_path / "other", write_corpus(tmp_path / "c2", seed=3))
    with pytest.raises(ValueError, match="prepared with tokenizer"):
        prepare(config(corpus), tmp_path / "other", tmp_path / "s")
    with pytest.raises(ValueError, match="must use the store's tokenizer"):
        TokenStore(tmp_path / "s", tokenizer=other)
    store = TokenStore(tmp_path / "s", tokenizer=tok)
    assert store.tokenizer_hash == tok.hash and store.meta["dtype"] == "uint16"
    assert isinstance(store.tokens[0], np.memmap) and isinstance(store.word_start[0], np.memmap)
    assert store.meta["sources"][0]["path"] == str(corpus) and store.meta["corpus_stats"]["documents"] == 60


def test_store_holds_documents_as_sentences(data_setup, tmp_path):
    root, corpus, tok = data_setup
    prepare(config(corpus, valid_fraction=0.0), root / "tok", tmp_path / "s")
    store = TokenStore(tmp_path / "s")
    docs = [d for d in english_text(60).split("\n\n")]
    assert store.num_documents == 60 and TokenStore(tmp_path / "s", "valid").num_documents == 0
    for i in (0, 17, 59):
        sents = store.document(i)
        expected = split_sentences(docs[i])
        assert [tok.decode(ids) for ids, _ in sents] == [s.lower() for s in expected]
        for ids, ws in sents:
            assert ws.dtype == bool and len(ws) == len(ids)
            assert list(ws) == [not tok.id_to_token(t).startswith("##") for t in ids]
    assert store.num_tokens == sum(len(ids) for d in range(60) for ids, _ in store.document(d))
    assert store.num_sentences == sum(len(store.document(d)) for d in range(60))


def test_validation_split_is_by_whole_document(data_setup, tmp_path):
    root, corpus, tok = data_setup
    prepare(config(corpus, valid_fraction=0.3), root / "tok", tmp_path / "s")
    train, valid = TokenStore(tmp_path / "s", "train"), TokenStore(tmp_path / "s", "valid")
    assert train.num_documents + valid.num_documents == 60 and 8 <= valid.num_documents <= 30

    def texts(store):
        return {" ".join(tok.decode(ids) for ids, _ in store.document(i)) for i in range(len(store))}

    assert not texts(train) & texts(valid)
    prepare(config(corpus, valid_fraction=0.3, valid_count=5), root / "tok", tmp_path / "c")
    assert TokenStore(tmp_path / "c", "valid").num_documents == 5


def test_chinese_word_starts_from_jieba(tmp_path):
    pytest.importorskip("jieba")
    corpus = tmp_path / "zh.txt"
    corpus.write_text(chinese_lines(80) + english_text(5), encoding="utf-8")
    tiny_tokenizer(tmp_path / "tok", corpus, vocab_size=200)
    cfg = PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),), doc_split="line"), valid_fraction=0.0)
    prepare(cfg, tmp_path / "tok", tmp_path / "s")
    store = TokenStore(tmp_path / "s")
    from encoderlab.data.tokenizer import load_tokenizer

    tok = load_tokenizer(tmp_path / "tok")
    ids, ws = store.document(0)[0]
    chars = [tok.id_to_token(t) for t in ids]
    # multi-character words (北京, 天安门, ...) start once; single characters would all be starts
    assert 0.2 < ws.mean() < 0.8
    text = "".join(chars)
    for word in ("北京", "天安门", "经济"):
        at = text.find(word)
        if at >= 0:
            assert ws[at] and not ws[at + 1:at + len(word)].any()
    expected = ["我爱北京。", "你好吗？", "“好的！”", "他说。"]
    assert split_sentences("我爱北京。你好吗？“好的！”他说。") == expected


def test_cli_tokenizer_train_and_prepare(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c")
    assert main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "250",
                 "--out", str(tmp_path / "tok")]) == 0
    assert main(["prepare", "--corpus", str(tmp_path / "c"), "--tokenizer", str(tmp_path / "tok"),
                 "--out", str(tmp_path / "s"), "--workers", "2", "--valid-count", "2"]) == 0
    out = capsys.readouterr().out
    assert "trained wordpiece tokenizer" in out and "valid 2 docs" in out
    assert TokenStore(tmp_path / "s", "valid").num_documents == 2
    assert main(["prepare", "--corpus", str(tmp_path / "missing.txt"), "--tokenizer", str(tmp_path / "tok"),
                 "--out", str(tmp_path / "x")]) == 1
    assert "missing.txt does not exist" in capsys.readouterr().err
    assert np.load(tmp_path / "s" / "train" / "00000" / "tokens.npy").dtype == np.uint16


def test_a_one_document_corpus_warns_that_its_valid_split_is_empty_and_the_loader_says_what_to_do(tmp_path, capsys):
    """A newcomer's text file with one paragraph a line and no blank lines (People's Daily) reads as
    one document: the held-out split is empty. prepare says so and names --doc-split line; the
    pretraining that then cannot fill an evaluation batch says the same."""
    from encoderlab.data.loader import LoaderConfig, PretrainLoader

    corpus = tmp_path / "one.txt"
    corpus.write_text("\n".join(english_text(40).split("\n\n")), encoding="utf-8")  # no blank lines
    tiny_tokenizer(tmp_path / "tok", corpus, vocab_size=250)
    assert main(["prepare", "--corpus", str(corpus), "--tokenizer", str(tmp_path / "tok"),
                 "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "valid split is empty" in err and "--doc-split line" in err
    with pytest.raises(ValueError, match="--doc-split line.*eval_batches=0"):
        PretrainLoader(TokenStore(tmp_path / "s", "valid"), LoaderConfig(seq_len=32, batch_size=2))


@pytest.mark.parametrize("model", ["wordpiece", "unigram"])
def test_joined_document_encoding_equals_per_sentence_encoding(tmp_path, model):
    corpus = tmp_path / "c.txt"
    corpus.write_text(english_text(30) + "\n\n" + chinese_lines(20).replace("\n", "\n\n"), encoding="utf-8")
    tiny_tokenizer(tmp_path / "tok", corpus, vocab_size=250, model=model)
    prep._init_worker(str(tmp_path / "tok"), config(corpus))
    tok = prep._worker["tok"]
    docs = corpus.read_text(encoding="utf-8").split("\n\n")
    sentences = [s for d in docs for s in split_sentences(d)]
    sizes = [len(split_sentences(d)) for d in docs]
    fast = prep._encode_sentences(tok, docs, sentences, sizes)
    one_by_one = [tok.encode(s) for s in sentences]
    assert fast[1].tolist() == [len(x) for x in one_by_one]
    assert fast[0].tolist() == [t for x in one_by_one for t in x]
    slow = prep._encode_sentences(tok, [*docs, "a [SEP] b"], sentences, [*sizes, 0])  # literal [SEP]
    assert np.array_equal(slow[0], fast[0]) and np.array_equal(slow[1], fast[1])
