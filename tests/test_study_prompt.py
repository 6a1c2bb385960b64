"""The study's prompting probe (study/prompt.py, claim 17) on tiny checkpoints and a toy task: it writes
the shape claims_arms reads (an MLM variant by its MLM, an ELECTRA pair by its discriminator, a causal-only
variant left out), every run of every variant sees the same few-shot draws, its stages resume, claim 17
then gives a verdict, and a prompt task without a pattern stops the study as it loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from eval_helpers import one_thread, tiny_checkpoint, write_sentiment_task  # noqa: F401

from encoderlab.config import ConfigError
from encoderlab.eval import prompting
from encoderlab.eval.config import PromptConfig
from encoderlab.eval.tasks import get_task
from encoderlab.study import prompt as probe
from encoderlab.study.claims_arms import discriminator_prompting, prompt_scores
from encoderlab.study.cli import load_study
from encoderlab.study.config import ClaimRoles, StudyConfig, default_base
from encoderlab.study.executor import LocalExecutor
from encoderlab.study.inputs import check_task_files
from encoderlab.study.judge import Judge
from encoderlab.study.plan import run_name
from encoderlab.study.progress import Progress
from encoderlab.study.results import Checkpoint, Replica, VariantResult
from encoderlab.study.stages import Stages

ROOT = Path(__file__).resolve().parents[1]
SHOTS, SEEDS = (0, 4), 2
VARIANTS = [{"name": "bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm"}},
            {"name": "electra", "model": {"preset": "electra-tiny"}, "objective": {"kind": "rtd"}},
            {"name": "clm", "model": {"preset": "bert-tiny"}, "objective": {"kind": "clm"}}]


def _study(tmp: Path, task: str, **more) -> StudyConfig:
    return StudyConfig.from_dict({"out_dir": str(tmp / "study"), "variants": VARIANTS, "pretrain_seeds": 2,
                                  "allow_missing_roles": True, "prompt_tasks": [task], "prompt_shots": list(SHOTS),
                                  "prompt_seeds": SEEDS, "prompt": {"steps": 3, "learning_rate": 1e-3,
                                                                    "batch_size": 4, "precision": "fp32"}, **more})


def _results(tmp: Path) -> dict[str, VariantResult]:
    """Each variant with two pretraining runs: two tiny checkpoints of its kind (clm: an MLM's)."""
    heads = {"bert": ("bert", "mlm"), "electra": ("electra", "electra"), "clm": ("bert", "mlm")}
    out = {}
    for name, (family, head) in heads.items():
        ck = [Checkpoint(str(tiny_checkpoint(tmp / run_name(name, s), family, head)), 10, 1.0, 1.0) for s in (0, 1)]
        out[name] = VariantResult(name=name, spec={}, run_dir=str(tmp / name), checkpoints={1.0: ck[0]},
                                  replicas=[Replica(seed=1, run_dir=str(tmp / f"{name}@seed1"),
                                                    checkpoints={1.0: ck[1]})])
    return out


def _run(cfg: StudyConfig, variants: dict, tmp: Path, stages: Stages) -> None:
    recipes = {run_name(v.name, s): default_base().replace(trainer=default_base().trainer.replace(seed=s))
               for v in cfg.variants for s in range(cfg.pretrain_seeds)}
    data = {"tokenizer": str(tmp / run_name("bert", 0) / "tok"), "glue_dir": None, "demo_task": None}
    progress = Progress(probe.prompt_total_weight(cfg), lambda *a: None, heartbeat_s=None)
    began = progress.phase_start
    probe.run_prompting(cfg, recipes, variants, data, stages, progress, LocalExecutor(cfg))
    assert progress.done == pytest.approx(progress.total)
    # prompting is a phase of its own for the ETA's rate (when it has anything to run)
    assert (progress.phase_start > began) == (progress.worked > 0)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The probe run once over the three variants, every few-shot draw recorded: (cfg, variants,
    draws [(seed, example lines)], stages, tmp)."""
    tmp = tmp_path_factory.mktemp("prompt")
    task = str(write_sentiment_task(tmp / "toy", n_train=64, n_dev=24))
    cfg, variants, draws = _study(tmp, task), _results(tmp), []
    draw = prompting.sample_k_shot

    def recorded(examples, k, num_labels, seed):
        shots = draw(examples, k, num_labels, seed)
        draws.append((seed, [e.line for e in shots]))
        return shots

    stages, threads = Stages(tmp / "stages.json"), torch.get_num_threads()
    torch.set_num_threads(1)  # module scope: eval_helpers' one_thread is not set up yet
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(prompting, "sample_k_shot", recorded)
            _run(cfg, variants, tmp, stages)
    finally:
        torch.set_num_threads(threads)
    return cfg, variants, draws, stages, tmp


def test_the_probe_writes_what_claim_17_reads_for_an_mlm_and_an_electra_pair(probed):
    cfg, variants, _, stages, _ = probed
    task = cfg.prompt_tasks[0]
    assert variants["clm"].measure.prompt is None  # causal-only: no network scores the token at [MASK]
    for name, method in (("bert", "mlm"), ("electra", "discriminator")):
        got = variants[name].measure.prompt
        assert set(got) == {task} and set(got[task]) == {"k=0", "k=4"}
        zero, few = got[task]["k=0"], got[task]["k=4"]
        assert zero["method"] == few["method"] == method
        assert [len(r) for r in zero["per_run"]] == [1, 1]  # zero-shot: one deterministic score a run
        assert [len(r) for r in few["per_run"]] == [SEEDS, SEEDS] and few["seeds"] == [0, 1]
        assert all(0 <= a <= 1 for r in zero["per_run"] + few["per_run"] for a in r)
        assert prompt_scores(got, 4, method)[task].shape == (2, SEEDS)  # (P, S) as the claim reads it
        for seed, ck in ((0, variants[name].checkpoints[1.0]), (1, variants[name].replicas[0].checkpoints[1.0])):
            assert f"prompt:{run_name(name, seed)}:{task}:k=0" in stages.data
            # seed 0's run first: its zero-shot score is its own checkpoint's
            direct = prompting.prompt_classify(ck.path, task, cfg.prompt, k=0, log=lambda *a: None)
            assert zero["per_run"][seed] == [direct["summary"]["acc"]["median"]]


def test_the_report_tables_every_prompted_variant_beside_the_majority_class(probed):
    from encoderlab.study.config import task_label
    from encoderlab.study.report import _prompt_table

    cfg, variants, _, _, _ = probed
    task = cfg.prompt_tasks[0]
    lines = _prompt_table(variants)
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines if ln.startswith("| ")]
    rows = {c[0]: c[1:] for c in cells}
    assert "clm" not in rows and rows["bert"][0] == "mlm" and rows["electra"][0] == "discriminator"
    label = task_label(task)  # the spec's own name ("toy"), not its path
    assert label == "toy" and lines[2] == f"| variant | prompted through | {label} zero-shot | {label} 4-shot |"
    few = variants["electra"].measure.prompt[task]["k=4"]
    to_3 = 5.1e-4  # printed to 3 decimals
    assert float(rows["electra"][2]) == pytest.approx(float(np.mean(few["per_run"])), abs=to_3)  # runs x draws
    assert rows["majority class"][0] == ""
    assert float(rows["majority class"][2]) == pytest.approx(few["majority"], abs=to_3)


def test_few_shot_draws_are_the_same_for_every_run_of_every_variant(probed):
    _, _, draws, _, _ = probed
    by_seed: dict[int, set] = {}
    for seed, lines in draws:
        by_seed.setdefault(seed, set()).add(tuple(lines))
    # 2 variants x 2 runs drew each seed, and all four drew the same 4 examples per class
    assert sorted(by_seed) == [0, 1] and sum(s == 0 for s, _ in draws) == 4
    assert all(len(d) == 1 and len(next(iter(d))) == 8 for d in by_seed.values())
    assert by_seed[0] != by_seed[1]  # a new seed, a new draw


def test_a_rerun_reads_the_stages_and_redoes_what_changed(probed, monkeypatch):
    cfg, variants, _, stages, tmp = probed
    before = {n: v.measure.prompt for n, v in variants.items() if v.measure.prompt is not None}
    fresh = {n: VariantResult(name=n, spec={}, run_dir=v.run_dir, checkpoints=v.checkpoints, replicas=v.replicas)
             for n, v in variants.items()}
    monkeypatch.setattr(prompting, "prompt_classify", lambda *a, **k: pytest.fail("a finished stage was redone"))
    _run(cfg, fresh, tmp, Stages(stages.path))
    assert {n: v.measure.prompt for n, v in fresh.items() if v.measure.prompt is not None} == before
    changed = cfg.replace(prompt=cfg.prompt.replace(steps=4), prompt_shots=(0,))  # zero-shot trains nothing
    _run(changed, fresh, tmp, Stages(stages.path))
    with pytest.raises(pytest.fail.Exception, match="redone"):  # a few-shot stage's fingerprint changed
        _run(changed.replace(prompt_shots=SHOTS), fresh, tmp, Stages(stages.path))


def test_two_worker_processes_store_what_one_process_does(probed):
    """With two jobs the stages run in spawned workers (as fine-tuning's): the same scores, stage by
    stage, as the in-process run."""
    cfg, variants, _, stages, tmp = probed
    fresh = {n: VariantResult(name=n, spec={}, run_dir=v.run_dir, checkpoints=v.checkpoints, replicas=v.replicas)
             for n, v in variants.items()}
    pooled = Stages(tmp / "pooled.json")
    _run(cfg.replace(pretrain_jobs=2), fresh, tmp, pooled)
    prompt_keys = [k for k in stages.data if k.startswith("prompt:")]
    assert prompt_keys and sorted(prompt_keys) == sorted(k for k in pooled.data if k.startswith("prompt:"))
    assert all(pooled.data[k] == stages.data[k] for k in prompt_keys)
    assert {n: v.measure.prompt for n, v in fresh.items()} == {n: v.measure.prompt for n, v in variants.items()}


def test_claim_17_gives_a_verdict_on_the_probes_results(probed):
    _, variants, _, _, _ = probed
    c = discriminator_prompting(Judge(variants, margin=0.01), ClaimRoles())
    assert c.verdict != "not run"
    assert [x.label.rsplit(", ", 1)[1] for x in c.comparisons] == ["zero-shot", "4-shot"]
    # the toy's dev split: its majority class beside each model's zero-shot accuracy
    row = next(x for n, x in c.numbers.items() if n.endswith("zero-shot: electra / bert / majority class"))
    assert float(row.split(" / ")[2]) == pytest.approx(0.625)
    # a comparison has an estimate exactly when its task carried signal at that k (the note says which not)
    silent = {part.split(", no signal")[0] for part in c.note.split("; ") if ", no signal" in part}
    for cmp in c.comparisons:
        shots = cmp.label.rsplit(", ", 1)[1]  # "zero-shot" or "4-shot", as the note names them
        assert (cmp.estimate is None) == (shots in silent)


@pytest.mark.parametrize("more, match", [
    ({"prompt_tasks": ["wnli"]}, "prompt_tasks: 'wnli' has no prompt template"),
    ({"prompt_tasks": ["stsb"]}, "'stsb' is a regression task"),
    ({"prompt_tasks": ["sst-5"]}, "prompt_tasks: 'sst-5': unknown task"),
    ({"prompt_tasks": ["sst2", "rte"], "prompt": {"template": "{a} [MASK] ."}}, "leave them unset"),
    ({"prompt_tasks": ["sst2"], "prompt_shots": [0, -16]}, "prompt_shots must be"),
    ({"prompt_tasks": ["sst2"], "prompt_seeds": 0}, "prompt_seeds must be >= 1"),
])
def test_a_misconfigured_prompt_probe_stops_the_study_as_it_loads(more, match):
    with pytest.raises(ConfigError, match=match):
        StudyConfig.from_dict({"variants": VARIANTS[:2], "allow_missing_roles": True, **more})


def test_a_prompt_task_whose_files_are_missing_stops_the_study_before_pretraining(tmp_path):
    cfg = StudyConfig.from_dict({"variants": VARIANTS[:2], "allow_missing_roles": True, "prompt_tasks": ["sst2"]})
    with pytest.raises(ConfigError, match="prompt_tasks: 'sst2'"):
        check_task_files(cfg, {"glue_dir": str(tmp_path / "no-glue"), "demo_task": None})


def test_the_prompt_fields_round_trip_and_default_to_off():
    cfg = StudyConfig.from_dict({"variants": VARIANTS[:2], "allow_missing_roles": True, "prompt_tasks": ["sst2", "rte"],
                                 "prompt_shots": [0, 16], "prompt": {"steps": 50}})
    assert StudyConfig.from_dict(cfg.to_dict()) == cfg and cfg.prompt == PromptConfig(steps=50)
    assert StudyConfig().prompt_tasks == () and probe.prompt_total_weight(StudyConfig()) == 0


def test_the_arms_study_prompts_every_task_with_a_pattern_zero_and_few_shot():
    arms = StudyConfig.from_yaml(ROOT / "docs" / "studies" / "claims-arms" / "study.yaml")
    builtin = load_study("claims")
    # every GLUE task of the claims studies with a pattern (stsb is a regression), fine-tuned or not
    assert arms.prompt_tasks == ("sst2", "cola", "mrpc", "rte") and all(get_task(t).template for t in arms.prompt_tasks)
    assert 0 in arms.prompt_shots and max(arms.prompt_shots) > 0
    assert arms.prompt_seeds >= 3
    assert builtin.prompt_tasks == arms.prompt_tasks  # the built-in claims study prompts alike
