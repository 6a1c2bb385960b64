"""docs/studies/claims-arms: issue 36's arms (gpt-bert, clm-then-mlm, clm) beside the built-in claims
study's bert and electra, at its budget, seeds and recipe family. Loaded and planned, never trained."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from encoderlab.study.cli import load_study
from encoderlab.study.config import StudyConfig
from encoderlab.study.plan import _set_only, family_model
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
    arms.role_notes()  # no misspelled or dangling role stops it before compute


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


PART_NAMES = ["claims-arms", "claims-generator", "claims-albert", "claims-sharing", "claims-sentence",
              "claims-ablations", "claims-modern", "claims-width", "claims-blimp", "claims-blimp-albert",
              "claims-blimp-sentence-sharing", "claims-blimp-proposal",
              "claims-blimp-modern", "claims-blimp-generator", "claims-prompt",
              "claims-blimp-ablations", "claims-blimp-arms", "claims-blimp-clm"]
PARTS = sorted(p for p in STUDY.parents[1].glob("*/study.yaml")
               if (yaml.safe_load(p.read_text()) or {}).get("out_dir") == load_study("claims").out_dir)


def test_the_claims_study_is_run_in_parts_that_are_its_own_recipes():
    """Every committed part on the claims study's out_dir (docs/studies/*/study.yaml) copies the built-in
    study's variants and recipe family as they are, so its runs are the built-in study's."""
    claims = load_study("claims")
    theirs = {v.name: v for v in claims.variants}
    assert {p.parent.name for p in PARTS} >= set(PART_NAMES)
    for path in PARTS:
        part = StudyConfig.from_yaml(path)
        assert all(v == theirs[v.name] for v in part.variants), path
        for field in ("base", "budget_flops", "pretrain_seeds", "seeds", "short_seq_fraction", "eval_fractions",
                      "finetune_fractions", "finetune", "vocab_size", "finetune_lrs", "equivalence_margin",
                      "random_control", "tasks", "generation"):
            assert getattr(part, field) == getattr(claims, field), (path, field)
        names = {v.name for v in part.variants}
        assert part.extra_finetune_fractions == {n: f for n, f in claims.extra_finetune_fractions.items() if n in names}
        if part.prompt_tasks:  # a part that prompts does it as the built-in study does
            assert (part.prompt_tasks, part.prompt_shots, part.prompt) == (
                claims.prompt_tasks, claims.prompt_shots, claims.prompt), path
        part.role_notes()


def test_claim_6s_part_varies_the_generators_width_at_the_discriminators_depth():
    part = StudyConfig.from_yaml(STUDY.parents[1] / "claims-generator" / "study.yaml")
    sizes = part.roles.generator_sizes
    assert list(sizes) == ["1/8", "1/4", "1/2", "1"]
    for size, name in sizes.items():
        model = part.variant(name).model
        num, _, den = size.partition("/")
        assert model.generator_layers == part.base.model.num_layers == 4  # the paper's setting: equal depth
        assert model.generator_multiplier == float(num) / float(den or 1)


@pytest.mark.parametrize("part", PART_NAMES)
def test_every_run_of_a_part_is_the_claims_studys_so_its_stages_are_reused(stand_in_store, part):
    from encoderlab.study.plan import plan, recipe_fingerprint

    stand_in_store.vocab_size = 8192
    data = stand_in_store.data
    ours_cfg, claims = StudyConfig.from_yaml(STUDY.parents[1] / part / "study.yaml"), load_study("claims")
    ours = {n: recipe_fingerprint(r) for n, r in plan(ours_cfg, data, Path(ours_cfg.out_dir)).items()}
    theirs = {n: recipe_fingerprint(r) for n, r in plan(claims, data, Path(claims.out_dir)).items()}
    assert len(ours) == 3 * len(ours_cfg.variants) and all(ours[n] == theirs[n] for n in ours)


@pytest.mark.parametrize("part", PART_NAMES)
def test_a_parts_fine_tuning_rates_are_picked_on_the_variants_the_builtin_picks_them_on(stand_in_store, part):
    """A family's rate is picked on its first variant (study/lr.py); a part listing bert-sop (ALBERT's
    family) before albert would pick ALBERT's rates again on another model and overwrite the stages."""
    from encoderlab.study.plan import family_of, plan

    def firsts(cfg):
        recipes = plan(cfg, stand_in_store.data, Path(cfg.out_dir))
        out = {}
        for v in cfg.variants:
            out.setdefault(family_of(cfg, recipes[v.name]), v.name)
        return out

    ours, theirs = firsts(StudyConfig.from_yaml(STUDY.parents[1] / part / "study.yaml")), firsts(load_study("claims"))
    assert all(theirs[family] == first for family, first in ours.items()), (ours, theirs)
