"""Example builders and the loader: packing, NSP/SOP labels, exact resume, epochs, ranks."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from test_data_helpers import shared, tiny_tokenizer, write_corpus

from encoderlab.data.corpus import CorpusConfig
from encoderlab.data.examples import PackedExamples
from encoderlab.data.loader import LoaderConfig, PretrainLoader
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.store import TokenStore


@pytest.fixture(scope="module")
def data_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("loader")
    corpus = write_corpus(root / "corpus", n_docs=50)
    tok = tiny_tokenizer(root / "tok", corpus)
    cfg = PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), shard_chars=4000, valid_fraction=0.0)
    prepare(cfg, root / "tok", root / "store")
    return TokenStore(root / "store"), tok


@pytest.fixture(scope="module")
def data_numbered_store(tmp_path_factory):
    """Documents whose sentences say which document and sentence they are: 'doc 3 sent 7 .'"""
    root = tmp_path_factory.mktemp("numbered")
    rng = np.random.default_rng(0)
    docs = []
    for d in range(40):
        n = int(rng.integers(1, 9))
        docs.append(" ".join(f"Doc {d} sent {s} {'filler ' * int(rng.integers(0, 6))}." for s in range(n)))
    (root / "c.txt").write_text("\n\n".join(docs) + "\n")
    tok = tiny_tokenizer(root / "tok", root / "c.txt", vocab_size=120)
    corpus = CorpusConfig(paths=(str(root / "c.txt"),))
    cfg = PrepareConfig(corpus=corpus, shard_chars=500, valid_fraction=0.0)
    prepare(cfg, root / "tok", root / "store")
    return TokenStore(root / "store"), tok


def take(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


def same(a, b):
    return all(a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) for a, b in zip(a, b))


def test_packed_examples_are_the_document_stream(data_store):
    store, tok = data_store
    packed = PackedExamples(store, seq_len=16)
    stream = []
    for d in range(store.num_documents):
        stream.extend(store.document_tokens(d)[0].tolist() + [tok.sep_id])
    windows = [packed.example(i) for i in range(packed.num_examples())]
    assert packed.num_examples() == len(stream) // 14 > 20
    got = []
    for ex in windows:
        ids = ex["input_ids"].tolist()
        assert ids[0] == tok.cls_id and ids[-1] == tok.sep_id and len(ids) == 16
        assert ex["attention_mask"].all() and not ex["token_type_ids"].any()
        got.extend(ids[1:-1])
    assert got == stream[: len(got)]  # across sentence, document and shard boundaries
    assert packed.example(0, epoch=1)["input_ids"].tolist() != windows[0]["input_ids"].tolist()


@pytest.mark.parametrize("objective", ["packed", "nsp", "sop"])
def test_exact_resume_across_epochs(data_store, objective):
    store, _ = data_store
    cfg = LoaderConfig(objective=objective, batch_size=8, seq_len=32, group_size=16, seed=3)
    full = take(PretrainLoader(store, cfg), 40)  # several epochs on this tiny store
    loader = PretrainLoader(store, cfg)
    it = iter(loader)
    for _ in range(17):
        next(it)
    state = loader.state_dict()
    resumed = PretrainLoader(store, cfg)
    resumed.load_state_dict(state)
    assert same(take(resumed, 23), full[17:])
    assert loader.epoch == 0 and resumed.epoch >= 1  # stopped in epoch 0, resumed into the next
    with pytest.raises(ValueError, match="rank"):
        PretrainLoader(store, cfg, rank=1, world_size=2).load_state_dict(state)


def test_seeded_and_reshuffled_per_epoch(data_store):
    store, _ = data_store
    cfg = LoaderConfig(batch_size=4, seq_len=16, seed=1)
    assert same(take(PretrainLoader(store, cfg), 5), take(PretrainLoader(store, cfg), 5))
    other = take(PretrainLoader(store, cfg.replace(seed=2)), 5)
    assert not same(other, take(PretrainLoader(store, cfg), 5))
    loader = PretrainLoader(store, cfg)
    e0, e1 = loader._rank_units(0), loader._rank_units(1)
    assert not np.array_equal(e0[: len(e1)], e1[: len(e0)])


def test_ranks_do_not_overlap(data_store):
    store, _ = data_store
    for objective in ("packed", "sop"):
        cfg = LoaderConfig(objective=objective, batch_size=4, seq_len=32)
        units = [PretrainLoader(store, cfg, rank=r, world_size=3)._rank_units(0) for r in range(3)]
        assert len({len(u) for u in units}) == 1
        assert not set(units[0]) & set(units[1]) and not set(units[1]) & set(units[2])
        n = PackedExamples(store, 32).num_examples() if objective == "packed" else store.num_documents
        assert sum(map(len, units)) == n - n % 3


def segments(batch, i, tok):
    ids, types, mask = (batch[k][i] for k in ("input_ids", "token_type_ids", "attention_mask"))
    n = int(mask.sum())
    a = ids[1:n][types[1:n] == 0][:-1]
    b = ids[1:n][types[1:n] == 1][:-1]
    return [tuple(map(int, m)) for m in re.findall(r"doc (\d+) sent (\d+)", tok.decode(a))], [
        tuple(map(int, m)) for m in re.findall(r"doc (\d+) sent (\d+)", tok.decode(b))]


@pytest.mark.parametrize("kind", ["nsp", "sop"])
def test_sentence_pair_labels_mean_what_hf_says(data_numbered_store, kind):
    store, tok = data_numbered_store
    cfg = LoaderConfig(objective=kind, batch_size=16, seq_len=48, seed=0)
    labels, checked = [], 0
    for batch in take(PretrainLoader(store, cfg), 30):
        assert batch["input_ids"].shape == (16, 48) and batch["sentence_label"].shape == (16,)
        for i in range(16):
            label = int(batch["sentence_label"][i])
            labels.append(label)
            types, mask = batch["token_type_ids"][i], batch["attention_mask"][i]
            n = int(mask.sum())
            assert (batch["input_ids"][i][n:] == tok.pad_id).all() and not types[n:].any()
            assert types[:n].tolist() == sorted(types[:n].tolist())  # 0 ... 0 1 ... 1
            a, b = segments(batch, i, tok)
            if not a or not b:
                continue  # a segment truncated to less than one whole "doc d sent s"
            checked += 1
            if kind == "nsp" and label == 1:
                assert {d for d, _ in a}.isdisjoint({d for d, _ in b})  # B from another document
            elif kind == "nsp" or label == 0:  # B follows A in the same document
                assert {d for d, _ in a + b} == {a[0][0]} and max(s for _, s in a) < min(s for _, s in b)
            else:  # SOP swapped: A follows B
                assert {d for d, _ in a + b} == {a[0][0]} and max(s for _, s in b) < min(s for _, s in a)
    assert checked > 200
    assert 0.35 < np.mean(labels) < 0.65


def test_short_sequence_probability(data_store):
    store, _ = data_store

    def mean_len(p):
        cfg = LoaderConfig(objective="nsp", batch_size=32, seq_len=128, short_seq_prob=p)
        batches = take(PretrainLoader(store, cfg), 8)
        return np.mean([b["attention_mask"].sum(1).float().mean() for b in batches])

    assert mean_len(1.0) < 0.8 * mean_len(0.0)


def test_wikipedia_packs_99_percent_real_tokens(tmp_path):
    wiki = shared("enwiki_extract")
    files = [str(wiki / "wiki_00"), str(wiki / "wiki_01")]
    from encoderlab.data.corpus import Corpus
    from encoderlab.data.tokenizer import train_tokenizer

    train_tokenizer(Corpus(CorpusConfig(paths=tuple(files))), vocab_size=4000, out=tmp_path / "tok")
    prepare(PrepareConfig(corpus=CorpusConfig(paths=tuple(files))), tmp_path / "tok", tmp_path / "s")
    store = TokenStore(tmp_path / "s")
    batches = take(PretrainLoader(store, LoaderConfig(batch_size=32, seq_len=128)), 20)
    real = torch.stack([(b["input_ids"] != store.special_ids["pad"]) for b in batches])
    assert real.float().mean() >= 0.99
    assert store.num_documents > 1000 and store.meta["counts"]["valid"]["documents"] > 0
