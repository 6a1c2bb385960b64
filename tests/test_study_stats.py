"""The verdict statistics (study/stats.py) on synthetic scores with known effects: a true difference
the size of the stated detectable difference is found at about the stated 80% rate, no difference
gives "holds" at about the nominal rate or less, pairing by fine-tuning seed removes the seed noise
shared by both variants, and Holm's adjustment is the textbook one."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study.stats import MDD_FACTOR, bootstrap_diff, holm, verdict

P, S, TASKS = 3, 5, ("cola", "stsb")


def _scores(rng, effect: float, sd_run: float, sd_seed: float, seed_effects: np.ndarray) -> dict[str, np.ndarray]:
    """Per task a (P, S) array: a run effect per pretraining run, the fine-tuning seed's effect (shared
    across variants: same head init and order), and noise."""
    out = {}
    for k, t in enumerate(TASKS):
        run = rng.normal(0, sd_run, (P, 1))
        out[t] = 0.5 + effect + run + seed_effects[k] + rng.normal(0, sd_seed, (P, S))
    return out


def _simulate(effect: float, n: int = 150, draws: int = 300, sd_run=0.01, sd_seed=0.01, sd_shared=0.02):
    rng = np.random.default_rng(123)
    verdicts, mdds = [], []
    for i in range(n):
        shared = rng.normal(0, sd_shared, (len(TASKS), 1, S))
        e = bootstrap_diff(_scores(rng, effect, sd_run, sd_seed, shared), _scores(rng, 0.0, sd_run, sd_seed, shared),
                           draws=draws, seed=i)
        verdicts.append(verdict(e))
        mdds.append(e.mdd)
    return verdicts, float(np.median(mdds))


def test_no_effect_holds_at_about_the_nominal_rate_or_less():
    verdicts, _ = _simulate(0.0)
    holds = verdicts.count("holds") / len(verdicts)
    # One direction of a 95% interval: 2.5% nominal. 150 simulations: allow sampling error (~1.3%)
    # and the approximation with 3 runs.
    assert holds <= 0.06, holds
    assert verdicts.count("inconclusive") / len(verdicts) >= 0.88


def test_a_true_effect_of_the_detectable_size_is_found_at_about_80_percent():
    _, mdd = _simulate(0.0, n=40)
    verdicts, _ = _simulate(mdd)
    rate = verdicts.count("holds") / len(verdicts)
    assert 0.6 <= rate <= 0.95, (rate, mdd)
    assert verdicts.count("does not hold") == 0
    big, _ = _simulate(3 * mdd, n=30)
    assert big.count("holds") == 30


def test_pairing_by_fine_tuning_seed_cancels_the_seed_noise_both_variants_share():
    """A large per-seed effect common to both variants (same head init and example order) leaves a
    small constant difference resolvable when paired; with unequal seed counts (unpaired) it is not."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.05, (len(TASKS), 1, S))
    a = {t: 0.52 + shared[k] + np.zeros((1, S)) for k, t in enumerate(TASKS)}
    b = {t: 0.50 + shared[k] + np.zeros((1, S)) for k, t in enumerate(TASKS)}
    e = bootstrap_diff(a, b, draws=500)
    assert e.paired and e.diff == pytest.approx(0.02) and e.lo == pytest.approx(0.02) and verdict(e) == "holds"
    assert e.fine_tuning_noise_only and e.runs == (1, 1)
    b_fewer = {t: x[:, :4] for t, x in b.items()}  # 4 seeds against 5: no pairing
    u = bootstrap_diff(a, b_fewer, draws=500)
    assert not u.paired and u.lo < 0 < u.hi and verdict(u) == "inconclusive"
    assert u.mdd == pytest.approx(MDD_FACTOR * u.se)


def test_verdicts_of_directional_and_matching_claims():
    from encoderlab.study.stats import Estimate

    def est(lo, hi):
        return Estimate(diff=(lo + hi) / 2, lo=lo, hi=hi, se=0.01, mdd=0.028, p=0.5, runs=(3, 3), finetune_seeds=5,
                        paired=True)

    assert verdict(est(0.01, 0.03)) == "holds" and verdict(est(-0.03, -0.01)) == "does not hold"
    assert verdict(est(-0.01, 0.01)) == "inconclusive" and verdict(None) == "inconclusive"
    assert verdict(est(-0.005, 0.008), "at_least", 0.01) == "equivalent within ±0.01"
    assert verdict(est(-0.005, 0.03), "at_least", 0.01) == "holds"  # matches or beats
    assert verdict(est(-0.05, -0.02), "at_least", 0.01) == "does not hold"
    assert verdict(est(-0.02, 0.0), "at_least", 0.01) == "inconclusive"


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([0.2, 0.01]) == pytest.approx([0.2, 0.02])
    assert holm([]) == []


def test_tasks_missing_on_one_side_are_left_out_and_no_shared_task_gives_none():
    a = {"cola": np.full((1, 3), 0.6), "stsb": np.full((1, 3), 0.9)}
    b = {"cola": np.full((1, 3), 0.5)}
    assert bootstrap_diff(a, b, draws=50).diff == pytest.approx(0.1)
    assert bootstrap_diff(a, {"rte": np.full((1, 3), 0.5)}) is None
