"""Fine-tuning's speed options (issue 33): the task tokenized and padded once for every seed gives
the same batches, losses and scores seed for seed as tokenizing and collating per seed; early
stopping stops, keeps its best scoring and is off by default."""

import numpy as np
import pytest
import torch
from eval_helpers import one_thread, tiny_checkpoint, write_sentiment_task  # noqa: F401

from encoderlab.config import ConfigError
from encoderlab.data.tokenizer import Encoded
from encoderlab.eval import finetune as FT
from encoderlab.eval.config import FinetuneConfig
from encoderlab.tune import TuneConfig, TuneLimits, TuneOptim, fit
from encoderlab.tune.data import PaddedSet, collate


def test_padded_set_batches_equal_collate():
    rng = np.random.default_rng(0)
    enc = [Encoded(rng.integers(5, 50, n).tolist(), [0] * (n // 2) + [1] * (n - n // 2), [], [])
           for n in rng.integers(3, 20, 40)]
    ps = PaddedSet(enc, pad_id=0)
    for _ in range(10):
        idx = rng.choice(40, 8, replace=False)
        got, want = ps.batch(idx), collate([enc[i] for i in idx], 0)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k
    assert not ps.batch([0])["input_ids"].is_set_to(torch.from_numpy(ps.ids))  # a copy, not a view


class _CollatedSet:
    """Today's batching before issue 33: collate from the encoded list at every step."""

    def __init__(self, encoded, pad_id):
        self.encoded, self.pad_id = encoded, pad_id
        self.lengths = np.array([len(e.ids) for e in encoded])

    def batch(self, idx):
        return collate([self.encoded[i] for i in idx], self.pad_id)


def test_prepared_task_matches_per_seed_tokenizing_seed_for_seed(tmp_path, monkeypatch):
    """finetune tokenizes once for all seeds and slices padded batches: the same losses and scores,
    seed for seed and to the bit, as tokenizing per seed and collating every batch (with dropout on,
    so the random streams must line up too)."""
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = write_sentiment_task(tmp_path / "toy", n_train=96, n_dev=32)
    cfg = FinetuneConfig(learning_rate=1e-3, epochs=2, batch_size=16, precision="fp32")
    fast = FT.finetune(ckpt, str(spec), cfg, seeds=[0, 1], log=lambda *a: None)["seeds"]

    from encoderlab.checkpoint import load_model
    from encoderlab.data.tokenizer import load_tokenizer
    from encoderlab.eval.tasks import get_task, load_task

    monkeypatch.setattr(FT, "PaddedSet", _CollatedSet)
    model, tok, data = load_model(ckpt), load_tokenizer(ckpt), load_task(get_task(str(spec)))
    slow = [FT.train_seed(model, tok, data, cfg, s, log=lambda *a: None) for s in (0, 1)]
    for f, s in zip(fast, slow):
        assert (f["first_loss"], f["final_loss"], f["scores"]) == (s["first_loss"], s["final_loss"], s["scores"])
    assert fast[0]["final_loss"] != fast[1]["final_loss"]  # the seeds differ, so the comparison means something


def test_fit_stops_when_told():
    model = torch.nn.Linear(3, 1)
    cfg = TuneConfig(optim=TuneOptim(lr=0.1), limits=TuneLimits(steps=10))
    x = torch.ones(4, 3)
    losses = fit(model, iter(lambda: x, None), lambda m, b: m(b).square().mean(), cfg, stop=lambda step: step == 3)
    assert len(losses) == 3


def test_early_stopping_scores_a_heldout_share_and_keeps_its_best(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = write_sentiment_task(tmp_path / "toy", n_train=96, n_dev=32)
    cfg = FinetuneConfig(learning_rate=1e-3, epochs=6, batch_size=16, precision="fp32", early_stopping=1,
                         early_stopping_holdout=0.25, early_stopping_every=1.0)
    r = FT.finetune(ckpt, str(spec), cfg, seeds=1, log=lambda *a: None)
    s, es = r["seeds"][0], r["seeds"][0]["early_stopping"]
    assert es["heldout"] == 24 and s["steps"] == 6 * 5  # 72 examples left to train on: 5 batches an epoch
    steps = [st for st, _ in es["history"]]
    assert steps == list(range(5, es["steps_run"] + 1, 5)) and es["steps_run"] <= s["steps"]
    scores = [sc for _, sc in es["history"]]
    assert es["heldout_score"] == max(scores) and es["best_step"] == steps[scores.index(max(scores))]
    if es["steps_run"] < s["steps"]:  # stopped: the last scoring was no gain
        assert scores[-1] <= max(scores[:-1])
    # A rate too small to move the scores: no gain at the second scoring, so it must stop there (patience 1)
    frozen = FT.finetune(ckpt, str(spec), cfg.replace(learning_rate=1e-12), seeds=1, log=lambda *a: None)["seeds"][0]
    fes = frozen["early_stopping"]
    assert fes["steps_run"] == 10 < frozen["steps"] and [st for st, _ in fes["history"]] == [5, 10]
    assert fes["best_step"] == 5 and fes["history"][1][1] <= fes["history"][0][1]
    off = FT.finetune(ckpt, str(spec), FinetuneConfig(epochs=1), seeds=1, log=lambda *a: None)["seeds"][0]
    assert "early_stopping" not in off


def test_early_stopping_config_is_checked():
    assert FinetuneConfig.from_dict(FinetuneConfig(early_stopping=2).to_dict()).early_stopping == 2
    for bad in ({"early_stopping": -1}, {"early_stopping_holdout": 1.0}, {"early_stopping_every": 0}):
        with pytest.raises(ConfigError):
            FinetuneConfig(**bad)


def test_holdout_split_is_fixed_and_disjoint():
    xs = list(range(50))
    rest, held = FT.holdout_split(xs, 0.2)
    assert len(held) == 10 and sorted(rest + held) == xs and held == FT.holdout_split(xs, 0.2)[1]
