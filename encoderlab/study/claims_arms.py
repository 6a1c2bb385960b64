"""Claims 15-17 (issue 36): the newer objectives as study arms, written as the claims of study/claims.py
are (a function from the variants' results to a Claim) and judged by the same rule: a comparison is
Judge.compare's, or for prompt scores stats.diff_estimate and stats.verdict on (P, S) arrays of
pretraining runs by few-shot seeds, which is what a fine-tuning's scores are.

15: GPT-BERT (kind gptbert) against BERT (kind mlm) as an encoder, a claim of matching (at_least).
16: CLM then MLM (kind clm_then_mlm) against BERT, directional; the clm control beside it.
17: ELECTRA's discriminator against BERT's MLM as a zero-shot prompt learner (eval/prompting.py's
    discriminator and mlm methods), directional; few-shot comparisons beside it. A prompt task enters
    a comparison at k shots only when some prompted variant beats the task's majority class there
    (prompt_signal): between two models that both answer one label, the difference is the labels'
    balance, not prompting.

The arms' variant names are ArmRoles' (docs/studies/claims-arms/study.yaml uses the defaults); bert and
electra are the study's ClaimRoles. verdicts.evaluate_claims runs them after claims 1-14.

Prompt scores (claim 17) are read from ``VariantResult.measure.prompt``: {task: {"k=K": {"method":
"discriminator" | "mlm", "per_run": [[accuracy per few-shot seed] per pretraining run]}}}, seed 0's
run first, k=0 for zero-shot (one score per run: zero-shot is deterministic), as the study's prompt
probe (study/prompt.py, `prompt_tasks`) writes it; without the probe claim 17 is "not run".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from encoderlab.study import stats
from encoderlab.study.claims import NOT_TESTABLE, Claim, diff_of, ran_all, scoped
from encoderlab.study.judge import Comparison, Judge, combined
from encoderlab.study.metrics import EVAL_CLM_ACCURACY, EVAL_MLM_ACCURACY
from encoderlab.study.roles import ARMS, ArmRoles, ClaimRoles

# What each paper reported (read from its abstract; no figure where none was recorded), as
# study/published.py's PUBLISHED gives it for claims 1-14.
PUBLISHED_ARMS: dict[int, str] = {
    15: "GPT-BERT (Charpentier and Samuel, BabyLM 2024, arXiv:2410.24159): hybrid masked + causal pretraining "
        "outperforms masked-only and causal-only models on the BabyLM 2024 evaluations (no figure recorded here)",
    16: "Gisserot-Boukhlef et al. 2025 (arXiv:2507.00994): CLM then MLM achieves the best performance under a fixed "
        "training budget (38 models, 210M-1B parameters, budgets of 12k-42k steps; no figure recorded here)",
    17: "Ni and Kao 2022 (arXiv:2207.08141), zero-shot on 15 tasks: RTD-prompted ELECTRA-large about 8.4 points "
        "above MLM-prompted RoBERTa-large and 13.7 above BERT-large on average, SST-2 90.1% with no training data; "
        "Xia et al. 2022, 'Prompting ELECTRA' (few-shot)",
}




def hybrid_encoder(j: Judge, r: ClaimRoles, arms: ArmRoles = ARMS) -> Claim:
    """GPT-BERT matches or beats BERT fine-tuned as an encoder (within the study's margin). What the
    hybrid adds, next-token prediction with no fine-tuned head, is shown as its held-out next-token
    accuracy beside the clm control's; it does not enter the verdict."""
    g = arms.gpt_bert
    c = Claim(15, "A masked + causal hybrid (GPT-BERT) matches or beats MLM as an encoder at equal FLOPs",
              "not run", compared=[r.bert, g], published=PUBLISHED_ARMS[15])
    if not ran_all(j, r.bert, g):
        return c
    j = scoped(j, c)
    cmp = j.compare(f"{g} - {r.bert}", g, r.bert, kind="at_least")
    c.comparisons = [cmp]
    c.numbers = {"gpt-bert": j.mean(g), "bert": j.mean(r.bert), "gpt-bert - bert": diff_of(cmp)}
    c.numbers.update(_held_out(j, {"gpt-bert": g, "bert": r.bert, "clm": arms.clm}))
    c.numbers.update(_title_f1(j, {"gpt-bert (next-token)": (g, "next"), "bert (UniLM)": (r.bert, "mlm")}))
    c.verdict = cmp.verdict
    c.note = (f"matching = the interval inside ±{j.margin:g}; what the hybrid adds, shown beside the verdict: its "
              "held-out next-token accuracy, and with a generation task its title F1 decoding as the causal LM it "
              "also is (its own head read at the token before) against BERT's UniLM decoding, both fine-tuned "
              "on the task (pretraining seed 0's run; median over fine-tuning seeds)")
    return c


def causal_then_masked(j: Judge, r: ClaimRoles, arms: ArmRoles = ARMS) -> Claim:
    """CLM then MLM beats MLM alone at the same FLOPs budget (directional); causal-only against MLM
    is shown beside it when the clm control ran."""
    ctm = arms.clm_then_mlm
    c = Claim(16, "Causal-then-masked pretraining beats masked-only at a fixed budget", "not run",
              compared=[r.bert, ctm, arms.clm], published=PUBLISHED_ARMS[16])
    if not ran_all(j, r.bert, ctm):
        return c
    j = scoped(j, c)
    cmp = j.compare(f"{ctm} - {r.bert}", ctm, r.bert)
    c.comparisons = [cmp]
    c.numbers = {"clm-then-mlm": j.mean(ctm), "bert": j.mean(r.bert), "clm-then-mlm - bert": diff_of(cmp)}
    c.numbers.update(_held_out(j, {"clm-then-mlm": ctm, "bert": r.bert}))
    share = j.v[ctm].objective().get("causal_fraction")
    c.note = (f"causal for {0.5 if share is None else share:g} of the optimizer steps (the paper's split is by "
              "steps too); at equal FLOPs a causal step costs more than a masked one, so this arm takes fewer steps "
              "than bert")
    if ran_all(j, arms.clm):
        control = j.compare(f"{arms.clm} - {r.bert}", arms.clm, r.bert)
        c.comparisons.append(control)
        c.numbers.update({"clm": j.mean(arms.clm), "clm - bert": diff_of(control)})
        c.note += "; causal only against bert: " + {"holds": "higher", "does not hold": "lower"}.get(
            control.verdict, "within the interval")
    c.verdict = cmp.verdict
    return c


def discriminator_prompting(j: Judge, r: ClaimRoles, arms: ArmRoles = ARMS) -> Claim:
    """ELECTRA's discriminator (scoring each label word as original or replaced) beats BERT's MLM
    (scoring it at [MASK]) zero-shot, over the tasks both were prompted on; the verdict is the
    zero-shot comparison's, few-shot ones (k > 0, seeds paired by draw) are shown beside it."""
    c = Claim(17, "ELECTRA's discriminator is a better zero-shot prompt learner than an MLM of equal compute",
              "not run", compared=[r.bert, r.electra], published=PUBLISHED_ARMS[17])
    if not (r.bert in j.v and r.electra in j.v):
        return c
    e, b = j.v[r.electra].measure.prompt or {}, j.v[r.bert].measure.prompt or {}
    shots = sorted({_k(k) for t in e.values() for k in t} & {_k(k) for t in b.values() for k in t})
    if 0 not in shots:
        return c
    notes = []
    for k in shots:
        signal = prompt_signal(j, k, r)
        a_scores, b_scores = prompt_scores(e, k, "discriminator"), prompt_scores(b, k, "mlm")
        silent = sorted(t for t in set(a_scores) & set(b_scores) if not signal.get(t, (True, ""))[0])
        if k == 0:
            for t in sorted(set(a_scores) & set(b_scores)):
                c.numbers[f"{t} zero-shot: {r.electra} / {r.bert} / majority class"] = signal.get(t, (True, ""))[1]
        if silent:
            notes.append(f"{'zero' if k == 0 else k}-shot, no signal (no prompted variant above the majority "
                         f"class): {', '.join(silent)}")
        a_scores = {t: x for t, x in a_scores.items() if t not in silent}
        b_scores = {t: x for t, x in b_scores.items() if t not in silent}
        est = stats.diff_estimate(a_scores, b_scores)
        label = f"{r.electra} discriminator - {r.bert} MLM, " + ("zero-shot" if k == 0 else f"{k}-shot")
        cmp = Comparison(label, "greater", est, stats.verdict(est, "greater", j.margin))
        if est is not None and est.se == 0:  # one run, one deterministic score a side: no interval to judge by
            cmp.verdict = "inconclusive"
            notes.append(f"{label}: one score a side, no interval")
        c.comparisons.append(cmp)
        for name, scores in (("electra discriminator", a_scores), ("bert MLM", b_scores)):
            if scores:
                c.numbers[f"{name}, k={k}"] = float(np.mean([x.mean() for x in scores.values()]))
    c.verdict = c.comparisons[0].verdict
    if c.comparisons[0].estimate is None and not any(x.estimate for x in c.comparisons):  # no task at any k
        c.verdict = NOT_TESTABLE
    few = [x.verdict for x in c.comparisons[1:]]
    c.note = "; ".join(notes + ([f"few-shot together: {combined(few)}"] if few else []))
    return c


def prompt_signal(j: Judge, k: int, r: ClaimRoles) -> dict[str, tuple[bool, str]]:
    """{task: (signal, "electra / bert / majority" accuracies)} at k shots: a task carries signal when
    the claim's own two variants (electra and bert), pooled with equal weights as the fine-tuning rule
    pools a claim's variants (judge.Judge.among), score above the majority class beyond a 95% t interval
    that holds both the spread over their pretraining runs and the eval split's binomial error
    (sqrt(a (1 - a) / n): the runs share one eval split, so their spread alone would call a label bias
    of one point significant). A task whose records carry no majority class (older stages) enters as
    before. (Until 2026-12-06 the best of every prompted variant in the study decided: a maximum over
    variants the claim does not compare.)"""
    per: dict[str, dict[str, np.ndarray]] = {}
    majority: dict[str, float | None] = {}
    num: dict[str, int] = {}
    for name in (r.electra, r.bert):
        for task, by_k in ((j.v[name].measure.prompt or {}) if name in j.v else {}).items():
            rec = next((x for key, x in by_k.items() if _k(key) == k), None)
            if not rec or not rec.get("per_run"):
                continue
            per.setdefault(task, {})[name] = np.array([np.mean(x) for x in rec["per_run"]])  # (P,) run means
            majority[task] = rec.get("majority")
            num[task] = sum((rec.get("num_eval") or {}).values())
    out = {}
    for task, m in majority.items():
        runs = per[task]
        shown = " / ".join(f"{runs[n].mean():.3f}" if n in runs else "-" for n in (r.electra, r.bert))
        shown += f" / {m:.3f}" if m is not None else " / -"
        if m is None or not num[task]:
            out[task] = (True, shown)
            continue
        a = float(np.mean([x.mean() for x in runs.values()]))
        run_var = sum(x.var(ddof=1) / len(x) for x in runs.values() if len(x) > 1) / len(runs) ** 2
        terms = [(run_var, sum(len(x) - 1 for x in runs.values())), (a * (1 - a) / num[task], num[task] - 1)]
        e = stats.t_estimate(a - m, [(v, df) for v, df in terms if df > 0], (1, 1), 0, False)
        out[task] = (e.lo > 0, shown)
    return out


def prompt_scores(prompt: dict, k: int, method: str) -> dict[str, np.ndarray]:
    """{task: (P, S) accuracies} of one variant's prompt results at k shots by ``method`` (tasks
    prompted another way are left out: a discriminator scored as an MLM is not the claim)."""
    out = {}
    for task, by_k in prompt.items():
        rec = next((x for key, x in by_k.items() if _k(key) == k), None)
        if rec and rec.get("method") == method and rec.get("per_run"):
            runs = rec["per_run"]
            n = min(len(x) for x in runs)
            out[task] = np.array([x[:n] for x in runs], dtype=float)
    return out


def _k(key: str) -> int:
    return int(str(key).removeprefix("k="))


def _held_out(j: Judge, names: dict[str, str]) -> dict[str, float]:
    """Held-out next-token (eval_clm_accuracy) and masked-token (eval_mlm_accuracy) accuracies of the
    variants that have them, at their last evaluation."""
    out = {}
    for label, name in names.items():
        ev = j.v[name].final_eval() if name in j.v else {}
        for key, what in ((EVAL_CLM_ACCURACY, "next-token"), (EVAL_MLM_ACCURACY, "masked-token")):
            if key in ev:
                out[f"{label} {what} accuracy (held-out)"] = ev[key]
    return out


def _title_f1(j: Judge, probes: dict[str, tuple[str, str]]) -> dict[str, float]:
    """Median greedy token F1 of the generation probes (study/probes.py) that ran: {label: (variant, network)}."""
    out = {}
    for label, (name, network) in probes.items():
        g = ((j.v[name].measure.generation or {}) if name in j.v else {}).get(network)
        if g and g["summary"].get("f1"):
            out[f"{label} title F1"] = g["summary"]["f1"]["median"]
    return out


ARM_CLAIMS: list[Callable[[Judge, ClaimRoles], Claim]] = [hybrid_encoder, causal_then_masked, discriminator_prompting]
