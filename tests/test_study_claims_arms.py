"""Claims 15-17 (study/claims_arms.py) on synthetic results: each verdict follows the study's rule
(stats.RULE) from the scores given, a claim whose variants are absent is "not run", and each names
its paper's figure."""

from __future__ import annotations

import numpy as np
import pytest

from encoderlab.study.claims_arms import (
    ARM_CLAIMS,
    PUBLISHED_ARMS,
    causal_then_masked,
    discriminator_prompting,
    hybrid_encoder,
    prompt_scores,
)
from encoderlab.study.config import ClaimRoles
from encoderlab.study.judge import Judge
from encoderlab.study.results import Curve, FinetuneKey, Measure, Replica, VariantResult

ROLES = ClaimRoles()
TASKS = ("sst2", "rte")


def _variant(name: str, level: float, *, spread: float = 0.01, runs: int = 3, seeds: int = 5, eval_rec=None,
             prompt=None, objective=None) -> VariantResult:
    """Per task a (runs, seeds) block of scores around ``level``: a fixed pattern, the same for every
    variant (so fine-tuning seeds pair), plus a per-run offset."""
    rng = np.random.default_rng(0)
    pattern = rng.normal(0, spread, (len(TASKS), runs, seeds))

    def ft(t, p):
        s = [float(level + pattern[t, p, i]) for i in range(seeds)]
        return {"score": {"median": float(np.median(s)), "std": float(np.std(s)), "n": seeds}, "per_seed": s}

    fts = [{FinetuneKey(task, 1.0): ft(t, p) for t, task in enumerate(TASKS)} for p in range(runs)]
    return VariantResult(name=name, spec={"objective": objective or {}}, run_dir=f"runs/{name}", finetune=fts[0],
                         curve=Curve(eval=[eval_rec] if eval_rec else []), measure=Measure(prompt=prompt or {}),
                         replicas=[Replica(seed=p, run_dir=f"runs/{name}@seed{p}", finetune=fts[p])
                                   for p in range(1, runs)])


def _judge(**variants) -> Judge:
    return Judge({n.replace("_", "-"): v for n, v in variants.items()}, margin=0.01)


@pytest.mark.parametrize("gap,verdict", [(0.03, "holds"), (0.0, "equivalent within ±0.01"),
                                         (-0.05, "does not hold")])
def test_claim_15_is_a_claim_of_matching_and_shows_what_the_hybrid_adds(gap, verdict):
    v = _judge(bert=_variant("bert", 0.70, spread=0.002, eval_rec={"eval_mlm_accuracy": 0.30}),
               gpt_bert=_variant("gpt-bert", 0.70 + gap, spread=0.002, eval_rec={"eval_mlm_accuracy": 0.28,
                                                                                  "eval_clm_accuracy": 0.21}),
               clm=_variant("clm", 0.6, eval_rec={"eval_clm_accuracy": 0.24}))
    c = hybrid_encoder(v, ROLES)
    assert c.verdict == verdict and c.comparisons[0].kind == "at_least"
    assert c.numbers["gpt-bert - bert"] == pytest.approx(gap, abs=1e-9)
    assert c.numbers["gpt-bert next-token accuracy (held-out)"] == 0.21
    assert c.numbers["clm next-token accuracy (held-out)"] == 0.24
    assert c.published == PUBLISHED_ARMS[15] and "2410.24159" in c.published
    assert not any("title F1" in k for k in c.numbers)  # no generation task: nothing claimed about it


def test_claim_15_shows_the_title_task_f1_of_the_hybrid_decoding_as_a_causal_lm_beside_berts():
    def gen(f1):
        return {"split": "test", "summary": {"f1": {"median": f1, "std": 0.01, "n": 3}}}

    bert, gpt = _variant("bert", 0.70), _variant("gpt-bert", 0.70)
    without = hybrid_encoder(_judge(bert=bert, gpt_bert=gpt), ROLES)
    bert.measure.generation, gpt.measure.generation = {"mlm": gen(0.31)}, {"next": gen(0.27)}
    c = hybrid_encoder(_judge(bert=bert, gpt_bert=gpt), ROLES)
    assert c.numbers["gpt-bert (next-token) title F1"] == 0.27 and c.numbers["bert (UniLM) title F1"] == 0.31
    assert c.verdict == without.verdict  # the title task does not enter the verdict


def test_the_study_runs_the_title_probe_for_gpt_bert_as_a_causal_lm():
    from encoderlab.study.cli import load_study
    from encoderlab.study.probes import generation_settings, planned_probes

    cfg = load_study("claims", ["generation_task=somewhere"])
    assert ("generation", "gpt-bert", "next") in planned_probes(cfg)
    settings, network = generation_settings(cfg, "next")
    assert (settings.decoding, network) == ("next", "mlm") and generation_settings(cfg, "mlm")[0] == cfg.generation


def test_claim_16_is_directional_with_the_causal_only_control_beside_it():
    bert = _variant("bert", 0.70)
    up = _judge(bert=bert, clm_then_mlm=_variant("clm-then-mlm", 0.74, objective={"causal_fraction": 0.25}),
                clm=_variant("clm", 0.60))
    c = causal_then_masked(up, ROLES)
    assert c.verdict == "holds" and [x.label for x in c.comparisons] == ["clm-then-mlm - bert", "clm - bert"]
    assert c.comparisons[1].verdict == "does not hold" and "causal only against bert: lower" in c.note
    assert "0.25 of the optimizer steps" in c.note
    # within the interval: a small gap under large fine-tuning noise is not a verdict either way
    noisy = _judge(bert=_variant("bert", 0.70, spread=0.05), clm_then_mlm=_variant("clm-then-mlm", 0.705, spread=0.05))
    assert causal_then_masked(noisy, ROLES).verdict == "inconclusive"
    assert causal_then_masked(_judge(clm_then_mlm=_variant("clm-then-mlm", 0.7)), ROLES).verdict == "not run"


def _prompt(method: str, zero: list[float], few: list[list[float]] | None = None, majority: float | None = 0.5,
            n: int = 872) -> dict:
    rec = {"k=0": {"method": method, "per_run": [[x] for x in zero], "majority": majority, "num_eval": {"dev": n}}}
    if few:
        rec["k=16"] = {"method": method, "per_run": few, "majority": majority, "num_eval": {"dev": n}}
    return {t: rec for t in TASKS}


def test_claim_17_compares_zero_shot_prompting_over_pretraining_runs():
    electra = _variant("electra", 0.7, prompt=_prompt("discriminator", [0.71, 0.69, 0.73],
                                                      [[0.75, 0.77], [0.74, 0.78], [0.76, 0.76]]))
    bert = _variant("bert", 0.7, prompt=_prompt("mlm", [0.55, 0.57, 0.52], [[0.60, 0.62], [0.61, 0.59], [0.6, 0.6]]))
    c = discriminator_prompting(_judge(bert=bert, electra=electra), ROLES)
    assert c.verdict == "holds" and len(c.comparisons) == 2
    assert c.comparisons[0].label.endswith("zero-shot") and c.comparisons[0].estimate.runs == (3, 3)
    assert c.numbers["electra discriminator, k=0"] == pytest.approx(0.71)
    assert "few-shot together: holds" in c.note and "8.4" in c.published
    # one pretraining run: one deterministic zero-shot score a side, no interval, no verdict
    one = _judge(bert=_variant("bert", 0.7, prompt=_prompt("mlm", [0.5])),
                 electra=_variant("electra", 0.7, prompt=_prompt("discriminator", [0.6])))
    c = discriminator_prompting(one, ROLES)
    assert c.verdict == "inconclusive" and "no interval" in c.note
    # no prompt stage has run: not run; a discriminator scored as an MLM is not the claim
    assert discriminator_prompting(_judge(bert=_variant("bert", 0.7), electra=_variant("electra", 0.7)),
                                   ROLES).verdict == "not run"
    assert prompt_scores(_prompt("mlm", [0.5]), 0, "discriminator") == {}


def test_claim_17_leaves_out_tasks_where_no_prompted_variant_beats_the_majority_class():
    """Both models near one label's share: no signal, so no comparison, however steady the runs are
    (their spread alone would call a one-point label bias significant; the eval split's binomial
    error at n = 872 is ~1.7 points). One model clearly above the majority: the task enters."""
    steady = dict(majority=0.509, n=872)
    at_majority = _judge(bert=_variant("bert", 0.7, prompt=_prompt("mlm", [0.520, 0.521, 0.519], **steady)),
                         electra=_variant("electra", 0.7, prompt=_prompt("discriminator", [0.491] * 3, **steady)))
    c = discriminator_prompting(at_majority, ROLES)  # no task at any shot count: not testable, not undecided
    assert c.verdict == "not testable at this budget" and c.comparisons[0].estimate is None
    assert "zero-shot, no signal" in c.note and all(t in c.note for t in TASKS)
    assert c.numbers[f"{TASKS[0]} zero-shot: electra / bert / majority class"] == "0.491 / 0.520 / 0.509"
    above = _judge(bert=_variant("bert", 0.7, prompt=_prompt("mlm", [0.62, 0.61, 0.63], **steady)),
                   electra=_variant("electra", 0.7, prompt=_prompt("discriminator", [0.491] * 3, **steady)))
    c = discriminator_prompting(above, ROLES)
    assert c.verdict == "does not hold" and "no signal" not in c.note
    # a variant the claim does not compare, however good a prompt learner, does not let a task in
    other = _variant("gpt-bert", 0.7, prompt=_prompt("mlm", [0.80, 0.81, 0.79], **steady))
    assert discriminator_prompting(_judge(**{"bert": at_majority.v["bert"], "electra": at_majority.v["electra"],
                                             "gpt_bert": other}), ROLES).comparisons[0].estimate is None
    # records without a majority class (stages written before it was kept) enter as before
    old = _judge(bert=_variant("bert", 0.7, prompt=_prompt("mlm", [0.520, 0.521, 0.519], majority=None)),
                 electra=_variant("electra", 0.7, prompt=_prompt("discriminator", [0.491, 0.49, 0.492], majority=None)))
    assert discriminator_prompting(old, ROLES).comparisons[0].estimate is not None


def test_every_arm_claim_is_not_run_without_its_variants_and_numbers_them_15_to_17():
    claims = [f(_judge(bert=_variant("bert", 0.7)), ROLES) for f in ARM_CLAIMS]
    assert [c.claim for c in claims] == [15, 16, 17] and {c.verdict for c in claims} == {"not run"}


def test_registered_beside_claims_1_to_14_they_are_evaluated_with_holm_and_their_figures(monkeypatch):
    """What registering them would do (claims.CLAIMS += ARM_CLAIMS, PUBLISHED.update(PUBLISHED_ARMS)),
    done here on copies: evaluate_claims runs them with the others, Holm's adjustment covers them."""
    from encoderlab.study import claims, published, verdicts

    monkeypatch.setattr(claims, "CLAIMS", claims.CLAIMS + ARM_CLAIMS)
    monkeypatch.setattr(published, "PUBLISHED", {**published.PUBLISHED, **PUBLISHED_ARMS})
    v = {"bert": _variant("bert", 0.70), "clm-then-mlm": _variant("clm-then-mlm", 0.74)}
    out = {c.claim: c for c in verdicts.evaluate_claims(v)}
    assert out[16].verdict == "holds" and out[16].comparisons[0].holm_p is not None
    assert out[16].published == PUBLISHED_ARMS[16] and out[15].verdict == out[17].verdict == "not run"
    # a claim of matching reads its margin: its comparison is outside Holm's family
    v["gpt-bert"] = _variant("gpt-bert", 0.71)
    fifteen = {c.claim: c for c in verdicts.evaluate_claims(v)}[15].comparisons[0]
    assert fifteen.kind == "at_least" and fifteen.estimate is not None and fifteen.holm_p is None
