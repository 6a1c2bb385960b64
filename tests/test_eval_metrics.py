"""Metrics against hand-computed values and against scikit-learn / scipy on fixed inputs."""

import math

import numpy as np
import pytest

from encoderlab.eval import metrics as M

PRED = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1]
GOLD = [1, 0, 0, 1, 0, 1, 1, 0, 1, 0]  # tp 4, tn 3, fp 2, fn 1


def test_hand_computed_binary():
    assert M.accuracy(PRED, GOLD) == pytest.approx(0.7)
    assert M.f1_binary(PRED, GOLD) == pytest.approx(2 * 4 / (2 * 4 + 2 + 1))  # 8/11
    mcc = (4 * 3 - 2 * 1) / math.sqrt((4 + 2) * (4 + 1) * (3 + 2) * (3 + 1))
    assert M.matthews_corrcoef(PRED, GOLD) == pytest.approx(mcc)  # 10 / sqrt(600)


def test_hand_computed_correlations():
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 9.0]
    # Pearson by hand: deviations x (-1.5,-.5,.5,1.5), y (-3,-1,0,4): sum xy 11, sxx 5, syy 26
    assert M.pearson(x, y) == pytest.approx(11 / math.sqrt(5 * 26))
    assert M.spearman(x, y) == pytest.approx(1.0)  # monotonic
    assert M.rankdata([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]  # ties share the average rank


def test_degenerate_cases():
    assert M.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # constant prediction: sklearn's convention
    # A regression fine-tuning that collapsed to one value: the floor, not NaN (which stopped a study).
    assert M.pearson([0.5, 0.5, 0.5], [1.0, 2.0, 4.0]) == 0.0 and M.spearman([3, 3, 3], [1, 2, 4]) == 0.0
    from encoderlab.eval.common import spread

    s = spread([0.1, float("nan"), 0.3])
    assert s["n"] == 3 and all(math.isnan(s[k]) for k in ("median", "min", "max", "std"))
    assert M.f1_binary([0, 0], [0, 0]) == 0.0


def test_against_sklearn_and_scipy():
    sk = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for _ in range(5):
        g = rng.integers(0, 2, 200)
        p = np.where(rng.random(200) < 0.7, g, 1 - g)
        assert M.accuracy(p, g) == pytest.approx(sk.accuracy_score(g, p))
        assert M.f1_binary(p, g) == pytest.approx(sk.f1_score(g, p))
        assert M.matthews_corrcoef(p, g) == pytest.approx(sk.matthews_corrcoef(g, p))
        g3, p3 = rng.integers(0, 3, 150), rng.integers(0, 3, 150)  # multi-class MCC too
        assert M.matthews_corrcoef(p3, g3) == pytest.approx(sk.matthews_corrcoef(g3, p3))
        x = rng.normal(size=100)
        y = x + rng.normal(size=100)
        y_tied = np.round(y * 2) / 2  # STS-B-like scores with many ties
        assert M.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
        assert M.spearman(x, y_tied) == pytest.approx(stats.spearmanr(x, y_tied)[0])


def test_task_score_is_mean_of_metrics():
    assert M.task_score({"f1": 0.9, "acc": 0.8}) == pytest.approx(0.85)
