"""Names are checked before compute: a misspelled study variant or role stops the study at load time
with the closest name (issue 34: a variant ``albret`` trained in full, then claims 1-4 came out
"not run" with no reason), and an unknown config key anywhere suggests the key it is closest to."""

from __future__ import annotations

import pytest

from encoderlab.config import ConfigError
from encoderlab.study.config import StudyConfig
from encoderlab.train.config import PretrainConfig

BERT = {"name": "bert", "model": {"preset": "bert-tiny"}, "objective": {"kind": "mlm", "sentence_loss": False}}
ALBERT = {"name": "albert", "model": {"preset": "albert-tiny"}, "objective": {"kind": "mlm", "sentence_loss": False}}


def _study(*variants, **more) -> StudyConfig:
    return StudyConfig.from_dict({"variants": list(variants), **more})


def test_a_misspelled_variant_stops_the_study_at_load_naming_the_claims_the_role_and_the_fix():
    with pytest.raises(ConfigError) as e:
        _study(BERT, {**ALBERT, "name": "albret"})
    msg = str(e.value)
    assert "claim(s) 1, 2, 3, 4 need a variant 'albert'" in msg  # what it needs
    assert "has 'albret', which plays no role" in msg  # the closest name
    assert "Variants present: ['bert', 'albret']" in msg
    assert "roles:" in msg and "allow_missing_roles: true" in msg  # the two ways out


def test_allow_missing_roles_runs_without_those_claims_and_says_which():
    cfg = _study(BERT, {**ALBERT, "name": "albret"}, allow_missing_roles=True)
    notes = cfg.role_notes()
    assert any("'albert'" in n and "'albret'" in n for n in notes)
    assert any(n.startswith("claim 1 will not run: it needs albert = 'albert' (closest variant: 'albret')")
               for n in notes)
    assert any("['albret'] play no role" in n for n in notes)


def test_mapping_the_role_fixes_it_and_a_role_mapped_to_no_variant_is_an_error():
    cfg = _study(BERT, {**ALBERT, "name": "albret"}, roles={"albert": "albret", "width_pairs": [["bert", "albret"]]})
    notes = cfg.role_notes()
    assert not any(n.startswith(("claim 1 ", "claim 2 ", "claim 3 ", "claim 4 ")) for n in notes)
    with pytest.raises(ConfigError, match=r"roles\.nsp names 'bert-nps', which is not a variant \(closest variant: "
                                          r"'bert'\)"):
        _study(BERT, ALBERT, roles={"nsp": "bert-nps"})


def test_a_subset_study_is_fine_and_its_notes_say_why_each_other_claim_will_not_run():
    """The demo runs three variants: no error, a note per claim it cannot run, with the role and name."""
    from encoderlab.study.cli import load_study

    notes = load_study("demo").role_notes()
    assert any(n.startswith("claim 7 will not run: it needs all_tokens_mlm = 'all-tokens-mlm'") for n in notes)
    assert not any(n.startswith(("claim 1 ", "claim 5 ", "claim 8 ")) for n in notes)  # bert, albert, electra: run
    assert load_study("claims").role_notes() == []  # the built-in claims study runs every claim
    assert StudyConfig.from_dict({"roles": {"bert": "x"}}).role_notes() == []  # a fragment with no variants


def test_near_names_are_typos_and_far_ones_are_not():
    from encoderlab.study.roles import _near

    assert _near("albert", "albret") and _near("bert", "bret") and _near("electra-gen-1-8", "electra-gen-1-4")
    assert not _near("electra-gdes", "electra-two-stage") and not _near("bert", "v")


@pytest.mark.parametrize("override, hint", [
    ("trainer.max_step=3", "'max_step': did you mean 'max_steps'?"),
    ("traner.max_steps=3", "'traner': did you mean 'trainer'?"),
    ("optimizer.warmup=3", "'warmup': did you mean 'warmup_steps'?"),
])
def test_unknown_keys_anywhere_suggest_the_closest_key(override, hint):
    with pytest.raises(ConfigError) as e:
        PretrainConfig().with_overrides([override])
    assert hint in str(e.value) and "valid keys" in str(e.value)


def test_unknown_study_and_task_keys_suggest_too(tmp_path):
    from encoderlab.eval.tasks import TaskSpec

    with pytest.raises(ConfigError, match="'budget_flop': did you mean 'budget_flops'"):
        StudyConfig.from_dict({"budget_flop": 1e12})
    with pytest.raises(ConfigError, match="'lable': did you mean 'label'"):
        TaskSpec.from_dict({"name": "t", "text_a": "text", "lable": "y"})
