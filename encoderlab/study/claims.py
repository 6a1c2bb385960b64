"""The claims, each with its measured numbers and a verdict computed from them.

A claim reads the variants it needs by name (the built-in ``claims`` study uses these names);
a claim whose variants are absent is reported as "not run". Verdicts: "holds", "does not hold",
or "inconclusive" when the difference is within seed noise (the larger of the two seed standard
deviations, and at least half a point).

Names: bert, albert (same width and depth as bert, with unshare: true), electra; generator sweep
electra-gen-1-8, electra-gen-1-2, electra-gen-1 (electra itself is the 1/4 generator); ablations
electra-15pct, replace-mlm, all-tokens-mlm; sharing electra-share-none, electra-gdes; sentence
objectives bert-nsp, bert-sop (bert itself has none); widths for claim 3: bert-w2/albert-w2 (and -w3).
"""

from __future__ import annotations

import statistics

NOISE_FLOOR = 0.005


def final_score(res: dict, suffix: str = "") -> dict | None:
    """Downstream score at the last fine-tuning fraction, averaged over tasks: median and std."""
    if not res or not res.get("finetune"):
        return None
    fracs = sorted({float(k.rsplit("@", 1)[1]) for k in res["finetune"]})
    last = fracs[-1]
    rows = [r for k, r in res["finetune"].items() if k.endswith(f"@{last}") and k.split("@")[0].endswith(suffix)
            and (suffix or "+unshared" not in k)]
    if not rows:
        return None
    med = statistics.mean(r["score"]["median"] for r in rows)
    std = statistics.mean(r["score"]["std"] for r in rows)
    return {"median": med, "std": std, "n": rows[0]["score"]["n"]}


def score_at(res: dict, frac: float) -> float | None:
    rows = [r for k, r in res["finetune"].items() if k.endswith(f"@{frac}") and "+unshared" not in k]
    return statistics.mean(r["score"]["median"] for r in rows) if rows else None


def compare(a: dict, b: dict) -> tuple[str, float]:
    """(">", "<" or "~", difference) of a against b, "~" within seed noise."""
    diff = a["median"] - b["median"]
    noise = max(a["std"], b["std"], NOISE_FLOOR)
    return (">" if diff > noise else "<" if diff < -noise else "~"), diff


def _verdict(ok: bool | None) -> str:
    return "inconclusive" if ok is None else "holds" if ok else "does not hold"


def steady_train(res: dict) -> dict:
    """Training tokens/s and peak memory. Tokens/s from the side-by-side measurement when the study
    made one (study/speed.py); otherwise the median over the second half of the pretraining's own
    log, which is only comparable between variants that ran alone on an idle machine."""
    recs = res["curve"]["train"]
    tail = recs[len(recs) // 2:] or recs
    tps = (res["speed"]["tokens_per_s"] if "speed" in res
           else statistics.median(r["tokens_per_s"] for r in tail) if tail else float("nan"))
    return {"tokens_per_s": tps, "peak_memory_mb": max((r["peak_memory_mb"] for r in recs), default=float("nan"))}


def _final_eval(res: dict) -> dict:
    ev = res["curve"]["eval"]
    return ev[-1] if ev else {}


def plateau_accuracy(res: dict) -> float | None:
    """The held-out accuracy that says whether a variant learned from context: that of the MLM which is
    fine-tuned (BERT, ALBERT, Replace-MLM) at its masked positions, else an ELECTRA's generator's (its
    discriminator can only learn what the generator's replacements make learnable). None for
    All-Tokens-MLM, whose MLM accuracy counts every token, copies included."""
    ev, objective = _final_eval(res), res.get("spec", {}).get("objective", {})
    if objective.get("variant") == "all_tokens_mlm":
        return None
    return ev.get("eval_mlm_accuracy", ev.get("eval_gen_accuracy"))


def left_plateau(res: dict, baselines: dict | None) -> bool | None:
    """Whether the held-out accuracy got at least a quarter of the way from the unigram baseline (the
    plateau tiny models sit on first) to the bigram one; None when either is unknown."""
    acc = plateau_accuracy(res)
    if acc is None or not baselines:
        return None
    return acc >= baselines["unigram"] + 0.25 * (baselines["bigram"] - baselines["unigram"])


# The variants each quality claim compares (claims 1-3 are about size and speed, which need no learning).
CLAIM_VARIANTS = {4: ("bert", "albert"), 5: ("bert", "electra"),
                  6: ("electra-gen-1-8", "electra", "electra-gen-1-2", "electra-gen-1"),
                  7: ("bert", "electra-15pct", "replace-mlm", "all-tokens-mlm", "electra"), 8: ("bert", "electra"),
                  9: ("electra", "electra-share-none", "electra-gdes"), 10: ("bert-nsp", "bert-sop", "bert")}


def evaluate_claims(v: dict, baselines: dict | None = None) -> list[dict]:
    """v: variant name -> results from the runner; baselines: the held-out count baselines (unigram,
    bigram). Returns one dict per claim; a quality claim lists, under "plateau", the variants it
    compares that had not left the unigram plateau: its verdict then compares encoders that learned
    little from context, whatever it says."""
    out = _claims(v)
    for c in out:
        if c["verdict"] != "not run" and c["claim"] in CLAIM_VARIANTS:
            c["plateau"] = [n for n in CLAIM_VARIANTS[c["claim"]] if n in v and left_plateau(v[n], baselines) is False]
    return out


def _claims(v: dict) -> list[dict]:
    out = []

    def need(*names):
        return all(n in v for n in names)

    def add(num, title, verdict, numbers, note=""):
        out.append({"claim": num, "title": title, "verdict": verdict, "numbers": numbers, "note": note})

    title = "ALBERT's parameters and checkpoint size are a fraction of BERT's at the same width and depth"
    if need("bert", "albert"):
        b, a = v["bert"]["measure"], v["albert"]["measure"]
        p, s = a["params_encoder"] / b["params_encoder"], a["checkpoint_mb"] / b["checkpoint_mb"]
        add(1, title, _verdict(p < 0.7 and s < 0.7), {"albert/bert params": p, "albert/bert checkpoint size": s,
                                                      "bert params": b["params_encoder"],
                                                      "albert params": a["params_encoder"]})
    else:
        add(1, title, "not run", {})

    title = "ALBERT's inference is no faster than BERT's at the same spec (sharing saves no computation)"
    if need("bert", "albert") and "latency_ms" in v["bert"]["measure"]:
        lb, la = v["bert"]["measure"]["latency_ms"], v["albert"]["measure"]["latency_ms"]
        ratios = {k: la[k] / lb[k] for k in lb}
        add(2, title, _verdict(min(ratios.values()) > 0.9), {f"albert/bert latency {k}": r for k, r in ratios.items()},
            "holds when no setting is more than 10% faster for ALBERT")
    else:
        add(2, title, "not run", {})

    title = "ALBERT's training speed and memory gain over BERT is modest and shrinks at small sizes"
    pairs = [(s, f"bert{s}", f"albert{s}") for s in ("", "-w2", "-w3") if need(f"bert{s}", f"albert{s}")]
    if pairs:
        nums = {}
        for _, bn, an in pairs:
            tb, ta = steady_train(v[bn]), steady_train(v[an])
            nums[f"{an} speed gain"] = ta["tokens_per_s"] / tb["tokens_per_s"] - 1
            nums[f"{an} memory saving"] = 1 - ta["peak_memory_mb"] / tb["peak_memory_mb"]
        gains = [nums[f"albert{s} speed gain"] for s, _, _ in pairs]
        add(3, title, _verdict(max(gains) < 0.3), nums, "holds when no width gains more than 30% in tokens/s")
    else:
        add(3, title, "not run", {})

    title = "At small sizes ALBERT scores below BERT; unsharing ALBERT and fine-tuning scores higher"
    if need("bert", "albert") and final_score(v["albert"]) and final_score(v["bert"]):
        a, b = final_score(v["albert"]), final_score(v["bert"])
        c1, d1 = compare(a, b)
        nums = {"albert": a["median"], "bert": b["median"], "albert - bert": d1}
        ok = None if c1 == "~" else c1 == "<"
        un = final_score(v["albert"], "+unshared")
        if un:
            c2, d2 = compare(un, a)
            nums.update({"albert unshared": un["median"], "unshared - shared": d2})
            ok = None if (ok is None or c2 == "~") else ok and c2 == ">"
        add(4, title, _verdict(ok), nums)
    else:
        add(4, title, "not run", {})

    title = "ELECTRA beats BERT at equal pretraining FLOPs (and needs ~1/4 of BERT's compute to match it)"
    if need("bert", "electra") and final_score(v["electra"]) and final_score(v["bert"]):
        e, b = final_score(v["electra"]), final_score(v["bert"])
        c, d = compare(e, b)
        nums = {"electra": e["median"], "bert": b["median"], "electra - bert": d}
        fracs = sorted({float(k.rsplit("@", 1)[1]) for k in v["electra"]["finetune"]})
        match = next((f for f in fracs if (score_at(v["electra"], f) or -1) >= b["median"]), None)
        nums["fraction of the budget at which ELECTRA matches BERT's final score"] = match
        add(5, title, _verdict(None if c == "~" else c == ">"), nums,
            "the matching fraction is only resolved at the fine-tuned fractions")
    else:
        add(5, title, "not run", {})

    title = "A generator 1/4-1/2 the discriminator's width is best; one as large as the discriminator hurts"
    sweep = {"1/8": "electra-gen-1-8", "1/4": "electra", "1/2": "electra-gen-1-2", "1": "electra-gen-1"}
    have = {m: final_score(v[n]) for m, n in sweep.items() if n in v and final_score(v[n])}
    if len(have) >= 3:
        best = max(have, key=lambda m: have[m]["median"])
        nums = {f"generator {m}": s["median"] for m, s in have.items()}
        nums["best"] = best
        ok = best in ("1/4", "1/2")
        if "1" in have:
            c, _ = compare(have["1"], have[best])
            ok = ok and c == "<" if c != "~" else (None if ok else False)
        add(6, title, _verdict(ok), nums)
    else:
        add(6, title, "not run", {})

    title = "Most of ELECTRA's gain over BERT comes from learning from all tokens"
    names = {"bert": "bert", "electra-15pct": "electra-15pct", "replace-mlm": "replace-mlm",
             "all-tokens-mlm": "all-tokens-mlm", "electra": "electra"}
    have = {k: final_score(v[n]) for k, n in names.items() if n in v and final_score(v[n])}
    if {"bert", "electra", "all-tokens-mlm"} <= set(have):
        gain = have["electra"]["median"] - have["bert"]["median"]
        share = (have["all-tokens-mlm"]["median"] - have["bert"]["median"]) / gain if gain > NOISE_FLOOR else None
        nums = {k: s["median"] for k, s in have.items()}
        nums["share of ELECTRA's gain recovered by All-Tokens-MLM"] = share
        add(7, title, _verdict(None if share is None else share > 0.5), nums,
            "inconclusive when ELECTRA shows no gain over BERT to explain")
    else:
        add(7, title, "not run", {})

    title = "ELECTRA's discriminator is no MLM, and its generator is a weaker MLM than BERT"
    if need("bert", "electra") and "minimal_pairs" in v["electra"]["measure"]:
        mb, me = v["bert"]["measure"]["minimal_pairs"], v["electra"]["measure"]["minimal_pairs"]
        eb, ee = _final_eval(v["bert"]), _final_eval(v["electra"])
        nums = {"bert MLM accuracy (held-out)": eb.get("eval_mlm_accuracy"),
                "generator MLM accuracy (held-out)": ee.get("eval_gen_accuracy"),
                "minimal pairs: bert (PLL)": mb.get("mlm", {}).get("accuracy"),
                "minimal pairs: generator (PLL)": me.get("generator", {}).get("accuracy"),
                "minimal pairs: discriminator (log P(original))": me.get("discriminator", {}).get("accuracy")}
        ok = None
        gb, gg = nums["bert MLM accuracy (held-out)"], nums["generator MLM accuracy (held-out)"]
        if gb is not None and gg is not None and abs(gb - gg) > NOISE_FLOOR:  # one held-out set: no seed spread
            ok = gg < gb
        add(8, title, _verdict(ok), nums, "the discriminator has no MLM head: it cannot fill in a [MASK] at all "
            "(encoderlab fill refuses it); it can still rank sentences by how 'original' each token looks")
    else:
        add(8, title, "not run", {})

    title = "Sharing embeddings between generator and discriminator helps (none < shared; gdes)"
    have = {k: final_score(v[n]) for k, n in {"shared": "electra", "none": "electra-share-none",
                                              "gdes": "electra-gdes"}.items() if n in v and final_score(v[n])}
    if {"shared", "none"} <= set(have):
        c, d = compare(have["shared"], have["none"])
        nums = {k: s["median"] for k, s in have.items()}
        add(9, title, _verdict(None if c == "~" else c == ">"), nums)
    else:
        add(9, title, "not run", {})

    title = "SOP is a better sentence-level objective than NSP (and NSP adds little over none)"
    have = {k: final_score(v[n]) for k, n in {"nsp": "bert-nsp", "sop": "bert-sop", "none": "bert"}.items()
            if n in v and final_score(v[n])}
    if {"nsp", "sop"} <= set(have):
        c, d = compare(have["sop"], have["nsp"])
        nums = {k: s["median"] for k, s in have.items()}
        add(10, title, _verdict(None if c == "~" else c == ">"), nums)
    else:
        add(10, title, "not run", {})
    return out
