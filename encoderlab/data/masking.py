"""Dynamic masking on a batch, in torch, seeded by a ``torch.Generator``. B = batch, T = sequence.

Schemes (which positions are chosen, about ``rate`` of the maskable tokens of each sequence):

- ``token``       each token independently with probability ``rate`` (BERT, as HF's collator does);
- ``whole_word``  each word independently with probability ``rate``, all its pieces together;
- ``span``        SpanBERT: spans of whole words, length ~ Geometric(span_p) truncated to span_max
                  (renormalized), random start words, until the budget round(rate * n) is met;
- ``ngram``       ALBERT: n-grams of whole words, P(n) proportional to 1/n for n <= ngram_max;
- ``proposal``    each token independently with its own probability pi_i from a mask proposal
                  (Chen et al. 2020, "Variance-reduced language pretraining via a mask proposal
                  network"): pi = rate * (u + (1 - u) * n * q) with q the proposal's scores
                  normalised over the sequence's n maskable tokens and u = ``proposal_uniform``
                  (clipped to 1), so the expected count stays ~``rate * n``. The caller (the MLM
                  objective, encoderlab/objectives/proposal.py) gives the scores and weighs each
                  chosen token's loss by 1 / pi_i, which keeps the loss an unbiased estimate of
                  the uniform-masking loss; u > 0 bounds the weights by 1 / (rate * u).

Each chosen token then becomes [MASK] / a random token / itself with probabilities
``mask_fraction / random_fraction / keep_fraction`` (BERT 0.8/0.1/0.1; ELECTRA 0.85/0.0/0.15, see
:meth:`MaskingConfig.electra`). Special tokens and padding are never chosen, and random
replacements are never special tokens. Labels follow HF: -100 where not chosen, else the original id.

Words: a word starts at a position whose ``word_start`` is True, or right after a position that
cannot be masked; its continuation pieces follow. The span budget is met by truncating the last
span at a word boundary (a last word that overshoots is taken with probability left/length),
so spans never split a word and the expected rate stays ``rate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from encoderlab.config import Config, ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskingConfig(Config):
    rate: float = 0.15
    mask_fraction: float = 0.8
    random_fraction: float = 0.1
    keep_fraction: float = 0.1
    scheme: Literal["token", "whole_word", "span", "ngram", "proposal"] = "token"
    span_p: float = 0.2
    span_max: int = 10
    ngram_max: int = 3
    proposal_uniform: float = 0.5  # proposal scheme: the uniform share of the inclusion probabilities

    def validate(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ConfigError(f"rate must be in (0, 1), got {self.rate}")
        fractions = (self.mask_fraction, self.random_fraction, self.keep_fraction)
        if min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-6:
            raise ConfigError(f"mask/random/keep fractions must be >= 0 and sum to 1, got {fractions}")
        if not 0.0 < self.span_p <= 1.0 or self.span_max < 1 or self.ngram_max < 1:
            raise ConfigError("need 0 < span_p <= 1, span_max >= 1, ngram_max >= 1")
        if not 0.0 < self.proposal_uniform <= 1.0:
            raise ConfigError(f"proposal_uniform must be in (0, 1] (0 would allow unbounded weights), "
                              f"got {self.proposal_uniform}")

    @classmethod
    def electra(cls, **changes) -> MaskingConfig:
        """ELECTRA's generator input: 85% [MASK], the other 15% left as they are, none random (the
        reference's pretrain_helpers.mask: only the positions drawn below 0.85 become [MASK]).
        The split matters beyond faithfulness: under the 85% [MASK] / 15% random this method used
        to return, a generator trained alone on a synthetic next-token task stayed at chance for
        800 steps, where BERT's 80/10/10 learned it (docs/benchmarks.md)."""
        return cls(**({"mask_fraction": 0.85, "random_fraction": 0.0, "keep_fraction": 0.15} | changes))


def mask_tokens(
    input_ids: torch.Tensor,
    word_start: torch.Tensor | None,
    special_ids: Sequence[int],
    vocab_size: int,
    mask_id: int,
    cfg: MaskingConfig,
    generator: torch.Generator,
    *,
    special_mask: torch.Tensor | None = None,
    inclusion: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input_ids (B, T), labels (B, T)); ``special_mask`` (B, T) bool adds unmaskable
    positions; ``inclusion`` (B, T): the proposal scheme's probabilities (see proposal_inclusion)."""
    device = input_ids.device
    maskable = maskable_positions(input_ids, special_ids, special_mask)  # (B, T)
    if cfg.scheme == "proposal":
        if inclusion is None:
            raise ValueError("masking scheme 'proposal' needs inclusion probabilities (from a mask proposal)")
        starts = maskable
    elif cfg.scheme == "token" or word_start is None:
        starts = maskable
    else:
        prev = torch.nn.functional.pad(maskable[:, :-1], (1, 0), value=False)
        starts = maskable & (word_start.to(device) | ~prev)

    if cfg.scheme == "proposal":
        chosen = (_rand(input_ids.shape, generator, device) < inclusion.to(device)) & maskable
    elif cfg.scheme in ("token", "whole_word"):
        u = _rand(input_ids.shape, generator, device)  # (B, T): one draw per unit, read at its start
        chosen = _spread(u < cfg.rate, starts, maskable)
    else:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
        chosen = _spans(starts.cpu().numpy(), maskable.cpu().numpy(), cfg, np.random.default_rng(seed))
        chosen = torch.from_numpy(chosen).to(device)

    d = _rand(input_ids.shape, generator, device)  # (B, T): [MASK] / random / keep
    to_mask = chosen & (d < cfg.mask_fraction)
    to_random = chosen & (d >= cfg.mask_fraction) & (d < cfg.mask_fraction + cfg.random_fraction)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[[i for i in special_ids if i < vocab_size]] = False
    allowed_ids = allowed.nonzero().squeeze(1).to(device)  # (V',)
    pick = torch.randint(0, len(allowed_ids), input_ids.shape, generator=generator, device=generator.device)
    random_ids = allowed_ids[pick.to(device)]

    masked = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    masked = torch.where(to_random, random_ids, masked)
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    return masked, labels


def maskable_positions(input_ids: torch.Tensor, special_ids: Sequence[int],
                       special_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T) bool: positions that may be chosen (not special tokens nor padding)."""
    maskable = ~torch.isin(input_ids, torch.tensor(list(special_ids), device=input_ids.device))
    if special_mask is not None:
        maskable &= ~special_mask.to(input_ids.device)
    return maskable


def proposal_inclusion(scores: torch.Tensor, maskable: torch.Tensor, cfg: MaskingConfig) -> torch.Tensor:
    """(B, T) inclusion probabilities pi from (B, T) non-negative scores: a mix of the uniform rate
    and the scores' share of each sequence's budget rate * n; 0 where nothing may be chosen."""
    s = scores.float().clamp(min=0) * maskable  # (B, T)
    n = maskable.sum(1, keepdim=True).clamp(min=1)  # (B, 1)
    share = s / s.sum(1, keepdim=True).clamp(min=1e-12)  # (B, T), sums to 1 (or 0) per row
    u = cfg.proposal_uniform
    pi = cfg.rate * (u + (1 - u) * n * share)
    return torch.where(maskable, pi.clamp(max=1.0), torch.zeros_like(pi))


def _rand(shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def _spread(unit_chosen: torch.Tensor, starts: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """Give every maskable position the decision drawn at the start of its word. All (B, T)."""
    T = starts.shape[1]
    pos = torch.arange(T, device=starts.device).expand_as(starts)
    start_of = torch.where(starts, pos, torch.full_like(pos, -1)).cummax(dim=1).values  # (B, T)
    chosen = unit_chosen.gather(1, start_of.clamp(min=0))
    return chosen & maskable & (start_of >= 0)


def span_length_probs(cfg: MaskingConfig) -> np.ndarray:
    """P(length = 1..L) in words: truncated geometric (span) or proportional to 1/n (ngram)."""
    if cfg.scheme == "span":
        n = np.arange(1, cfg.span_max + 1)
        p = cfg.span_p * (1 - cfg.span_p) ** (n - 1)
    else:
        p = 1.0 / np.arange(1, cfg.ngram_max + 1)
    return p / p.sum()


def _spans(starts: np.ndarray, maskable: np.ndarray, cfg: MaskingConfig, rng: np.random.Generator):
    """Choose whole-word spans per sequence until round(rate * maskable tokens) are covered."""
    probs = span_length_probs(cfg)
    chosen = np.zeros_like(maskable)
    for b in range(starts.shape[0]):
        word_id = np.cumsum(starts[b]) - 1  # (T,) word of each position (-1 before the first)
        inside = maskable[b] & (word_id >= 0)
        n_words = int(starts[b].sum())
        if n_words == 0:
            continue
        word_len = np.bincount(word_id[inside], minlength=n_words)  # (W,)
        # stochastic rounding keeps the expected rate exactly `rate`, even for short sequences
        budget = int(np.floor(cfg.rate * inside.sum() + rng.random()))
        picked = np.zeros(n_words, dtype=bool)
        covered, tries = 0, 0
        while covered < budget and tries < 100:
            length = int(rng.choice(len(probs), p=probs)) + 1
            w0 = int(rng.integers(n_words))
            w1 = min(n_words, w0 + length)
            if picked[w0:w1].any():
                tries += 1
                continue
            left = budget - covered
            w1 = w0 + int((np.cumsum(word_len[w0:w1]) <= left).sum())  # cut at a word boundary
            if w1 == w0:  # even one word overshoots: take it with odds that keep the rate unbiased
                if rng.random() >= left / word_len[w0]:
                    break
                w1 = w0 + 1
            picked[w0:w1] = True
            covered += int(word_len[w0:w1].sum())
        chosen[b] = inside & picked[np.clip(word_id, 0, None)]
    return chosen
