"""The claims, each a small function from the variants' results to its numbers and a verdict.

A claim reads the variants that play its roles (StudyConfig.roles: the variant names the studies use
by default, a user study's own names where it maps them); a claim whose variants are absent is
reported as "not run". Verdicts: "holds", "does not hold", or "inconclusive" when the difference is
within seed noise (the larger of the two seed standard deviations, and at least half a point).

A quality claim (4-10) also lists the variants it compares, so that evaluate_claims can say which of
them had not left the unigram plateau: its verdict then compares encoders that learned little.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from encoderlab.study.config import ClaimRoles
from encoderlab.study.results import VariantResult

NOISE_FLOOR = 0.005
RULE = ("two scores differ when their medians over the fine-tuning seeds are further apart than the larger "
        "of the two seed standard deviations (and at least 0.5 points); a difference within that is "
        "'inconclusive' (claim 11 counts it as matching). Held-out MLM accuracies (claim 8) have one "
        "evaluation set and no seeds: they differ beyond 0.5 points.")
V = dict[str, VariantResult]


@dataclass
class Claim:
    claim: int
    title: str
    verdict: str  # holds | does not hold | inconclusive | not run
    numbers: dict = field(default_factory=dict)
    note: str = ""
    compared: list[str] = field(default_factory=list)  # the variants whose learning the verdict rests on
    plateau: list[str] = field(default_factory=list)  # of those, the ones still on the unigram plateau

    def to_json(self) -> dict:
        d = asdict(self)
        del d["compared"]
        if self.claim < 4 or self.verdict == "not run":  # plateau is said of run quality claims only
            del d["plateau"]
        return d


def compare(a: dict, b: dict) -> tuple[str, float]:
    """(">", "<" or "~", difference) of a against b, "~" within seed noise."""
    diff = a["median"] - b["median"]
    noise = max(a["std"], b["std"], NOISE_FLOOR)
    return (">" if diff > noise else "<" if diff < -noise else "~"), diff


def _verdict(ok: bool | None) -> str:
    return "inconclusive" if ok is None else "holds" if ok else "does not hold"


def steady_train(res: VariantResult) -> dict:
    """Training tokens/s and peak memory. Tokens/s from the side-by-side measurement when the study
    made one (study/speed.py); otherwise the median over the second half of the pretraining's own
    log, which is only comparable between variants that ran alone on an idle machine, and only at
    the thread count the run started with (a study gives a last running variant the freed cores)."""
    recs = res.curve["train"]
    first = recs[0].get("threads") if recs else None
    at_start = [r for r in recs if r.get("threads") == first]
    tail = at_start[len(at_start) // 2:] or at_start
    tps = (res.speed["tokens_per_s"] if res.speed is not None
           else statistics.median(r["tokens_per_s"] for r in tail) if tail else float("nan"))
    return {"tokens_per_s": tps, "peak_memory_mb": max((r["peak_memory_mb"] for r in recs), default=float("nan"))}


def plateau_accuracy(res: VariantResult) -> float | None:
    """The held-out accuracy that says whether a variant learned from context: that of the MLM which is
    fine-tuned (BERT, ALBERT, Replace-MLM, All-Tokens-MLM) at its masked positions, else an ELECTRA's
    generator's (its discriminator can only learn what the generator's replacements make learnable).
    None for an All-Tokens-MLM run evaluated before its masked-position accuracy was recorded: its
    accuracy over every token counts copies of the input. With the copy mechanism it is the
    softmax's own accuracy there: the mixture's also depends on the copy gate detecting which inputs
    were replaced, a discriminator's task reported apart (copy_probability_replaced), as an
    ELECTRA's plateau is read from its generator and its discriminator's AUC apart."""
    return plateau_metric(res, res.final_eval())


def plateau_metric(res: VariantResult, ev: dict) -> float | None:
    """plateau_accuracy's measure in one held-out evaluation record of ``res`` (any checkpoint's)."""
    objective = res.objective()
    if objective.get("variant") == "all_tokens_mlm":
        if objective.get("copy_mechanism"):
            return ev.get("eval_mlm_masked_softmax_accuracy")
        return ev.get("eval_mlm_masked_accuracy")
    return ev.get("eval_mlm_accuracy", ev.get("eval_gen_accuracy"))


def left_plateau(res: VariantResult, baselines: dict | None) -> bool | None:
    """Whether the held-out accuracy got at least a quarter of the way from the unigram baseline (the
    plateau tiny models sit on first) to the bigram one; None when either is unknown."""
    acc = plateau_accuracy(res)
    if acc is None or not baselines:
        return None
    return acc >= baselines["unigram"] + 0.25 * (baselines["bigram"] - baselines["unigram"])


def _scored(v: V, names: dict[str, str | None]) -> dict[str, dict]:
    """{role: final score} of the roles whose variant ran and was fine-tuned."""
    return {k: v[n].final_score() for k, n in names.items() if n in v and v[n].final_score()}


# ---- the claims ----------------------------------------------------------------------------------
def size(v: V, r: ClaimRoles) -> Claim:
    c = Claim(1, "ALBERT's parameters and checkpoint size are a fraction of BERT's at the same width and depth",
              "not run")
    if r.bert in v and r.albert in v:
        b, a = v[r.bert].measure, v[r.albert].measure
        p, s = a["params_encoder"] / b["params_encoder"], a["checkpoint_mb"] / b["checkpoint_mb"]
        c.verdict = _verdict(p < 0.7 and s < 0.7)
        c.numbers = {"albert/bert params": p, "albert/bert checkpoint size": s, "bert params": b["params_encoder"],
                     "albert params": a["params_encoder"]}
    return c


def latency(v: V, r: ClaimRoles) -> Claim:
    c = Claim(2, "ALBERT's inference is no faster than BERT's at the same spec (sharing saves no computation)",
              "not run", note="holds when no setting is more than 10% faster for ALBERT")
    if r.bert in v and r.albert in v and "latency_ms" in v[r.bert].measure:
        lb, la = v[r.bert].measure["latency_ms"], v[r.albert].measure["latency_ms"]
        ratios = {k: la[k] / lb[k] for k in lb if k in la}
        c.verdict = _verdict(min(ratios.values()) > 0.9)
        c.numbers = {f"albert/bert latency {k}": x for k, x in ratios.items()}
    else:
        c.note = ""
    return c


def training_speed(v: V, r: ClaimRoles) -> Claim:
    c = Claim(3, "ALBERT's training speed and memory gain over BERT is modest and shrinks at small sizes",
              "not run", note="holds when no width gains more than 30% in tokens/s")
    pairs = [(b, a) for b, a in r.width_pairs if b in v and a in v]
    if not pairs:
        c.note = ""
        return c
    gains = []
    for bn, an in pairs:
        tb, ta = steady_train(v[bn]), steady_train(v[an])
        gains.append(ta["tokens_per_s"] / tb["tokens_per_s"] - 1)
        c.numbers[f"{an} speed gain"] = gains[-1]
        c.numbers[f"{an} memory saving"] = 1 - ta["peak_memory_mb"] / tb["peak_memory_mb"]
    c.verdict = _verdict(max(gains) < 0.3)
    return c


def albert_quality(v: V, r: ClaimRoles) -> Claim:
    """ALBERT below BERT at the bert/albert roles' width and at every further width pair the study ran
    (holds when below at each, does not hold when above at any); unsharing is read at the first width."""
    c = Claim(4, "At small sizes ALBERT scores below BERT; unsharing ALBERT and fine-tuning scores higher", "not run",
              compared=[r.bert, r.albert])
    s = _scored(v, {"bert": r.bert, "albert": r.albert})
    if len(s) < 2:
        return c
    a, b = s["albert"], s["bert"]
    c1, d1 = compare(a, b)
    c.numbers = {"albert": a["median"], "bert": b["median"], "albert - bert": d1}
    signs = [c1]
    for bn, an in r.width_pairs:
        w = _scored(v, {"bert": bn, "albert": an}) if (bn, an) != (r.bert, r.albert) else {}
        if len(w) < 2:
            continue
        cw, dw = compare(w["albert"], w["bert"])
        signs.append(cw)
        c.numbers.update({an: w["albert"]["median"], bn: w["bert"]["median"], f"{an} - {bn}": dw})
        c.compared += [bn, an]
    ok = False if ">" in signs else None if "~" in signs else True
    # Each half's own reading goes in the note: a verdict of "inconclusive" may hide one half that holds.
    halves = [f"ALBERT against BERT{f' at {len(signs)} widths' if len(signs) > 1 else ''}: "
              + {True: "below", False: "above at a width", None: "within the noise"}[ok]]
    un = v[r.albert].final_score(unshared=True)
    if un:
        c2, d2 = compare(un, a)
        c.numbers.update({"albert unshared": un["median"], "unshared - shared": d2})
        halves.append("unshared against shared: " + {">": "higher", "<": "lower", "~": "within the noise"}[c2])
        ok = None if (ok is None or c2 == "~") else ok and c2 == ">"
    c.note = "; ".join(halves)
    c.verdict = _verdict(ok)
    return c


def electra_beats_bert(v: V, r: ClaimRoles) -> Claim:
    c = Claim(5, "ELECTRA beats BERT at equal pretraining FLOPs (and needs ~1/4 of BERT's compute to match it)",
              "not run", compared=[r.bert, r.electra])
    s = _scored(v, {"bert": r.bert, "electra": r.electra})
    if len(s) < 2:
        return c
    e, b = s["electra"], s["bert"]
    cmp, d = compare(e, b)
    match = next((f for f in v[r.electra].finetuned_fractions() if (v[r.electra].score_at(f) or -1) >= b["median"]),
                 None)
    c.numbers = {"electra": e["median"], "bert": b["median"], "electra - bert": d,
                 "fraction of the budget at which ELECTRA matches BERT's final score": match}
    c.verdict = _verdict(None if cmp == "~" else cmp == ">")
    fracs = ", ".join(f"{f:g}" for f in v[r.electra].finetuned_fractions())
    if match is None:  # the "1/4 of the compute" half answered: not within this budget
        c.note = f"ELECTRA's median is below BERT's final median at every fine-tuned fraction ({fracs}): " \
                 "no fraction of this budget matched it"
    else:
        c.note = f"the matching fraction is resolved at the fine-tuned fractions only ({fracs})"
    return c


def generator_size(v: V, r: ClaimRoles) -> Claim:
    c = Claim(6, "A generator 1/4-1/2 the discriminator's width is best; one as large as the discriminator hurts",
              "not run", compared=list(r.generator_sizes.values()))
    have = _scored(v, r.generator_sizes)
    if len(have) < 3:
        return c
    best = max(have, key=lambda m: have[m]["median"])
    c.numbers = {f"generator {m}": s["median"] for m, s in have.items()}
    c.numbers["best"] = best
    ok = best in ("1/4", "1/2")
    if "1" in have:
        cmp, _ = compare(have["1"], have[best])
        ok = ok and cmp == "<" if cmp != "~" else (None if ok else False)
    c.verdict = _verdict(ok)
    return c


def all_tokens(v: V, r: ClaimRoles) -> Claim:
    roles = {"bert": r.bert, "electra-15pct": r.electra_15pct, "replace-mlm": r.replace_mlm,
             "all-tokens-mlm": r.all_tokens_mlm, "electra": r.electra}
    c = Claim(7, "Most of ELECTRA's gain over BERT comes from learning from all tokens", "not run",
              compared=list(roles.values()))
    have = _scored(v, roles)
    if not {"bert", "electra", "all-tokens-mlm"} <= set(have):
        return c
    gain = have["electra"]["median"] - have["bert"]["median"]
    share = (have["all-tokens-mlm"]["median"] - have["bert"]["median"]) / gain if gain > NOISE_FLOOR else None
    c.numbers = {k: s["median"] for k, s in have.items()}
    c.numbers["share of ELECTRA's gain recovered by All-Tokens-MLM"] = share
    c.verdict = _verdict(None if share is None else share > 0.5)
    copy = v[r.all_tokens_mlm].objective().get("copy_mechanism")
    ev = v[r.all_tokens_mlm].final_eval()
    for label, key in (("All-Tokens-MLM held-out accuracy at the masked positions", "eval_mlm_masked_accuracy"),
                       ("... its softmax's alone (the copy gate aside)", "eval_mlm_masked_softmax_accuracy"),
                       ("its copy gate's D over every token", "eval_copy_probability"),
                       ("... where the input was replaced (copying is wrong)", "eval_copy_probability_replaced")):
        if key in ev:
            c.numbers[label] = ev[key]
    c.note = ("inconclusive when ELECTRA shows no gain over BERT to explain; All-Tokens-MLM "
              + ("with the paper's copy mechanism" if copy else "without the paper's copy mechanism (not the paper's)"))
    return c


def generator_is_weaker_mlm(v: V, r: ClaimRoles) -> Claim:
    c = Claim(8, "ELECTRA's discriminator is no MLM, and its generator is a weaker MLM than BERT", "not run",
              compared=[r.bert, r.electra])
    if not (r.bert in v and r.electra in v and "minimal_pairs" in v[r.electra].measure):
        return c
    mb, me = v[r.bert].measure.get("minimal_pairs", {}), v[r.electra].measure["minimal_pairs"]
    eb, ee = v[r.bert].final_eval(), v[r.electra].final_eval()
    c.numbers = {"bert MLM accuracy (held-out)": eb.get("eval_mlm_accuracy"),
                 "generator MLM accuracy (held-out)": ee.get("eval_gen_accuracy"),
                 "minimal pairs: bert (PLL)": mb.get("mlm", {}).get("accuracy"),
                 "minimal pairs: generator (PLL)": me.get("generator", {}).get("accuracy"),
                 "minimal pairs: discriminator (log P(original))": me.get("discriminator", {}).get("accuracy")}
    ok = None
    gb, gg = c.numbers["bert MLM accuracy (held-out)"], c.numbers["generator MLM accuracy (held-out)"]
    if gb is not None and gg is not None and abs(gb - gg) > NOISE_FLOOR:  # one held-out set: no seed spread
        ok = gg < gb
    c.verdict = _verdict(ok)
    c.note = ("the discriminator has no MLM head: it cannot fill in a [MASK] at all (encoderlab fill refuses it); "
              "it can still rank sentences by how 'original' each token looks")
    return c


def embedding_sharing(v: V, r: ClaimRoles) -> Claim:
    return _scores_higher(9, "Sharing embeddings between generator and discriminator helps (none < shared; gdes)",
                          v, {"shared": r.share_shared or r.electra, "none": r.share_none, "gdes": r.share_gdes},
                          "shared", "none")


def sentence_objectives(v: V, r: ClaimRoles) -> Claim:
    return _scores_higher(10, "SOP is a better sentence-level objective than NSP (and NSP adds little over none)",
                          v, {"nsp": r.nsp, "sop": r.sop, "none": r.bert}, "sop", "nsp")


def _scores_higher(num: int, title: str, v: V, roles: dict[str, str | None], better: str, worse: str) -> Claim:
    """The claim that role ``better`` scores above role ``worse`` beyond seed noise; the other roles'
    scores are shown beside them."""
    c = Claim(num, title, "not run", compared=list(roles.values()))
    have = _scored(v, roles)
    if {better, worse} <= set(have):
        cmp, _ = compare(have[better], have[worse])
        c.numbers = {k: s["median"] for k, s in have.items()}
        c.verdict = _verdict(None if cmp == "~" else cmp == ">")
    return c


def mask_proposal(v: V, r: ClaimRoles) -> Claim:
    """Chen et al.'s answer to "MLM is too easy": harder masking instead of a discriminator. Holds when
    the proposal MLM scores at least ELECTRA's (a difference within seed noise counts as matching),
    does not hold when it scores below by more than the noise."""
    roles = {"bert-proposal": r.bert_proposal, "electra": r.electra, "bert": r.bert}
    c = Claim(11, "MLM with a mask proposal matches or beats ELECTRA at equal FLOPs", "not run",
              compared=list(roles.values()), note="matching = within seed noise")
    have = _scored(v, roles)
    if {"bert-proposal", "electra"} <= set(have):
        cmp, d = compare(have["bert-proposal"], have["electra"])
        c.numbers = {k: s["median"] for k, s in have.items()} | {"bert-proposal - electra": d}
        c.verdict = _verdict(cmp != "<")
    return c


def generation_start(v: V, r: ClaimRoles) -> Claim:
    """Holds when the discriminator-started generator's token F1 is below both the BERT MLM's and the
    ELECTRA generator's beyond seed noise."""
    c = Claim(12, "An ELECTRA discriminator is a poor starting point for MLM-based (UniLM) generation", "not run",
              compared=[r.bert, r.electra], note="token F1 of greedy decodes on the generation task's test split")
    gb = v[r.bert].measure.get("generation", {}) if r.bert in v else {}
    ge = v[r.electra].measure.get("generation", {}) if r.electra in v else {}
    f1 = {name: g["summary"].get("f1") for name, g in (("bert", gb.get("mlm")), ("generator", ge.get("generator")),
                                                        ("discriminator", ge.get("discriminator"))) if g}
    if len(f1) < 3 or None in f1.values():
        return c
    c.numbers = {f"{k} F1": s["median"] for k, s in f1.items()}
    vs = [compare(f1["discriminator"], f1[k])[0] for k in ("bert", "generator")]
    c.verdict = _verdict(True if vs == ["<", "<"] else False if ">" in vs else None)
    return c


def robustness(v: V, r: ClaimRoles) -> Claim:
    """Holds when ELECTRA's accuracy drop under synonym substitution exceeds BERT's beyond seed noise."""
    c = Claim(13, "ELECTRA loses more under synonym substitution than BERT", "not run", compared=[r.bert, r.electra],
              note="drop = clean - perturbed accuracy on the examples the substitution changed")
    drops = {k: v[n].measure.get("robustness", {}).get("kinds", {}).get("synonym", {}).get("drop")
             for k, n in (("bert", r.bert), ("electra", r.electra)) if n in v}
    if len(drops) < 2 or None in drops.values():
        return c
    cmp, d = compare(drops["electra"], drops["bert"])
    c.numbers = {"bert drop": drops["bert"]["median"], "electra drop": drops["electra"]["median"],
                 "electra - bert": d}
    c.verdict = _verdict(None if cmp == "~" else cmp == ">")
    return c


def modern_encoder(v: V, r: ClaimRoles) -> Claim:
    c = _scores_higher(14, "Modern encoder options (pre-LN, rotary positions, GeGLU, no biases) beat the BERT "
                       "design at equal FLOPs", v, {"bert-modern": r.bert_modern, "bert": r.bert},
                       "bert-modern", "bert")
    if r.bert in v and r.bert_modern in v:  # what actually differs: a study may give bert some options too
        a, b = v[r.bert_modern].spec.get("model", {}), v[r.bert].spec.get("model", {})
        diff = {k: a.get(k) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
        c.note = "bert-modern differs from bert in " + (", ".join(f"{k}={x}" for k, x in diff.items()) or "nothing")
    return c


CLAIMS: list[Callable[[V, ClaimRoles], Claim]] = [
    size, latency, training_speed, albert_quality, electra_beats_bert, generator_size, all_tokens,
    generator_is_weaker_mlm, embedding_sharing, sentence_objectives, mask_proposal, generation_start, robustness,
    modern_encoder]


def evaluate_claims(v: V, roles: ClaimRoles | None = None, baselines: dict | None = None) -> list[Claim]:
    """Every claim over the variants' results; a run quality claim lists, under ``plateau``, the
    variants it compares that had not left the unigram plateau (baselines: the held-out unigram
    and bigram accuracies)."""
    roles = roles or ClaimRoles()
    out = []
    for claim in CLAIMS:
        c = claim(v, roles)
        if c.verdict != "not run":
            c.plateau = [n for n in c.compared if n in v and left_plateau(v[n], baselines) is False]
        out.append(c)
    return out
