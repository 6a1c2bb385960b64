"""Which kind of machine each run computed on (issue 32: "record the CPU kind per stage and keep all
seeds of one variant on one kind"): the runs' metrics record it, the study keeps a variant's seeds on
one kind, and the report says where every run and fine-tuning ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from encoderlab.config import ConfigError
from encoderlab.precision import machine_kind
from encoderlab.study.config import StudyConfig
from encoderlab.study.measure import read_metrics
from encoderlab.study.plan import plan, recipe_fingerprint
from encoderlab.study.report import _machines_note
from encoderlab.study.results import Curve, Replica, VariantResult
from encoderlab.study.runner import check_machines
from encoderlab.study.stages import StageKey, Stages

HERE = machine_kind("cpu")
ZEN4 = {"cpu": "AMD EPYC", "capability": "AVX512"}
XEON = "Intel(R) Xeon(R) Platinum 8488C / AVX512"


def write_metrics(path: Path, *records: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_machine_kind_names_the_cpu_and_the_kernels_torch_dispatches_to():
    assert HERE.endswith(f" / {torch.backends.cpu.get_cpu_capability()}") and len(HERE) > 8


def test_a_runs_machines_are_read_from_its_run_records_old_and_new(tmp_path):
    """Records written before the field carry the kind in their precision probe; a resume on the same
    machine adds nothing; one on another kind, or in another precision, starts a segment."""
    path = write_metrics(
        tmp_path / "metrics.jsonl",
        {"split": "run", "step": 0, "precision": "bf16", "probe": ZEN4},  # before the field
        {"split": "train", "step": 10, "loss": 5.0},
        {"split": "run", "step": 10, "machine": "AMD EPYC / AVX512", "precision": "bf16"},  # resumed here
        {"split": "run", "step": 15, "threads": 2},  # not a restart: the run took up freed cores
        {"split": "run", "step": 20, "machine": XEON, "precision": "bf16"},  # resumed on another kind
        {"split": "run", "step": 30, "machine": XEON, "precision": "fp32"},  # and in another precision
        {"split": "run", "step": 40, "precision": "fp32"},  # no probe: fp32 was asked for
    )
    curve = read_metrics(path)
    assert curve.machines == [{"step": 0, "machine": "AMD EPYC / AVX512", "precision": "bf16"},
                              {"step": 20, "machine": XEON, "precision": "bf16"},
                              {"step": 30, "machine": XEON, "precision": "fp32"},
                              {"step": 40, "machine": "not recorded", "precision": "fp32"}]
    assert curve.machine_kinds() == ["AMD EPYC / AVX512", XEON, "not recorded"]
    assert Curve.from_json(curve.to_json()) == curve
    assert "machines" not in Curve(train=[{"step": 1}]).to_json()  # reports written before stay as they were


def study(tmp_path: Path, **kw) -> StudyConfig:
    return StudyConfig.from_dict({
        "out_dir": str(tmp_path / "study"), "pretrain_seeds": 2, "allow_missing_roles": True, **kw,
        "variants": [{"name": "bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm"}},
                     {"name": "albert", "model": {"preset": "albert-tiny"}, "objective": {"kind": "mlm"}}]})


def test_a_variant_whose_runs_computed_elsewhere_is_not_pretrained_here(tmp_path, stand_in_store):
    cfg = study(tmp_path)
    recipes = plan(cfg, stand_in_store.data, Path(cfg.out_dir))
    stages = Stages(tmp_path / "stages.json")
    check_machines(cfg, recipes, stages)  # nothing ran yet
    # albert's seed-0 run finished on another kind; its seed 1 would run here
    write_metrics(Path(recipes["albert"].trainer.run_dir) / "metrics.jsonl",
                  {"split": "run", "step": 0, "machine": XEON, "precision": "bf16"})
    stages.put(StageKey.pretrain("albert"), recipe_fingerprint(recipes["albert"]), {"wall_s": 1.0})
    with pytest.raises(ConfigError) as e:
        check_machines(cfg, recipes, stages)
    msg = str(e.value)
    assert "'albert'" in msg and XEON in msg and "albert@seed1" in msg and HERE in msg and "mixed_machines" in msg
    check_machines(cfg.replace(mixed_machines=True), recipes, stages)  # asked for
    # once every run of it is done nothing more would run here: the report names the mix instead
    stages.put(StageKey.pretrain("albert@seed1"), recipe_fingerprint(recipes["albert@seed1"]), {"wall_s": 1.0})
    check_machines(cfg, recipes, stages)


def test_a_run_begun_elsewhere_is_not_resumed_here(tmp_path, stand_in_store):
    cfg = study(tmp_path)
    recipes = plan(cfg, stand_in_store.data, Path(cfg.out_dir))
    write_metrics(Path(recipes["bert@seed1"].trainer.run_dir) / "metrics.jsonl",
                  {"split": "run", "step": 0, "machine": XEON, "precision": "bf16"})  # stopped part-way
    with pytest.raises(ConfigError, match="bert@seed1"):
        check_machines(cfg, recipes, Stages(tmp_path / "stages.json"))
    # a run whose records name this machine (or none) is no obstacle
    write_metrics(Path(recipes["bert@seed1"].trainer.run_dir) / "metrics.jsonl",
                  {"split": "run", "step": 0, "machine": HERE, "precision": "bf16"},
                  {"split": "run", "step": 5, "precision": "fp32"})
    check_machines(cfg, recipes, Stages(tmp_path / "stages.json"))


def variant(name: str, *kinds: str, tuned: str | None = None) -> VariantResult:
    curves = [Curve(machines=[{"step": 0, "machine": k, "precision": "bf16"}]) for k in kinds]
    ft = {} if tuned is None else {"k": {"score": {}, "machine": tuned}}
    return VariantResult(name=name, spec={}, run_dir=name, curve=curves[0], finetune=ft,
                         replicas=[Replica(seed=i + 1, run_dir=name, curve=c) for i, c in enumerate(curves[1:])])


def test_the_report_says_where_the_runs_computed_and_names_a_mix():
    one = "AMD EPYC / AVX512"
    note = _machines_note({"bert": variant("bert", one, one, tuned=one), "albert": variant("albert", one, one)})
    assert note == f"Machines: every pretraining run on {one}. Fine-tuning on {one}."
    note = _machines_note({"bert": variant("bert", one, one), "albert": variant("albert", one, XEON)})
    assert f"albert {one} + {XEON}" in note and "more than one kind of machine: albert**" in note
    assert "also compares the machines" in note
    note = _machines_note({"bert": variant("bert", one, one), "albert": variant("albert", XEON, XEON)})
    assert "more than one kind" not in note and f"albert {XEON}" in note and "also compares the machines" in note
    assert _machines_note({"bert": VariantResult(name="bert", spec={}, run_dir="b")}).startswith(
        "Machines: not recorded")
