"""docs/studies/claims-arms: issue 36's arms (gpt-bert, clm-then-mlm, clm) beside the built-in claims
study's bert and electra, at its budget, seeds and recipe family. Loaded and planned, never trained."""

from __future__ import annotations

from pathlib import Path

from encoderlab.study.cli import load_study
from encoderlab.study.config import StudyConfig
from encoderlab.study.plan import _set_only, family_model
from encoderlab.study.roles import check_roles
from encoderlab.train import PretrainConfig
from encoderlab.train.config import InitConfig
from encoderlab.train.flops import planned_step_flops, steps_for_budget
from encoderlab.train.init import resolve_model

STUDY = Path(__file__).resolve().parents[1] / "docs" / "studies" / "claims-arms" / "study.yaml"


def test_the_arms_study_loads_with_the_claims_studys_recipe_family_budget_and_seeds():
    arms, claims = StudyConfig.from_yaml(STUDY), load_study("claims")
    assert [v.name for v in arms.variants] == ["bert", "electra", "gpt-bert", "clm-then-mlm", "clm"]
    kinds = {v.name: v.objective.kind for v in arms.variants}
    assert kinds == {"bert": "mlm", "electra": "rtd", "gpt-bert": "gptbert", "clm-then-mlm": "clm_then_mlm",
                     "clm": "clm"}
    theirs = {v.name: v for v in claims.variants}
    assert all(v == theirs[v.name] for v in arms.variants)  # the built-in study's, copied as they are
    for field in ("base", "budget_flops", "pretrain_seeds", "seeds", "short_seq_fraction", "eval_fractions",
                  "finetune_fractions", "extra_finetune_fractions", "finetune", "vocab_size", "out_dir",
                  "finetune_lrs", "prompt_tasks", "prompt_shots", "prompt_seeds", "prompt", "tasks"):
        assert getattr(arms, field) == getattr(claims, field), field
    # the tasks that carry signal at this scale (issue 32: MRPC at its majority class, RTE at chance)
    assert [t.name for t in arms.tasks] == ["sst2", "cola", "stsb"]
    assert all(v.model == theirs["bert"].model for v in arms.variants[2:])  # bert's architecture
    check_roles(arms)  # no misspelled or dangling role stops it before compute


def test_at_equal_flops_the_causal_arms_take_fewer_steps():
    """A causal row predicts every next token through the tied head: at the study's FLOPs clm takes the
    fewest steps, gpt-bert and clm-then-mlm (half causal) fewer than bert; each plan spends the budget."""
    arms = load_study("claims")
    B, T = arms.base.data.batch_size, arms.base.data.seq_len
    steps = {}
    for v in [arms.variant(n) for n in ("bert", "gpt-bert", "clm-then-mlm", "clm")]:
        model = resolve_model(family_model(arms.base.model, v.model), InitConfig(), arms.vocab_size)
        steps[v.name] = steps_for_budget(model, v.objective, B, T, arms.budget_flops)
        spent = steps[v.name] * planned_step_flops(model, v.objective, B, T)
        assert arms.budget_flops <= spent < arms.budget_flops + planned_step_flops(model, v.objective, B, T)
    assert steps["clm"] < steps["gpt-bert"] < steps["bert"] and steps["clm"] < steps["clm-then-mlm"] < steps["bert"]


def test_the_causal_fields_leave_other_recipes_fingerprints_unchanged():
    """Unset options are left out of a recipe's fingerprint (study/plan.py): the new fields default
    to None, so the claims study's finished stages stay valid."""
    objective = _set_only(PretrainConfig().to_dict())["objective"]
    assert "causal_fraction" not in objective and "causal_steps" not in objective


def test_every_arms_run_is_the_claims_studys_so_its_stages_are_reused(stand_in_store):
    from encoderlab.study.plan import plan, recipe_fingerprint

    stand_in_store.vocab_size = 8192
    data = stand_in_store.data
    arms, claims = StudyConfig.from_yaml(STUDY), load_study("claims")
    ours = {n: recipe_fingerprint(r) for n, r in plan(arms, data, Path(arms.out_dir)).items()}
    theirs = {n: recipe_fingerprint(r) for n, r in plan(claims, data, Path(claims.out_dir)).items()}
    assert len(ours) == 15 and all(ours[n] == theirs[n] for n in ours)  # five variants, three seeds each
