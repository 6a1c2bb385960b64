"""Pretraining seeds as the unit of replication: a study with pretrain_seeds = N plans N runs per
variant (seed 0's recipe, name and fingerprint exactly those of a one-seed study, so committed
studies keep their stages), each with its own trainer.seed, fine-tuned as its own stages; the results
carry every run's per-seed scores; and fine-tuning seed s gives every same-shaped classifier the
same head and example order, which is what pairs the comparisons."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from encoderlab.config import ConfigError
from encoderlab.study.config import StudyConfig
from encoderlab.study.results import Checkpoint, FinetuneKey, Replica, StudyResults, VariantResult

STUDY = {"name": "s", "vocab_size": 600, "budget_flops": 2e9,
         "base": {"data": {"seq_len": 32, "batch_size": 8, "eval_batches": 2}, "trainer": {"seed": 7}},
         "eval_fractions": [0.5, 1.0], "finetune_fractions": [1.0], "seeds": 2,
         "variants": [{"name": "bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm"}},
                      {"name": "electra", "model": {"preset": "electra-tiny"}, "objective": {"kind": "rtd"}}],
         "tasks": [{"name": "sst2"}]}


@pytest.fixture
def data(stand_in_store):
    stand_in_store.vocab_size = 600
    return stand_in_store.data


def test_each_variant_is_pretrained_from_every_seed_and_seed_zero_keeps_its_recipe(data):
    from encoderlab.study.plan import finetune_units, plan, recipe_fingerprint

    one = plan(StudyConfig.from_dict(STUDY), data, Path("out"))
    cfg = StudyConfig.from_dict({**STUDY, "pretrain_seeds": 3})
    three = plan(cfg, data, Path("out"))
    assert list(three) == ["bert", "bert@seed1", "bert@seed2", "electra", "electra@seed1", "electra@seed2"]
    assert {n: recipe_fingerprint(r) for n, r in one.items()} == {
        n: recipe_fingerprint(three[n]) for n in ("bert", "electra")}
    assert [three[f"bert{s}"].trainer.seed for s in ("", "@seed1", "@seed2")] == [7, 8, 9]
    assert three["bert@seed2"].trainer.run_dir == str(Path("out/runs/bert@seed2"))
    # the runs differ in nothing but seed and folder
    strip = [r.replace(trainer=r.trainer.replace(seed=0, run_dir="x")).to_dict() for r in three.values()
             if r.model.preset == "bert-tiny"]
    assert strip[0] == strip[1] == strip[2]
    cks = {1.0: Checkpoint("ck", 1, 1.0, 1.0)}
    u0 = finetune_units(cfg, cfg.variants[0], three["bert"], cks)[0]
    u2 = finetune_units(cfg, cfg.variants[0], three["bert@seed2"], cks, "bert@seed2")[0]
    assert u0.stage == "finetune:bert:1.0:sst2" and u2.stage == "finetune:bert@seed2:1.0:sst2"
    assert u0.fingerprint == finetune_units(StudyConfig.from_dict(STUDY), cfg.variants[0], one["bert"],
                                            cks)[0].fingerprint
    with pytest.raises(ConfigError, match="pretrain_seeds"):
        StudyConfig.from_dict({**STUDY, "pretrain_seeds": 0})
    clash = {**STUDY, "pretrain_seeds": 2, "variants": [*STUDY["variants"], {**STUDY["variants"][0],
                                                                              "name": "bert@seed1"}]}
    with pytest.raises(ConfigError, match="bert@seed1"):
        plan(StudyConfig.from_dict(clash), data, Path("out"))


def _ft(scores):
    return {"score": {"median": float(np.median(scores)), "std": float(np.std(scores)), "n": len(scores)},
            "per_seed": scores}


def test_results_carry_every_pretraining_runs_scores_and_round_trip():
    k = FinetuneKey("sst2", 1.0)
    v = VariantResult(name="bert", spec={}, run_dir="runs/bert", finetune={k: _ft([0.6, 0.7])},
                      checkpoints={1.0: Checkpoint("ck", 1, 1.0, 1.0)},
                      replicas=[Replica(seed=1, run_dir="runs/bert@seed1", finetune={k: _ft([0.5, 0.55])},
                                        checkpoints={1.0: Checkpoint("ck1", 1, 1.0, 1.0)})])
    got = v.seed_scores()
    assert list(got) == ["sst2"] and got["sst2"].tolist() == [[0.6, 0.7], [0.5, 0.55]]
    r = StudyResults(config={}, data={}, variants={"bert": v})
    again = StudyResults.from_json(json.loads(json.dumps(r.to_json())))
    assert again.to_json() == r.to_json() and again.variants["bert"].replicas[0].seed == 1
    # a variant with one run writes no replicas key: committed report.json files stay as they are
    assert "replicas" not in VariantResult(name="x", spec={}, run_dir="").to_json()


def test_a_fine_tuning_seed_gives_same_shaped_classifiers_the_same_head_and_example_order():
    """eval/finetune.py seeds the classifier's construction (torch.manual_seed(seed) before
    build_classifier) and the batch order (np.random.default_rng(seed)) from the seed alone: two
    different pretrained encoders of one shape get identical heads and batches."""
    import torch

    from encoderlab.eval.common import length_batches
    from encoderlab.eval.finetune import build_classifier
    from encoderlab.models.build import build_model
    from encoderlab.models.presets import preset

    torch.manual_seed(1)
    a = build_model(preset("bert-tiny"))
    torch.manual_seed(2)
    b = build_model(preset("bert-tiny"))
    assert not torch.equal(next(a.parameters()), next(b.parameters()))
    heads = []
    for m in (a, b):
        torch.manual_seed(3)
        clf = build_classifier(m, 2)
        heads.append({k: x for k, x in clf.state_dict().items() if not k.startswith("encoder.")})
    assert heads[0].keys() and all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])
    lengths = [5, 9, 3, 12, 7, 7, 2, 30] * 4
    order = [[list(i) for i in length_batches(lengths, 4, np.random.default_rng(3), True)] for _ in range(2)]
    assert order[0] == order[1]



def test_learning_rates_are_chosen_per_family_on_held_out_training_data(data, monkeypatch, tmp_path):
    """study/lr.py: each family's first variant is scored at every candidate rate on a held-out fifth of
    the training set (never dev), each a stage; the best rate is every variant of the family's, and it
    enters the fine-tunings' fingerprints only when chosen (a study without finetune_lrs keeps its stages)."""
    from encoderlab.study import lr as lrmod
    from encoderlab.study import runs
    from encoderlab.study.plan import finetune_units, plan
    from encoderlab.study.stages import Stages

    rest, held = lrmod.heldout_split(list(range(100)))
    assert len(held) == 20 and sorted(rest + held) == list(range(100)) and held == lrmod.heldout_split(
        list(range(100)))[1]
    cfg = StudyConfig.from_dict({**STUDY, "finetune_lrs": [1e-3, 3e-4],
                                 "variants": [*STUDY["variants"], {**STUDY["variants"][0], "name": "bert2"}]})
    recipes = plan(cfg, data, tmp_path)
    monkeypatch.setattr(runs, "checkpoints", lambda stages, name, *a: {1.0: Checkpoint(f"ck-{name}", 1, 1.0, 1.0)})
    monkeypatch.chdir(tmp_path)  # the stand-in checkpoints are here (a stage checks its weights are)
    for name in ("bert", "bert2", "electra"):
        Path(f"ck-{name}").mkdir()
    calls = []

    def fake(ck, task, cfg, data, lr):
        calls.append((ck, lr))
        return {1e-3: 0.6, 3e-4: 0.7}[lr] if "bert" in ck else {1e-3: 0.8, 3e-4: 0.5}[lr]

    monkeypatch.setattr(lrmod, "heldout_score", fake)

    class Quiet:
        def stage(self, *a):
            pass

    got = lrmod.pick_learning_rates(cfg, recipes, Stages(tmp_path / "stages.json"), data, Quiet())
    assert {f: t["sst2"]["chosen"] for f, t in got.items()} == {"bert-128": 3e-4, "electra-128": 1e-3}
    assert got["bert-128"]["sst2"]["variant"] == "bert" and len(calls) == 4  # bert2 shares bert's family
    lrmod.pick_learning_rates(cfg, recipes, Stages(tmp_path / "stages.json"), data, Quiet())
    assert len(calls) == 4  # stored stages
    cks = {1.0: Checkpoint("ck", 1, 1.0, 1.0)}
    plain = finetune_units(cfg, cfg.variants[0], recipes["bert"], cks)[0]
    chosen = finetune_units(cfg, cfg.variants[0], recipes["bert"], cks, lrs={"sst2": 3e-4})[0]
    assert chosen.learning_rate == 3e-4 and plain.learning_rate is None and chosen.fingerprint != plain.fingerprint
