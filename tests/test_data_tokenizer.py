"""The one tokenizer stack: training (BERT normalization, special ids, Unigram, hashing), loading
(transformers, bare vocab.txt, lowercasing from the saved config) and encoding model inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_data_helpers import chinese_lines, tiny_tokenizer, write_corpus

from encoderlab.data.tokenizer import SPECIAL_TOKENS, load_tokenizer
from encoderlab.errors import DataError


@pytest.fixture(scope="module")
def data_wordpiece(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    corpus = write_corpus(root / "corpus")
    with open(corpus, "a", encoding="utf-8") as f:
        f.write("\n" + chinese_lines(20) + "\nCafé Naïve ÉCOLE\n")
    return tiny_tokenizer(root / "wp", corpus), root


def test_special_tokens_have_ids_0_to_4(data_wordpiece):
    tok, _ = data_wordpiece
    assert [tok.id_to_token(i) for i in range(5)] == list(SPECIAL_TOKENS)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.special_ids == (0, 1, 2, 3, 4)


def test_bert_normalization_lowercase_accents_and_cjk(data_wordpiece):
    tok, _ = data_wordpiece
    assert tok.encode("CAFÉ") == tok.encode("cafe")
    pieces = [tok.id_to_token(i) for i in tok.encode("北京人民")]
    assert pieces == ["北", "京", "人", "民"]  # every CJK character on its own, never a ## piece


def test_loads_in_transformers_as_bert_tokenizer_fast(data_wordpiece):
    transformers = pytest.importorskip("transformers")
    tok, root = data_wordpiece
    hf = transformers.BertTokenizerFast.from_pretrained(str(root / "wp"))
    text = "Kalo mitas vozu! 北京 café"
    assert hf(text)["input_ids"] == [tok.cls_id, *tok.encode(text), tok.sep_id]
    assert (hf.pad_token_id, hf.mask_token_id, hf.cls_token_id) == (0, 4, 2)


def test_round_trip_hash_and_mismatch(data_wordpiece, tmp_path):
    tok, root = data_wordpiece
    again = load_tokenizer(root / "wp")
    assert again.hash == tok.hash and again.vocab_size == tok.vocab_size
    tok.save(tmp_path / "copy")
    assert load_tokenizer(tmp_path / "copy").hash == tok.hash
    other = tiny_tokenizer(tmp_path / "other", write_corpus(tmp_path / "c2", seed=1))
    assert other.hash != tok.hash


def test_imports_a_bare_vocab_txt_checkpoint(data_wordpiece, tmp_path):
    tok, root = data_wordpiece
    shutil.copy(root / "wp" / "vocab.txt", tmp_path / "vocab.txt")  # as in an old BERT checkpoint dir
    imported = load_tokenizer(tmp_path)
    text = "Kalo mitas vozu, rentas! 北京"
    assert imported.encode(text) == tok.encode(text)
    assert imported.mask_id == 4 and imported.vocab_size == tok.vocab_size
    with pytest.raises(FileNotFoundError, match="neither tokenizer.json nor vocab.txt"):
        load_tokenizer(tmp_path / "..")


@pytest.mark.parametrize("config,expected", [({"do_lower_case": False}, "Paris"), ({"do_lower_case": True}, "paris"),
                                             (None, "paris")])
def test_lowercasing_is_read_from_the_saved_config_never_guessed(tmp_path, config, expected):
    """A vocabulary with capitals and no config is lowercased all the same (transformers' default):
    the rule is the config's do_lower_case, not a guess from the vocabulary's letters."""
    (tmp_path / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, "Paris", "paris", "is", "."]) + "\n")
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = load_tokenizer(tmp_path)
    assert tok.lowercase == (expected == "paris")
    ids = tok.encode("Paris is [MASK] .")  # a [MASK] written in a text is the mask token
    assert [tok.id_to_token(i) for i in ids] == [expected, "is", "[MASK]", "."]


def test_model_inputs_are_truncated_pairs_and_the_store_encoding_is_not(data_wordpiece):
    tok, _ = data_wordpiece
    text = "kalo mitas vozu rentas " * 20
    e = tok.encode_input(text, "kalo", max_length=16)
    assert len(e.ids) == 16 and e.ids[0] == tok.cls_id and e.ids[-1] == tok.sep_id
    assert e.special[0] and not e.special[1] and e.type_ids[1] == 0 and e.type_ids[-1] == 1
    assert len(tok.encode(text)) > 16  # truncation for model inputs does not stay switched on


def test_a_tokenizer_without_mask_serves_fine_tuning_but_not_a_token_store(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]) + "\n")
    tok = load_tokenizer(tmp_path)
    assert tok.mask_id is None and tok.encode_input("a b").ids == [2, 4, 5, 3]
    with pytest.raises(DataError, match="no mask token"):
        tok.require_all_roles()


def test_decode_and_word_start_table(data_wordpiece):
    tok, _ = data_wordpiece
    ids = tok.encode("kalo mitas")
    assert tok.decode(ids) == "kalo mitas"
    table = tok.word_start_table()
    for i in range(tok.vocab_size):
        assert table[i] == (not tok.id_to_token(i).startswith("##"))


def test_unigram_option(tmp_path):
    tok = tiny_tokenizer(tmp_path / "ug", write_corpus(tmp_path / "c"), vocab_size=200, model="unigram")
    assert tok.model_type == "Unigram" and tok.special_ids == (0, 1, 2, 3, 4)
    ids = tok.encode("Kalo mitas")
    assert tok.decode(ids) == "kalo mitas"
    table = tok.word_start_table()
    assert table[ids[0]] and all(table[i] == tok.id_to_token(i).startswith("▁") for i in ids)
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ug"))
    assert hf("Kalo mitas")["input_ids"] == [2, *ids, 3]


def test_wordpiece_ids_are_the_same_in_every_process(data_wordpiece, tmp_path):
    """The trainer's own numbering follows a per-process hash order; ours must not, or a rerun of a
    study on the same corpus would give each token a different embedding row."""
    import subprocess
    import sys

    corpus = data_wordpiece[1] / "corpus"
    code = ("import sys; from test_data_helpers import tiny_tokenizer; from pathlib import Path; "
            "tiny_tokenizer(Path(sys.argv[1]), Path(sys.argv[2]))")
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name), str(corpus)], check=True,
                       cwd=Path(__file__).parent)
    vocab = (tmp_path / "a" / "vocab.txt").read_text()
    assert vocab == (tmp_path / "b" / "vocab.txt").read_text() == (data_wordpiece[1] / "wp" / "vocab.txt").read_text()
    assert vocab.splitlines()[:5] == list(SPECIAL_TOKENS)
