"""Tasks with signal: the random-init control decides which tasks enter the claims' aggregates (a
task where pretrained encoders do no better than fresh weights is reported apart), and the
bag-of-words baseline learns what words alone tell."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study import blimp
from encoderlab.study.judge import task_signal
from encoderlab.study.results import Checkpoint, FinetuneKey, Measure, VariantResult
from encoderlab.study.verdicts import evaluate_claims


def _ft(level, rng):
    per_seed = [float(x) for x in level + rng.normal(0, 0.005, 5)]
    return {"score": {"median": float(np.median(per_seed)), "std": 0.005, "n": 5}, "per_seed": per_seed}


def _variant(name, cola, mrpc, rng):
    return VariantResult(name=name, spec={}, run_dir="", checkpoints={1.0: Checkpoint("", 1, 1.0, 1.0)},
                         finetune={FinetuneKey("cola", 1.0): _ft(cola, rng), FinetuneKey("mrpc", 1.0): _ft(mrpc, rng)})


def test_a_task_without_signal_is_kept_out_of_the_aggregates():
    """CoLA: pretrained 0.20-0.25 against random init 0.0 (signal). MRPC: every variant at the random
    init's 0.70 (none), where ELECTRA happens to sit higher: averaged in, it would turn claim 5a."""
    rng = np.random.default_rng(0)
    v = {"bert": _variant("bert", 0.25, 0.68, rng), "electra": _variant("electra", 0.23, 0.74, rng)}
    controls = {"variant": "bert", "tasks": {"cola": _ft(0.0, rng), "mrpc": _ft(0.71, rng)}}
    signal = task_signal(v, controls)
    assert {t: ok for t, (ok, _) in signal.items()} == {"cola": True, "mrpc": False}
    assert signal["cola"][1].lo > 0.2
    every = {str(c.claim): c for c in evaluate_claims(v)}
    kept = {str(c.claim): c for c in evaluate_claims(v, signal={"cola": True, "mrpc": False})}
    assert every["5a"].verdict == "holds"  # MRPC's noise decides it
    assert kept["5a"].verdict == "does not hold" and kept["5a"].numbers["electra - bert"] == pytest.approx(-0.02,
                                                                                                           abs=0.005)
    assert set(kept["5a"].comparisons[0].per_task) == set()  # one task left: no per-task rows to add
    assert task_signal(v, {}) == {}


def test_bag_of_words_learns_a_task_words_decide_and_not_one_they_do_not():
    from encoderlab.eval.tasks import Example
    from encoderlab.study.bow import fit_predict

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]

    def ex(label, cue):
        text = " ".join(rng.choice(words, 6)) + (" great" if label == 1 else " awful") * cue
        return Example(text_a=text, text_b=None, label=label, line=0)

    train = [ex(i % 2, True) for i in range(200)]
    test = [ex(i % 2, True) for i in range(100)]
    logits = fit_predict(train, {"dev": test}, kind="classification", num_labels=2)(test)
    assert (logits.argmax(1) == [e.label for e in test]).mean() > 0.95
    blind = [ex(i % 2, False) for i in range(100)]
    acc = (fit_predict(train, {}, kind="classification", num_labels=2)(blind).argmax(1)
           == [e.label for e in blind]).mean()
    assert 0.3 < acc < 0.7  # no cue word: chance
    reg = [Example(text_a=f"x{i % 5} filler", text_b="filler", label=float(i % 5), line=i) for i in range(100)]
    pred = fit_predict(reg, {}, kind="regression", num_labels=1)(reg)[:, 0]
    assert np.corrcoef(pred, [e.label for e in reg])[0, 1] > 0.95


def test_blimp_dev_is_named_as_a_subset_sampled_alike_and_compared_pair_by_pair(tmp_path):
    import json



    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(
            {"sentence_good": f"{name} good {i}", "sentence_bad": f"{name} bad {i}", "linguistics_term": name}) + "\n"
            for i in range(10)))
    assert blimp.label(tmp_path) == "BLiMP dev (3 of 67 paradigms)"
    sample = blimp.load_pairs(tmp_path, per_paradigm=4)
    assert len(sample) == 12 and sample == blimp.load_pairs(tmp_path, per_paradigm=4)  # the same for every variant
    assert len(blimp.load_pairs(tmp_path)) == 30
    # paired: a beats b on 60 of 1000 pairs, b beats a on 20, the rest agree
    a = np.zeros(1000, np.uint8)
    b = np.zeros(1000, np.uint8)
    a[:60], b[60:80], a[100:600], b[100:600] = 1, 1, 1, 1
    e = blimp.paired_diff(a, b)
    assert e.diff == pytest.approx(0.04) and e.lo > 0 and e.paired
    assert blimp.paired_diff(a, a).diff == 0 and blimp.paired_diff(a, None) is None


def test_blimp_dev_enters_a_claims_rows_only_with_signal():
    rng = np.random.default_rng(0)
    v = {"bert": _variant("bert", 0.25, 0.68, rng), "electra": _variant("electra", 0.23, 0.74, rng)}
    label = "BLiMP dev (36 of 67 paradigms)"
    for name, k in (("bert", 700), ("electra", 600)):
        bits = "1" * k + "0" * (1000 - k)
        v[name].measure.blimp = {"1": {"label": label, "n": 1000, "deployed": "mlm",
                                          "networks": {"mlm": {"accuracy": k / 1000, "correct": bits}}}}
    rows = {str(c.claim): c for c in evaluate_claims(v)}["5a"].comparisons[0].per_task
    assert rows[f"{label}, zero-shot"][1] == "does not hold"  # 0.60 against 0.70, paired over pairs
    from encoderlab.study.results import Replica

    bits = "1" * 800 + "0" * 200  # a second pretraining run of bert: each pair's outcome averaged over both
    v["bert"].replicas = [Replica(seed=1, run_dir="", measure=Measure(blimp={"1": {
        "label": label, "n": 1000, "deployed": "mlm", "networks": {"mlm": {"accuracy": 0.8, "correct": bits}}}}))]
    rows = {str(c.claim): c for c in evaluate_claims(v)}["5a"].comparisons[0].per_task
    assert rows[f"{label}, zero-shot"][0].diff == pytest.approx(0.6 - 0.75)
    off = evaluate_claims(v, signal={"cola": True, "mrpc": True, label: False})
    assert f"{label}, zero-shot" not in {str(c.claim): c for c in off}["5a"].comparisons[0].per_task
    controls = {"tasks": {}, "blimp": {"n": 1000, "deployed": "mlm",
                                       "networks": {"mlm": {"correct": "1" * 500 + "0" * 500}}}}
    assert task_signal(v, controls)[label][0] is True  # 0.65 pooled against the control's 0.50
    # The main control without BLiMP (its weights were not on the machine that scored it): the variants
    # with their own architecture's control are screened against that one.
    shaped = {"tasks": {}, "shapes": {"electra": {"tasks": {}, "blimp": controls["blimp"]}},
              "of": {"electra": "electra"}}
    assert task_signal({"electra": v["electra"]}, shaped)[label][0] is True  # 0.60 against 0.50
    assert label not in task_signal({"bert": v["bert"]}, shaped)  # no control of bert's architecture scored it


def test_blimp_dev_at_chance_carries_no_signal_however_far_below_it_the_control_sits():
    """A fresh encoder can prefer the wrong sentence of a pair systematically (a 4 x 128 ALBERT scored
    0.434); pretrained variants at chance beat it by 0.07, yet learned nothing of the task. Simulated,
    3,600 pairs: at chance the screen lets BLiMP in at most at the nominal one-sided rate (the control
    alone would let it in every time); at 0.53 it always does."""
    rng = np.random.default_rng(0)
    label, n = "BLiMP dev (36 of 67 paradigms)", 3600

    def record(p):
        return {"label": label, "n": n, "deployed": "mlm",
                "networks": {"mlm": {"correct": "".join("1" if x else "0" for x in rng.random(n) < p)}}}

    def screen(p, studies):
        ins = beyond_control = 0
        for _ in range(studies):
            v = {name: _variant(name, 0.2, 0.7, rng) for name in ("bert", "albert")}
            for r in v.values():
                r.measure.blimp = {"1": record(p)}
            ok, e = task_signal(v, {"tasks": {}, "blimp": record(0.434)})[label]
            ins, beyond_control = ins + ok, beyond_control + (e.lo > 0)
        return ins / studies, beyond_control / studies

    ins, beyond_control = screen(0.5, 300)
    assert beyond_control == 1.0 and ins <= 0.05
    assert screen(0.53, 30) == (1.0, 1.0)


def test_blimp_dev_interval_covers_pretraining_runs_not_only_pairs():
    """Two runs of bert far apart (0.80, 0.62) against two close ones of electra (0.66, 0.68): pair by
    pair on the runs' averages bert is ahead beyond doubt; with the runs as the unit of replication it
    is not (the runs are resampled, the pairs shared by every run of both variants)."""
    from encoderlab.study.judge import Judge
    from encoderlab.study.results import Replica

    rng = np.random.default_rng(1)
    label = "BLiMP dev (36 of 67 paradigms)"
    order = rng.permutation(1000)

    def record(k):
        bits = np.zeros(1000, dtype=int)
        bits[order[:k]] = 1
        return {"1": {"label": label, "n": 1000, "deployed": "mlm",
                      "networks": {"mlm": {"accuracy": k / 1000, "correct": "".join(map(str, bits))}}}}

    v = {"bert": _variant("bert", 0.25, 0.68, rng), "electra": _variant("electra", 0.23, 0.74, rng)}
    for name, (k0, k1) in (("bert", (800, 620)), ("electra", (660, 680))):
        v[name].measure.blimp = record(k0)
        v[name].replicas = [Replica(seed=1, run_dir="", measure=Measure(blimp=record(k1)))]
    j = Judge(v)
    _, a = j.zero_shot("bert")
    _, b = j.zero_shot("electra")
    assert a.shape == b.shape == (2, 1000)
    pooled = blimp.paired_diff(a.mean(0), b.mean(0))
    assert pooled.lo > 0  # pairs only: "bert is better"
    x, verdict = j.compare("bert - electra", "bert", "electra").per_task[f"{label}, zero-shot"]
    assert x.diff == pytest.approx(0.71 - 0.67) and x.runs == (2, 2) and verdict == "inconclusive"
    assert x.hi - x.lo > 3 * (pooled.hi - pooled.lo)


def test_a_claims_tasks_are_those_its_own_variants_learn_whatever_else_the_study_ran():
    """bert and electra learn CoLA (0.10, 0.08 against fresh weights' 0.0); four generator widths sit
    below fresh weights (-0.10). Pooled over the whole study CoLA would carry no signal and claim 5a no
    task; pooled over each claim's own variants, 5a keeps CoLA (and reads as it does in a study without
    the widths), claim 6 has none and says so without a number."""
    from encoderlab.study.config import ClaimRoles

    rng = np.random.default_rng(1)
    sizes = {"1/8": "g8", "1/4": "g4", "1/2": "g2", "1": "g1"}
    v = {"bert": _variant("bert", 0.10, 0.70, rng), "electra": _variant("electra", 0.08, 0.70, rng)}
    widths = {n: _variant(n, -0.10, 0.70, rng) for n in [*sizes.values(), "albert"]}
    for r, size in ((v["bert"], 2.0), (widths["albert"], 1.0)):  # claim 1 reads them
        r.measure.params_encoder, r.measure.checkpoint_mb = size, size
    controls = {"variant": "bert", "tasks": {"cola": _ft(0.0, rng), "mrpc": _ft(0.70, rng)}}
    assert task_signal(v | widths, controls)["cola"][0] is False  # the whole study pooled
    roles = ClaimRoles(generator_sizes=sizes)
    alone = {str(c.claim): c for c in evaluate_claims(v, roles, controls=controls)}
    claims = {str(c.claim): c for c in evaluate_claims(v | widths, roles, controls=controls)}
    five = claims["5a"]
    assert {t: ok for t, (ok, _) in five.signal.items()} == {"cola": True, "mrpc": False}
    assert five.verdict == alone["5a"].verdict == "does not hold"
    assert five.numbers["electra - bert"] == pytest.approx(alone["5a"].numbers["electra - bert"]) == pytest.approx(
        -0.02, abs=0.005)
    six = claims["6"]
    # its tasks carry no transfer: not testable (kept apart from a testable claim left undecided)
    assert not any(ok for ok, _ in six.signal.values()) and six.verdict == "not testable at this budget"
    assert all(x.estimate is None for x in six.comparisons) and six.numbers["generator 1/4"] is None
    assert six.to_json()["signal"]["cola"]["signal"] is False
    four = claims["4"]  # bert (0.10) and albert (-0.10) pooled: no task either
    assert four.verdict == "not testable at this budget" and four.numbers["albert - bert"] is None
    from encoderlab.study.report import _against_control, _claims_section

    text = "\n".join(_claims_section(list(claims.values()), _against_control(v | widths, controls)))
    assert text.count("In its aggregates: cola; no signal for these variants: mrpc*") == 1  # 5a (5b: no 1/4 run)
    assert "In its aggregates: no task; no signal for these variants: cola, mrpc*" in text  # claim 6
    assert "| variant | cola | mrpc |" in text and "| g8 | -0." in text


def test_choosing_a_claims_tasks_by_its_variants_pooled_mean_keeps_false_holds_at_the_nominal_rate():
    """bert and electra do not differ; pretraining's gain over the control on CoLA is set so that
    about two studies in three let CoLA in. Among the studies that do, "ELECTRA beats BERT" holds at
    about the nominal 2.5% (one side of the 95% interval) or less: the equal-weight mean that selects the
    task is orthogonal to the difference the claim tests (3 pretraining runs, 5 shared fine-tuning
    seeds). In 4,000 such studies (docs/studies.md) a false verdict either way: 2.3% among those that
    let the task in, 1.9% among the others."""
    from encoderlab.study.results import Replica

    rng = np.random.default_rng(7)

    def ft(per_seed):
        per_seed = [float(x) for x in per_seed]
        return {"score": {"median": float(np.median(per_seed)), "std": float(np.std(per_seed)), "n": 5},
                "per_seed": per_seed}

    def variant(name, seed_fx):
        runs = [0.012 + rng.normal(0, 0.01) + seed_fx + rng.normal(0, 0.01, 5) for _ in range(3)]
        r = _variant(name, 0.0, 0.0, rng)
        r.finetune = {FinetuneKey("cola", 1.0): ft(runs[0])}
        r.replicas = [Replica(seed=k, run_dir="", finetune={FinetuneKey("cola", 1.0): ft(x)})
                      for k, x in enumerate(runs[1:], 1)]
        return r

    entered = holds = 0
    for _ in range(300):
        seed_fx = rng.normal(0, 0.02, 5)  # a fine-tuning seed's head init and order, shared by every model
        v = {n: variant(n, seed_fx) for n in ("bert", "electra")}
        controls = {"variant": "bert", "tasks": {"cola": ft(seed_fx + rng.normal(0, 0.01, 5))}}
        five = {str(c.claim): c for c in evaluate_claims(v, controls=controls)}["5a"]
        if five.signal["cola"][0]:
            entered += 1
            holds += five.verdict == "holds"
    assert 0.25 <= entered / 300 <= 0.85, entered  # the selection is a live one
    assert holds / entered <= 0.06, (holds, entered)


def test_each_architecture_has_its_own_random_init_control(stand_in_store):
    """The built-in study's variants fine-tune six architectures: ALBERT (shared, factorized), ELECTRA's
    discriminator (no pooler), the two 256-wide ones and bert-modern each get a control of their own;
    variants of one architecture share one (bert-sop's encoder is BERT's, gpt-bert's too)."""
    from pathlib import Path

    from encoderlab.study.cli import load_study
    from encoderlab.study.plan import plan
    from encoderlab.study.runner import _models, control_shapes

    cfg = load_study("claims")
    of = control_shapes(cfg, _models(cfg, plan(cfg, stand_in_store.data, Path(cfg.out_dir))))
    groups: dict[str, set] = {}
    for variant, shape in of.items():
        groups.setdefault(shape, set()).add(variant)
    assert set(groups) == {"bert", "albert", "electra", "bert-w2", "albert-w2", "bert-modern"}
    assert groups["bert"] == {"bert", "bert-nsp", "bert-sop", "bert-proposal", "gpt-bert", "clm-then-mlm", "clm"}
    assert {"electra-gd-1-8", "electra-shared", "all-tokens-mlm-copy"} <= groups["electra"]


def test_a_variant_is_held_against_its_own_architectures_control():
    """albert scores 0.22 on CoLA where fresh ALBERT weights score 0.20 and fresh BERT weights 0.0:
    against its own architecture's control it carries no signal; bert (0.25 against 0.0) does."""
    rng = np.random.default_rng(3)
    v = {"bert": _variant("bert", 0.25, 0.70, rng), "albert": _variant("albert", 0.22, 0.70, rng)}
    controls = {"variant": "bert", "tasks": {"cola": _ft(0.0, rng), "mrpc": _ft(0.70, rng)},
                "shapes": {"albert": {"tasks": {"cola": _ft(0.20, rng), "mrpc": _ft(0.70, rng)}}},
                "of": {"albert": "albert"}}
    alone = {n: task_signal(v, controls, names=(n,))["cola"] for n in v}
    assert alone["bert"][0] and alone["bert"][1].diff == pytest.approx(0.25, abs=0.01)
    assert alone["albert"][1].diff == pytest.approx(0.02, abs=0.01)
    both = task_signal(v, controls)["cola"][1]  # each against its own, pooled
    assert both.diff == pytest.approx((0.25 + 0.02) / 2, abs=0.01)
    from encoderlab.study.report import _task_table

    text = "\n".join(_task_table(v, {}, controls))
    assert "| random init (bert's architecture, no pretraining) |" in text
    assert "| random init (albert's architecture, no pretraining) | 0.2" in text


def test_the_blimp_screen_reads_every_pretraining_run_not_only_the_first():
    """A variant's first run at 0.60 and its other two at 0.40 sit at 0.467 on average: no signal
    against a control at 0.50, though the first run alone would clear it (the screen read only that
    run until 2026-12-07)."""
    from encoderlab.study.results import Replica

    label, n = "BLiMP dev (36 of 67 paradigms)", 2000

    def record(k):
        return {"1": {"label": label, "n": n, "deployed": "mlm",
                      "networks": {"mlm": {"accuracy": k / n, "correct": "1" * k + "0" * (n - k)}}}}

    rng = np.random.default_rng(0)
    v = _variant("bert", 0.25, 0.68, rng)
    v.measure.blimp = record(1200)
    controls = {"tasks": {}, "blimp": record(1000)["1"]}
    assert task_signal({"bert": v}, controls)[label][0] is True  # one run: 0.60 against 0.50
    v.replicas = [Replica(seed=s, run_dir="", measure=Measure(blimp=record(800))) for s in (1, 2)]
    ok, e = task_signal({"bert": v}, controls)[label]
    assert not ok and e.diff == pytest.approx(1200 / 2000 / 3 + 2 * 800 / 2000 / 3 - 0.5)
