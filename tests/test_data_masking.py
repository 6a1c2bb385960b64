"""Masking: rates and the 80/10/10 split within tight bounds, words never split, span lengths, properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from encoderlab.config import ConfigError
from encoderlab.data.masking import MaskingConfig, mask_tokens, span_length_probs

SPECIAL = (0, 1, 2, 3, 4)  # [PAD] [UNK] [CLS] [SEP] [MASK]
V, MASK = 1000, 4


def batch(B=32, T=128, seed=0, word_p=0.6, pad_from=100):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    ids[: B // 4, pad_from:] = 0  # some padded rows
    word_start = torch.rand(B, T, generator=g) < word_p
    return ids, word_start


def run(cfg, n_batches=100, **kw):
    """Masked counts over many batches: chosen, [MASK], random, kept, maskable."""
    g = torch.Generator().manual_seed(1)
    totals = np.zeros(5)
    for i in range(n_batches):
        ids, ws = batch(seed=i, **kw)
        masked, labels = mask_tokens(ids, ws, SPECIAL, V, MASK, cfg, g)
        chosen = labels != -100
        maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
        assert not chosen[~maskable].any()
        assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(masked[~chosen], ids[~chosen])
        is_mask = masked[chosen] == MASK
        kept = masked[chosen] == ids[chosen]
        totals += [chosen.sum(), is_mask.sum(), (~is_mask & ~kept).sum(), kept.sum(), maskable.sum()]
    return totals


@pytest.mark.parametrize("scheme", ["token", "whole_word", "span", "ngram"])
def test_rate_and_80_10_10_split(scheme):
    chosen, n_mask, n_random, n_kept, n = run(MaskingConfig(scheme=scheme))
    # ~370k maskable tokens: the rate's standard error is ~0.0006, the split's ~0.002
    assert abs(chosen / n - 0.15) < 0.003, chosen / n
    random_kept_by_chance = 0.1 / (V - len(SPECIAL))
    assert abs(n_mask / chosen - 0.8) < 0.008
    assert abs(n_random / chosen - (0.1 - random_kept_by_chance)) < 0.006
    assert abs(n_kept / chosen - (0.1 + random_kept_by_chance)) < 0.006


def test_electra_split_keeps_the_rest():
    """As the reference ELECTRA: 85% [MASK], 15% left in place, no random tokens."""
    chosen, n_mask, n_random, n_kept, _ = run(MaskingConfig.electra(), n_batches=40)
    assert abs(n_mask / chosen - 0.85) < 0.01 and abs(n_kept / chosen - 0.15) < 0.01
    assert n_random == 0


def test_random_replacements_are_never_special():
    cfg = MaskingConfig(mask_fraction=0.0, random_fraction=1.0, keep_fraction=0.0)
    ids, ws = batch()
    masked, labels = mask_tokens(ids, ws, SPECIAL, V, MASK, cfg, torch.Generator().manual_seed(0))
    replaced = masked[labels != -100]
    assert len(replaced) > 300 and not torch.isin(replaced, torch.tensor(SPECIAL)).any()


def words_of(word_start_row, maskable_row):
    """Lists of positions per word, with the same rule as the masker."""
    words, prev_ok = [], False
    for t, (ws, ok) in enumerate(zip(word_start_row.tolist(), maskable_row.tolist())):
        if ok and (ws or not prev_ok):
            words.append([t])
        elif ok:
            words[-1].append(t)
        prev_ok = ok
    return words


@pytest.mark.parametrize("scheme", ["whole_word", "span", "ngram"])
def test_words_are_never_split(scheme):
    g = torch.Generator().manual_seed(0)
    for seed in range(5):
        ids, ws = batch(seed=seed, word_p=0.4)
        _, labels = mask_tokens(ids, ws, SPECIAL, V, MASK, MaskingConfig(scheme=scheme), g)
        chosen = labels != -100
        maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
        for b in range(ids.shape[0]):
            for word in words_of(ws[b], maskable[b]):
                assert len({bool(chosen[b, t]) for t in word}) == 1


def run_lengths(chosen_row):
    runs, n = [], 0
    for c in chosen_row.tolist() + [False]:
        if c:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs


@pytest.mark.parametrize("scheme", ["span", "ngram"])
def test_span_lengths_follow_the_configured_distribution(scheme):
    cfg = MaskingConfig(scheme=scheme, rate=0.03)  # sparse, so neighbouring spans rarely touch
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (16, 4096), generator=g)
    ws = torch.ones_like(ids, dtype=torch.bool)  # every token a word: lengths in tokens = in words
    runs = []
    for _ in range(6):
        _, labels = mask_tokens(ids, ws, SPECIAL, V, MASK, cfg, g)
        for row in labels != -100:
            runs.extend(run_lengths(row))
    probs = span_length_probs(cfg)
    observed = np.bincount(runs, minlength=len(probs) + 1)[1 : len(probs) + 1] / len(runs)
    assert len(runs) > 1000
    assert 0.5 * np.abs(observed - probs).sum() < 0.05, (observed.round(3), probs.round(3))
    if scheme == "span":
        assert max(runs) <= 10 or np.mean(np.array(runs) > 10) < 0.01
        assert abs(probs[0] - 0.2 / (1 - 0.8**10)) < 1e-9  # truncated geometric, renormalized
    else:
        assert np.allclose(probs, np.array([1, 1 / 2, 1 / 3]) / (11 / 6))


def test_seeded_and_deterministic():
    ids, ws = batch()
    out = [mask_tokens(ids, ws, SPECIAL, V, MASK, MaskingConfig(scheme=s), torch.Generator().manual_seed(7))
           for s in ("span", "span", "token")]
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
    assert not torch.equal(out[0][1], out[2][1])


def test_config_validation_and_round_trip():
    cfg = MaskingConfig(scheme="ngram", rate=0.2)
    assert MaskingConfig.from_dict(cfg.to_dict()) == cfg and MaskingConfig.from_yaml(cfg.to_yaml()) == cfg
    with pytest.raises(ConfigError, match="sum to 1"):
        MaskingConfig(mask_fraction=0.8, random_fraction=0.1, keep_fraction=0.2)
    with pytest.raises(ConfigError, match="unknown key"):
        MaskingConfig.from_dict({"ratio": 0.1})


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 4),
    T=st.integers(1, 40),
    seed=st.integers(0, 2**31),
    scheme=st.sampled_from(["token", "whole_word", "span", "ngram"]),
    rate=st.floats(0.01, 0.9),
)
def test_properties_on_random_inputs(B, T, seed, scheme, rate):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 30, (B, T), generator=g)  # many special ids and padding among them
    ws = torch.rand(B, T, generator=g) < 0.5
    masked, labels = mask_tokens(ids, ws, SPECIAL, 30, MASK, MaskingConfig(scheme=scheme, rate=rate), g)
    chosen = labels != -100
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert masked.shape == labels.shape == ids.shape and masked.dtype == ids.dtype
    assert not chosen[special].any()
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(masked[~chosen], ids[~chosen])
    changed = masked[chosen]
    assert ((changed == MASK) | ~torch.isin(changed, torch.tensor(SPECIAL))).all()
    if scheme != "token":
        for b in range(B):
            for word in words_of(ws[b], ~special[b]):
                assert len({bool(chosen[b, t]) for t in word}) == 1
