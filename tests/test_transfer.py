"""The transfer protocol (issue 52): every network chooses its own rate and stopping epoch on held-out
training data, collapses are counted, the seed-free lenses (linear probe, n-gram baseline) score what
they should, and the frontier's rows and sentence follow from the records."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from encoderlab.config import ConfigError
from encoderlab.eval.probe import encoder_features, ngram_baseline
from encoderlab.eval.tasks import Example, TaskSpec
from encoderlab.transfer.frontier import extrapolate, frontier, markdown, welch
from encoderlab.transfer.protocol import FairConfig, choose
from encoderlab.transfer.run import transfer_point
from tests.eval_helpers import FILLER, NEGATIVE, POSITIVE, one_thread, tiny_checkpoint  # noqa: F401  (fixture)

pytest.importorskip("sklearn")


def _trial(lr, seed, heldout):
    return {"learning_rate": lr, "layer_decay": 1.0, "seed": seed,
            "curve": [{"epoch": i + 1, "score": {"heldout": h, "dev": 0.0}, "classes": {}}
                      for i, h in enumerate(heldout)]}


def test_choose_takes_the_best_mean_heldout_point_never_one_lucky_seed():
    trials = [_trial(1e-3, 0, [0.5, 0.6]), _trial(1e-3, 1, [0.5, 0.6]),  # mean 0.6 at epoch 2
              _trial(3e-3, 0, [0.9, 0.1]), _trial(3e-3, 1, [0.2, 0.1])]  # one seed's 0.9: mean 0.55
    assert choose(trials) == (1e-3, 1.0, 1)
    nan = [_trial(1e-3, 0, [float("nan"), 0.2]), _trial(1e-3, 1, [float("nan"), 0.2])]
    assert choose(nan) == (1e-3, 1.0, 1)  # a NaN held-out score (a constant regression) is never chosen


def test_welch_interval_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    a, b = [0.31, 0.35, 0.29, 0.40], [0.20, 0.26, 0.22]
    diff, lo, hi = welch(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert diff == pytest.approx(np.mean(a) - np.mean(b))
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-6)
    assert np.isnan(welch([0.3], [0.2])[1])  # one value a side: no interval, not a zero-width one


def test_fair_config_names_its_keys():
    with pytest.raises(ConfigError, match="learning_rates"):
        FairConfig().with_overrides(["learning_rate=0.001"])
    with pytest.raises(ConfigError, match="layer_decays"):
        FairConfig(layer_decays=(1.5,))


def test_ngram_baseline_reads_the_overlap_of_a_pair():
    """A similarity task whose label is the share of words two sentences have in common: the pair's
    shared n-grams carry it, and the baseline finds them (study/bow.py's per-side words do not)."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]

    def pair():
        a = rng.sample(words, 8)
        k = rng.randrange(9)
        b = a[:k] + rng.sample([w for w in words if w not in a], 8 - k)
        rng.shuffle(b)
        return Example(" ".join(a), " ".join(b), k / 8 * 5, 0)

    data = [pair() for _ in range(700)]
    spec = TaskSpec(name="sim", text_a="a", text_b="b", label="y", kind="regression", metrics=("pearson", "spearman"))
    got = ngram_baseline(spec, data[:400], data[400:500], {"dev": data[500:]})
    assert got["score"]["dev"] > 0.8, got


def test_probe_features_ignore_padding(tmp_path):
    """Mean pooling over real tokens: an example's features are the same alone as beside a longer one."""
    from encoderlab.checkpoint import load_model
    from encoderlab.data.tokenizer import load_tokenizer

    ck = tiny_checkpoint(tmp_path)
    model, tok = load_model(ck), load_tokenizer(ck)
    short = Example("good movie", None, 1, 0)
    long = Example("the plot of this film was really very bad and the actor was awful", None, 0, 1)
    alone = encoder_features(model, tok, [short])
    beside = encoder_features(model, tok, [short, long])
    np.testing.assert_allclose(alone[0], beside[0], atol=1e-5)
    with torch.no_grad():  # "pretraining": any change of the weights
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    trained = encoder_features(model, tok, [short])
    assert not np.allclose(alone, trained)  # features read the checkpoint's weights...
    np.testing.assert_allclose(encoder_features(model, tok, [short], fresh=True),  # ...and fresh ones don't
                               encoder_features(model, tok, [short], fresh=True), atol=0)


def _toy_task(root: Path, n_train: int = 150, n_dev: int = 60, one_class: bool = False) -> Path:
    rng = random.Random(0)

    def rows(n, force=None):
        out = ["s\ty"]
        for _ in range(n):
            y = force if force is not None else rng.randrange(2)
            words = rng.sample(FILLER, 5) + [rng.choice(POSITIVE if y else NEGATIVE)]
            rng.shuffle(words)
            out.append(" ".join(words) + "\t" + ("pos" if y else "neg"))
        return "\n".join(out) + "\n"

    (root / "task").mkdir(parents=True, exist_ok=True)
    (root / "task" / "train.tsv").write_text(rows(n_train, 1 if one_class else None))
    (root / "task" / "dev.tsv").write_text(rows(n_dev))
    spec = root / "toy.yaml"
    spec.write_text("name: toy\ntext_a: s\nlabel: y\nlabels: [neg, pos]\ndata_dir: task\ntrain: train.tsv\n"
                    "eval_files: {dev: dev.tsv}\n")
    return spec


def test_a_point_records_every_trial_its_choice_and_reuses_the_twin(tmp_path):
    torch.manual_seed(0)
    spec = _toy_task(tmp_path)
    ck = tiny_checkpoint(tmp_path)
    cfg = FairConfig(learning_rates=(1e-3, 3e-3), seeds=2, epochs=2, max_train_examples=None, precision="fp32")
    out = tmp_path / "rec"
    paths = transfer_point(ck, [str(spec)], out, name="tiny-a", flops=1e9, cfg=cfg, log=lambda *a: None)
    assert [p.name.split("__")[0].split("-")[0] for p in paths] == ["tiny", "control", "baselines"]
    for path in paths[:2]:
        rec = json.loads(path.read_text())
        fair = rec["fair"]
        assert len(fair["trials"]) == 2 * 2  # every rate x seed, all recorded
        assert all(len(t["curve"]) == 2 for t in fair["trials"])  # one point per epoch
        best = choose(fair["trials"])
        chosen = [t for t in fair["trials"] if t["learning_rate"] == best[0]]
        assert fair["chosen"]["learning_rate"] == best[0]
        assert fair["dev"] == [t["curve"][best[2]]["score"]["dev"] for t in chosen]  # dev read at the chosen point
        assert len(fair["collapsed"]) == 2 and rec["summary"]["n"] == 2
        assert 0 <= rec["probe"] <= 1
    base = json.loads(paths[2].read_text())
    assert base["ngram"] > 0.9  # one sentiment word decides the toy task: n-grams find it
    assert 0.3 < base["majority"] < 0.7
    # a second checkpoint of the same architecture: its own record, the twin's reused as it is
    control = paths[1].stat().st_mtime_ns
    ck2 = tiny_checkpoint(tmp_path / "b")
    paths2 = transfer_point(ck2, [str(spec)], out, name="tiny-b", flops=2e9, cfg=cfg, log=lambda *a: None)
    assert paths2[1] == paths[1] and paths[1].stat().st_mtime_ns == control
    # another protocol: computed again, never mixed in
    logs = []
    transfer_point(ck2, [str(spec)], out, name="tiny-b", flops=2e9, cfg=cfg.replace(seeds=1), log=logs.append)
    assert not any("recorded" in line for line in logs)


def test_a_one_class_fine_tuning_is_counted_as_a_collapse(tmp_path, monkeypatch):
    spec = _toy_task(tmp_path, one_class=True)  # every training label "pos": it can only predict pos
    ck = tiny_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="one class"):  # the probe refuses such a set by name
        transfer_point(ck, [str(spec)], tmp_path / "rec0", name="t", flops=1e9, controls=False, log=lambda *a: None,
                       cfg=FairConfig(learning_rates=(1e-3,), seeds=1, epochs=1, max_train_examples=None))
    monkeypatch.setattr("encoderlab.transfer.run.linear_probe", lambda *a, **k: {"score": {"dev": 0.5}})
    monkeypatch.setattr("encoderlab.transfer.run.baselines", lambda *a, **k: {"majority": 0.5, "ngram": 0.5})
    cfg = FairConfig(learning_rates=(1e-3,), seeds=2, epochs=1, max_train_examples=None, precision="fp32")
    paths = transfer_point(ck, [str(spec)], tmp_path / "rec", name="t", flops=1e9, cfg=cfg, controls=False,
                           log=lambda *a: None)
    rec = json.loads(paths[0].read_text())
    assert rec["fair"]["collapsed"] == [True, True] and rec["summary"]["collapses"] == 2


def _record(folder: Path, name: str, init: str, dev: list[float], *, flops=1e14, task="cola", probe=0.1):
    rec = {"protocol": FairConfig().to_dict(), "task": task, "init": init, "arch": "a1", "family": "bert",
           "machine": "cpu", "probe": probe, "fair": {"dev": dev, "collapsed": [False] * len(dev),
                                                      "chosen": {"learning_rate": 1e-3, "epoch": 2}}}
    if init == "pretrained":
        rec.update(run=name, flops=flops, pretraining={"elapsed_s": 3600, "threads": 2, "machine": "cpu"})
    (folder / f"{name}__{task}.json").write_text(json.dumps(rec))


def test_the_frontier_says_where_bert_first_transfers(tmp_path):
    for task, ngram in [("cola", 0.0), ("sst2", 0.7), ("mrpc", 0.7), ("stsb", 0.4), ("rte", 0.5)]:
        _record(tmp_path, "control-a1", "random", [0.10, 0.12, 0.11], task=task)
        _record(tmp_path, "bert-small", "pretrained", [0.11, 0.12, 0.10], flops=5.7e13, task=task)
        big = [0.30, 0.31, 0.32] if task in ("cola", "sst2", "stsb") else [0.10, 0.13, 0.11]
        _record(tmp_path, "bert-big", "pretrained", big, flops=2.3e14, task=task)
        (tmp_path / f"baselines__{task}.json").write_text(json.dumps(
            {"protocol": FairConfig().to_dict(), "task": task, "majority": 0.0, "ngram": ngram}))
    result = frontier([tmp_path])
    small, big = (p for p in result["points"])
    assert small["flops"] == 5.7e13 and small["transfers_on"] == []
    assert big["transfers_on"] == ["cola", "sst2", "stsb"] and big["tasks"]["stsb"]["beats_ngram"] is False
    assert "At no measured budget" in result["sentence"]  # STS-B's n-gram baseline (0.4) is still ahead
    guess = extrapolate(result["points"])  # STS-B rises 0.19 per 0.6 decade: 0.4 at 10^(log(2.3e14) + 0.09 / 0.316)
    assert guess["stsb above n-gram"] == pytest.approx(10 ** (np.log10(2.3e14) + (0.4 - 0.31) / (0.2 / np.log10(
        2.3e14 / 5.7e13))), rel=1e-6)
    assert guess["rte"] > 1e18 and guess["cola"] == 2.3e14  # rte: a trend of +0.003, far off; cola: already there
    assert "Extrapolated along a straight line in log FLOPs" in result["sentence"]
    assert big["core_hours"] == pytest.approx(2.0)
    (tmp_path / "baselines__stsb.json").write_text(json.dumps(
        {"protocol": FairConfig().to_dict(), "task": "stsb", "majority": 0.0, "ngram": 0.2}))
    result = frontier([tmp_path])
    assert result["sentence"].startswith("bert first beats its random-init twin") and "2.3e+14" in result["sentence"]
    assert "| cola | 0.310 | 0.110 | 0.200" in markdown(result)


def test_the_ngram_baseline_reads_chinese_where_bag_of_words_cannot():
    """Issue 51: study/bow.py's \\w+ "words" are whole Chinese clauses, so it scored 0.29 where a
    character n-gram model scored 0.83. Here the sentiment is one two-character word inside clauses
    written without spaces, each clause otherwise unique: character 1-2-grams read it, clauses cannot."""
    from encoderlab.eval.finetune import FinetuneConfig
    from encoderlab.eval.probe import NgramFeatures, is_cjk
    from encoderlab.eval.tasks import TaskData
    from encoderlab.study.bow import bow_score

    rng = random.Random(0)
    filler = [chr(c) for c in range(0x4E00, 0x4E00 + 400)]
    good, bad = ["很好", "满意", "喜欢"], ["很差", "失望", "讨厌"]

    def example(i):
        y = rng.randrange(2)
        left, right = "".join(rng.sample(filler, 6)), "".join(rng.sample(filler, 6))
        return Example(left + rng.choice(good if y else bad) + right, None, y, i)

    data = [example(i) for i in range(900)]
    assert is_cjk([e.text_a for e in data]) and not is_cjk(["the movie was good"])
    assert NgramFeatures(data[:100]).cjk
    spec = TaskSpec(name="zh", text_a="text", label="label", labels=("neg", "pos"))
    got = ngram_baseline(spec, data[:500], data[500:600], {"dev": data[600:]})
    assert got["score"]["dev"] > 0.95 and got["analyzers"] == "character 1-2-grams"
    td = TaskData(spec, ("neg", "pos"), data[:600], {"dev": data[600:]}, {})
    assert bow_score(td, FinetuneConfig()) < 0.65  # every clause a word of its own: near chance
