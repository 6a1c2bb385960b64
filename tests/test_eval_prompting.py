"""Prompt-based classification: prompt construction, k-shot sampling, and few-shot runs that must
beat zero-shot on a toy task, for an MLM and for an ELECTRA discriminator."""

import pytest
from eval_helpers import one_thread, tiny_checkpoint, write_sentiment_task, write_vocab  # noqa: F401

from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.config import PromptConfig
from encoderlab.eval.prompting import build_prompts, prompt_classify, sample_k_shot
from encoderlab.eval.tasks import Example, get_task, load_task


def test_build_prompts_places_the_mask_and_truncates_texts_only(tmp_path):
    tok = load_tokenizer(write_vocab(tmp_path / "tok"))
    ex = [Example("the movie was good", "it is a film", 1, 1), Example(" ".join(["very"] * 50), "the plot", 0, 2)]
    p = build_prompts(tok, "{a} ? [MASK] , {b}", ex, max_length=16)
    first = [tok.id_to_token(i) for i in p[0].ids]
    assert first == ["[CLS]", "the", "movie", "was", "good", "[UNK]", "[MASK]", ",", "it", "is", "a", "film", "[SEP]"]
    assert p[0].mask_pos == 6  # "?" is not in the toy vocabulary: [UNK]
    assert len(p[1].ids) == 16 and p[1].ids[p[1].mask_pos] == tok.mask_id and p[1].ids[-1] == tok.sep_id
    assert [tok.id_to_token(i) for i in p[1].ids[-4:-1]] == [",", "the", "plot"]  # the long text was cut
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        build_prompts(tok, "{a} it was", ex, 16)


def test_sample_k_shot_is_balanced_and_seeded():
    exs = [Example(f"t{i}", None, i % 2, i) for i in range(100)]
    a, b = sample_k_shot(exs, 16, 2, seed=0), sample_k_shot(exs, 16, 2, seed=1)
    assert len(a) == 32 and sum(e.label for e in a) == 16
    assert [e.line for e in a] != [e.line for e in b]
    assert [e.line for e in a] == [e.line for e in sample_k_shot(exs, 16, 2, seed=0)]


@pytest.mark.parametrize("family, head, method", [("bert", "mlm", "mlm"), ("electra", "electra", "discriminator")])
def test_few_shot_prompt_tuning_learns_the_toy_task(tmp_path, family, head, method):
    ckpt = tiny_checkpoint(tmp_path, family, head)
    # One word per class: a randomly initialized tiny model generalizes from 32 examples per class
    # only when the cue is that simple (with 4 words per class it memorizes filler: dev acc ~0.75).
    spec = write_sentiment_task(tmp_path / "toy", n_train=256, n_dev=64, n_words=1)
    cfg = PromptConfig(steps=150, learning_rate=3e-3, batch_size=8)
    zero = prompt_classify(ckpt, str(spec), cfg, k=0, log=lambda *a: None)
    few = prompt_classify(ckpt, str(spec), cfg, k=32, seeds=2, log=lambda *a: None)
    assert zero["method"] == few["method"] == method and len(zero["seeds"]) == 1 and len(few["seeds"]) == 2
    assert few["summary"]["acc"]["median"] >= 0.85, few["summary"]
    assert few["summary"]["acc"]["median"] > zero["summary"]["acc"]["median"]
    assert few["seeds"][0]["final_loss"] < few["seeds"][0]["first_loss"]


def test_prompting_needs_a_template_and_one_token_words(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = get_task(write_sentiment_task(tmp_path / "toy", n_train=16, n_dev=8))
    with pytest.raises(ValueError, match="one token each"):
        prompt_classify(ckpt, spec, PromptConfig(verbalizer=("bad", "goods")), log=lambda *a: None)
    with pytest.raises(ValueError, match="no template"):
        prompt_classify(ckpt, spec.replace(template=None), log=lambda *a: None)
    assert load_task(spec).labels == ("0", "1")
