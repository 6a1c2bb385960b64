"""Prompt-based classification: prompt construction, k-shot sampling, and few-shot runs that must
beat zero-shot on a toy task, for an MLM and for an ELECTRA discriminator."""

from dataclasses import replace

import pytest
import torch
from eval_helpers import one_thread, tiny_checkpoint, tiny_config, write_sentiment_task, write_vocab  # noqa: F401

from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.config import PromptConfig
from encoderlab.eval.intrinsic import discriminator_network, mlm_network
from encoderlab.eval.prompting import build_prompts, label_scores, prompt_classify, sample_k_shot
from encoderlab.eval.tasks import Example, get_task, load_task
from encoderlab.models.build import build_model


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


def test_the_slot_holds_the_longest_label_word_within_max_length(tmp_path):
    tok = load_tokenizer(write_vocab(tmp_path / "tok"))
    long = [Example(" ".join(["very"] * 50), None, 0, 1)]
    one, three = (build_prompts(tok, "{a} it was [MASK] .", long, 12, slot) for slot in (1, 3))
    assert len(one[0].ids) == 12 and len(three[0].filled([7, 7, 7])) == 12  # the text gave way to the pieces
    with pytest.raises(ValueError, match="3 in the \\[MASK\\] slot"):
        build_prompts(tok, "it was [MASK] . it was", long, 8, slot=3)


PROMPT_NETS = [("bert", "mlm", {}), ("bert", "mlm", {"next_token_head": True}), ("electra", "electra", {})]


@pytest.mark.parametrize("family, head, extra", PROMPT_NETS, ids=["mlm", "next-token-mlm", "discriminator"])
def test_label_words_of_several_pieces_score_as_each_prompt_alone_says(tmp_path, family, head, extra):
    """Batched scores of 1- and 2-piece label words in prompts of unequal length (padded, the MLM
    read at the chosen positions only) equal each prompt filled and run alone: the MLM's mean
    log-probability of the word's pieces at its [MASK]s (GPT-BERT's head reading each at t - 1),
    the discriminator's mean "replaced" logit over the word's pieces, negated."""
    tok = load_tokenizer(write_vocab(tmp_path / "tok"))
    words = [tok.word_pieces(w) for w in ("bad", "goods", "plots")]
    assert [[tok.id_to_token(i) for i in w] for w in words] == [["bad"], ["good", "##s"], ["plot", "##s"]]
    torch.manual_seed(0)
    model = build_model(replace(tiny_config(family, head), **extra)).eval()
    net = discriminator_network(model) if head == "electra" else mlm_network(model)
    method = "discriminator" if head == "electra" else "mlm"
    ex = [Example("the movie was good", None, 0, 1), Example("a very very long story of the dog", None, 1, 2)]
    prompts = build_prompts(tok, "{a} it was [MASK] .", ex, max_length=16, slot=2)
    with torch.no_grad():
        got = label_scores(net, method, prompts, words, tok.pad_id, "fp32")  # (2, 3)
        for b, p in enumerate(prompts):
            for c, w in enumerate(words):
                at = p.mask_pos + torch.arange(len(w))
                if method == "mlm":
                    logp = net(torch.tensor([p.filled([tok.mask_id] * len(w))])).logits[0].log_softmax(-1)  # (T, V)
                    want = logp[at, torch.tensor(w)].mean()
                else:
                    want = -net(torch.tensor([p.filled(w)]))[0, at].mean()
                torch.testing.assert_close(got[b, c], want, rtol=1e-5, atol=1e-5)


def test_one_piece_words_score_as_the_single_token_scorer_did(tmp_path):
    """For one-piece words the MLM score is the word's logit at [MASK] less one constant per prompt:
    the same predictions and the same few-shot cross-entropy as scoring the logits themselves."""
    tok = load_tokenizer(write_vocab(tmp_path / "tok"))
    words = [tok.word_pieces(w) for w in ("bad", "good", "yes")]
    torch.manual_seed(0)
    net = mlm_network(build_model(tiny_config("bert", "mlm"))).eval()
    prompts = build_prompts(tok, "{a} it was [MASK] .", [Example("the cat sat on the mat", None, 0, 1)], 16)
    p = prompts[0]
    with torch.no_grad():
        got = label_scores(net, "mlm", prompts, words, tok.pad_id, "fp32")[0]  # (C,)
        logits = net(torch.tensor([p.ids])).logits[0, p.mask_pos, [w[0] for w in words]]  # (C,)
    shift = got - logits
    torch.testing.assert_close(shift, shift[0].expand(3), rtol=0, atol=1e-5)
    torch.testing.assert_close(got.log_softmax(-1), logits.log_softmax(-1), rtol=0, atol=1e-5)


def test_sample_k_shot_is_balanced_and_seeded():
    exs = [Example(f"t{i}", None, i % 2, i) for i in range(100)]
    a, b = sample_k_shot(exs, 16, 2, seed=0), sample_k_shot(exs, 16, 2, seed=1)
    assert len(a) == 32 and sum(e.label for e in a) == 16
    assert [e.line for e in a] != [e.line for e in b]
    assert [e.line for e in a] == [e.line for e in sample_k_shot(exs, 16, 2, seed=0)]


@pytest.mark.parametrize("verbalizer", [None, ("bad", "goods")], ids=["one-piece", "two-piece"])
@pytest.mark.parametrize("family, head, method", [("bert", "mlm", "mlm"), ("electra", "electra", "discriminator")])
def test_few_shot_prompt_tuning_learns_the_toy_task(tmp_path, family, head, method, verbalizer):
    ckpt = tiny_checkpoint(tmp_path, family, head)
    # One word per class: a randomly initialized tiny model generalizes from 32 examples per class
    # only when the cue is that simple (with 4 words per class it memorizes filler: dev acc ~0.75).
    # "goods" is two pieces ('good', '##s'): the slot widens to two tokens for both words.
    spec = write_sentiment_task(tmp_path / "toy", n_train=256, n_dev=64, n_words=1)
    cfg = PromptConfig(steps=150, learning_rate=3e-3, batch_size=8, verbalizer=verbalizer)
    zero = prompt_classify(ckpt, str(spec), cfg, k=0, log=lambda *a: None)
    few = prompt_classify(ckpt, str(spec), cfg, k=32, seeds=2, log=lambda *a: None)
    assert zero["method"] == few["method"] == method and len(zero["seeds"]) == 1 and len(few["seeds"]) == 2
    assert few["summary"]["acc"]["median"] >= 0.85, few["summary"]
    assert few["summary"]["acc"]["median"] > zero["summary"]["acc"]["median"]
    assert few["seeds"][0]["final_loss"] < few["seeds"][0]["first_loss"]


def test_prompting_needs_a_template_and_words_the_vocabulary_spells(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = get_task(write_sentiment_task(tmp_path / "toy", n_train=16, n_dev=8))
    with pytest.raises(ValueError, match="'xylophone' is \\['\\[UNK\\]'\\].*special or unknown"):
        prompt_classify(ckpt, spec, PromptConfig(verbalizer=("bad", "xylophone")), log=lambda *a: None)
    r = prompt_classify(ckpt, spec, PromptConfig(verbalizer=("bad", "goods")), log=lambda *a: None)
    assert r["label_pieces"] == {"bad": ["bad"], "goods": ["good", "##s"]} and 0 <= r["summary"]["acc"]["median"] <= 1
    with pytest.raises(ValueError, match="no template"):
        prompt_classify(ckpt, spec.replace(template=None), log=lambda *a: None)
    assert load_task(spec).labels == ("0", "1")
