"""The verdict statistics (study/stats.py) on synthetic scores with known effects: no difference gives
a verdict at or under the nominal rate whichever variance component dominates (run to run, residual,
the seed x variant interaction, collapsed fine-tunings), a true difference the size of the stated
detectable difference is found at the rate the docs state (about two times in three), pairing by fine-tuning seed
removes the seed noise shared by both variants, paired runs remove the run noise, Student's t matches
scipy, and Holm's adjustment is the textbook one."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study.stats import diff_estimate, holm, t_cdf, t_quantile, verdict

P, S = 3, 3
MIXES = {  # sd of: run effect, seed x variant interaction, residual; share of scores collapsed to 0
    "runs": (0.03, 0.0, 0.005, 0.0), "residual": (0.0, 0.0, 0.03, 0.0), "interaction": (0.005, 0.02, 0.005, 0.0),
    "balanced": (0.01, 0.01, 0.01, 0.0), "collapsed": (0.01, 0.0, 0.02, 0.4)}


def _side(rng, effect: float, mix: tuple, shared: np.ndarray, tasks=("cola",)) -> dict[str, np.ndarray]:
    """Per task a (P, S) array: a run effect per pretraining run, the fine-tuning seed's effect shared
    by every variant (same head init and order), the seed's effect on this variant alone, residual noise,
    and some fine-tunings collapsed to 0 (as MCC does when a classifier answers one class)."""
    sd_run, sd_int, sd_res, zero = mix
    out = {}
    for t in tasks:
        x = (0.5 + effect + rng.normal(0, sd_run, (P, 1)) + shared + rng.normal(0, sd_int, (1, S))
             + rng.normal(0, sd_res, (P, S)))
        out[t] = np.where(rng.random((P, S)) < zero, 0.0, x)
    return out


def _simulate(effect: float, mix: tuple, n: int, seed: int = 123):
    rng = np.random.default_rng(seed)
    verdicts, mdds = [], []
    for _ in range(n):
        shared = rng.normal(0, 0.02, (1, S))
        e = diff_estimate(_side(rng, effect, mix, shared), _side(rng, 0.0, mix, shared))
        verdicts.append(verdict(e))
        mdds.append(e.mdd)
    return verdicts, float(np.median(mdds))


@pytest.mark.parametrize("mix", list(MIXES))
def test_no_effect_gives_a_verdict_at_or_under_the_nominal_rate_whatever_dominates(mix):
    """Two-sided 5%: 600 studies a mix, allowing sampling error (sd 0.9%). The bootstrap this replaced
    gave 11% with run variance dominating."""
    verdicts, _ = _simulate(0.0, MIXES[mix], 600)
    assert verdicts.count("inconclusive") / len(verdicts) >= 0.93, (mix, verdicts.count("inconclusive"))


def test_a_true_effect_of_the_detectable_size_is_found_about_two_times_in_three():
    """'Detectable' is the textbook (t_0.975 + t_0.80) x standard error; the interval being conservative
    at 2-4 df (test above) and a standard error from 3 runs often short of the true one, an effect of the
    median detectable size is found in about 60-68% of studies (400 a mix: runs 68%, residual 67%,
    interaction 59%, balanced 67%), as RULE and docs/studies.md say: a lower bound, not an 80% size."""
    mix = MIXES["balanced"]
    _, mdd = _simulate(0.0, mix, 100)
    verdicts, _ = _simulate(mdd, mix, 200, seed=5)
    rate = verdicts.count("holds") / len(verdicts)
    assert 0.5 <= rate <= 0.85, (rate, mdd)
    assert verdicts.count("does not hold") == 0
    big, _ = _simulate(3 * mdd, mix, 50, seed=6)
    assert big.count("holds") == 50


def test_pairing_by_fine_tuning_seed_cancels_the_seed_noise_both_variants_share():
    """A large per-seed effect common to both variants (same head init and example order) leaves a
    small constant difference resolvable when paired; with unequal seed counts (unpaired) it is not."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.05, (1, 5))
    a = {t: 0.52 + shared + np.zeros((1, 5)) for t in ("cola", "stsb")}
    b = {t: 0.50 + shared + np.zeros((1, 5)) for t in ("cola", "stsb")}
    e = diff_estimate(a, b)
    assert e.paired and e.diff == pytest.approx(0.02) and e.lo == pytest.approx(0.02) and verdict(e) == "holds"
    assert e.fine_tuning_noise_only and e.runs == (1, 1)
    b_fewer = {t: x[:, :4] for t, x in b.items()}  # 4 seeds against 5: no pairing
    u = diff_estimate(a, b_fewer)
    assert not u.paired and u.lo < 0 < u.hi and verdict(u) == "inconclusive"
    assert u.mdd == pytest.approx((t_quantile(0.975, u.df) + t_quantile(0.8, u.df)) * u.se)


def test_the_same_runs_fine_tuned_two_ways_are_paired_by_run():
    """ALBERT shared against unshared reads the same checkpoints: a run's effect is in both sides and
    cancels when the runs are paired; read as independent runs it swamps a steady 0.01 gain."""
    rng = np.random.default_rng(1)
    run = rng.normal(0, 0.05, (3, 1))
    noise = rng.normal(0, 0.002, (3, 3))
    shared, unshared = 0.3 + run + noise, 0.31 + run + noise[:, ::-1]
    apart = diff_estimate({"cola": unshared}, {"cola": shared})
    paired = diff_estimate({"cola": unshared}, {"cola": shared}, paired_runs=True)
    assert apart.diff == paired.diff == pytest.approx(0.01)
    assert verdict(apart) == "inconclusive" and verdict(paired) == "holds" and paired.se < apart.se / 5


def test_a_run_dominated_difference_gets_a_t_interval_from_its_run_means():
    """With no seed noise the interval is Welch's on the run means: the difference of means, each side's
    run-mean variance over its runs, Satterthwaite's df (4 for equal spreads), t = 2.776."""
    a = {"cola": np.array([[0.50] * 3, [0.52] * 3, [0.54] * 3])}
    b = {"cola": np.array([[0.40] * 3, [0.42] * 3, [0.44] * 3])}
    e = diff_estimate(a, b)
    se = np.sqrt(2 * 0.02 ** 2 / 3)
    assert e.diff == pytest.approx(0.1) and e.se == pytest.approx(se) and e.df == pytest.approx(4)
    assert e.hi - e.diff == pytest.approx(2.776445 * se, rel=1e-5) and e.runs == (3, 3)


def test_students_t_matches_scipy():
    st = pytest.importorskip("scipy.stats")
    for df in (1, 2, 2.7, 4, 11.5, 3599):
        for q in (0.8, 0.975):
            assert t_quantile(q, df) == pytest.approx(st.t.ppf(q, df), rel=1e-7)
        for t in (-3.1, -0.4, 0.0, 1.3, 5.0):
            assert t_cdf(t, df) == pytest.approx(st.t.cdf(t, df), abs=1e-12)


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
    # "NSP adds little over none": A - B below +m, whatever its lower end
    assert verdict(est(-0.05, 0.005), "at_most", 0.01) == "holds"
    assert verdict(est(-0.005, 0.008), "at_most", 0.01) == "equivalent within ±0.01"
    assert verdict(est(0.02, 0.05), "at_most", 0.01) == "does not hold"
    assert verdict(est(-0.01, 0.03), "at_most", 0.01) == "inconclusive"


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([0.2, 0.01]) == pytest.approx([0.2, 0.02])
    assert holm([]) == []


def test_tasks_missing_on_one_side_are_left_out_and_no_shared_task_gives_none():
    a = {"cola": np.full((1, 3), 0.6), "stsb": np.full((1, 3), 0.9)}
    b = {"cola": np.full((1, 3), 0.5)}
    assert diff_estimate(a, b).diff == pytest.approx(0.1)
    assert diff_estimate(a, {"rte": np.full((1, 3), 0.5)}) is None
