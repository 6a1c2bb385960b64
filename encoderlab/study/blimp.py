"""BLiMP dev: zero-shot minimal pairs from BLiMP's paradigm files, scored at every checkpoint, with
each pair's outcome kept so that two variants can be compared on the same pairs.

The files under ../shared/data/blimp are 36 of BLiMP's 67 paradigms (1,000 pairs each; the other 31
are held back on purpose), so the score is a development score and is always called "BLiMP dev (36 of
67 paradigms)", never BLiMP's. An MLM scores a sentence by its pseudo-log-likelihood, an ELECTRA
discriminator by the summed log P(original) of its tokens, a network pretrained only causally
(objective kind clm) by its log-likelihood left to right (eval/intrinsic.py); a variant's score is
that of the network it deploys (an ELECTRA's discriminator), its generator's reported beside it. A
causal variant's random-init control is scored causally too (``CAUSAL_CONTROL``, control_for).

Two variants are compared on the same pairs by the study's estimate (study/stats.py,
judge.Judge.compare): each variant's (runs, pairs) outcomes at its runs' last checkpoints, the pairs,
the same items for every run of both variants, standing where the shared fine-tuning seeds stand; so the
interval covers both how runs differ and which pairs were drawn. :func:`paired_diff` (a paired normal
interval over pairs, close to McNemar's test at thousands of pairs) compares the pooled variants with
the one random-init control.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np

from encoderlab.eval.intrinsic import (
    causal_log_likelihoods,
    discriminator_log_original,
    pseudo_log_likelihoods,
    read_minimal_pairs,
)
from encoderlab.models.pairs import ElectraPair
from encoderlab.study import stats

PARADIGMS = 67
CAUSAL_KINDS = ("clm",)  # objective kinds whose network is a causal LM: scored left to right
CAUSAL_CONTROL = "blimp_clm"  # a control record's causally scored BLiMP, beside "blimp"


def causal(objective_kind: str) -> bool:
    """Whether a variant of this objective kind is scored left to right (a causal LM's likelihood)."""
    return objective_kind in CAUSAL_KINDS


def control_for(control: dict, record: dict | None) -> dict | None:
    """A random-init control's BLiMP record scored the way a variant's ``record`` was: causally for a
    causal LM's, else by PLL (or an ELECTRA's discriminator)."""
    return control.get(CAUSAL_CONTROL if (record or {}).get("deployed") == "clm" else "blimp")


def label(folder: str | Path) -> str:
    n = len(paradigm_files(folder))
    return f"BLiMP dev ({n} of {PARADIGMS} paradigms)"


def paradigm_files(folder: str | Path) -> list[Path]:
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{folder}: no BLiMP paradigm files (*.jsonl)")
    return files


def load_pairs(folder: str | Path, per_paradigm: int | None = None, seed: int = 0) -> list[dict]:
    """Every paradigm's pairs, or a seeded sample of ``per_paradigm`` from each (the same for every
    variant and checkpoint, so the comparison stays paired)."""
    out = []
    for path in paradigm_files(folder):
        pairs = read_minimal_pairs(path)
        if per_paradigm is not None and per_paradigm < len(pairs):
            pairs = [pairs[i] for i in sorted(random.Random(f"{seed}:{path.name}").sample(range(len(pairs)),
                                                                                          per_paradigm))]
        out += pairs
    return out


def score(model, tok, pairs: list[dict], precision: str = "fp32", *, causal: bool = False) -> dict:
    """{"n", "deployed", networks: {"mlm" | "generator" | "discriminator" | "clm": {"accuracy",
    "by_phenomenon", "correct": one '0'/'1' per pair}}}; "deployed" names the network that stands for the
    variant. ``causal``: the model's MLM network scored left to right (a clm variant's), as "clm"."""
    texts = [p["sentence_good"] for p in pairs] + [p["sentence_bad"] for p in pairs]
    n = len(pairs)
    nets = {}
    pair = isinstance(model, ElectraPair)
    if causal and pair:
        raise ValueError("causal scoring reads one MLM network; an ELECTRA pair is scored by its discriminator")
    for net in (["generator", "discriminator"] if pair else ["clm"] if causal else ["mlm"]):
        if net == "discriminator":
            s = discriminator_log_original(model, tok, texts, precision=precision)
        elif net == "clm":
            s = causal_log_likelihoods(model, tok, texts, precision=precision)[0]
        else:
            s = pseudo_log_likelihoods(model, tok, texts, precision=precision)[0]
        correct = s[:n] > s[n:]  # a tie counts as wrong
        phen: dict[str, list[bool]] = {}
        for p, c in zip(pairs, correct):
            phen.setdefault(str(p.get("linguistics_term") or p.get("field") or "all"), []).append(bool(c))
        nets[net] = {"accuracy": float(correct.mean()), "correct": "".join("1" if c else "0" for c in correct),
                     "by_phenomenon": {k: float(np.mean(v)) for k, v in sorted(phen.items())}}
    return {"n": n, "deployed": "discriminator" if pair else next(iter(nets)), "networks": nets}


def correct_of(record: dict | None) -> np.ndarray | None:
    """The deployed network's per-pair outcomes (0/1), None where the record has none."""
    net = (record or {}).get("networks", {}).get((record or {}).get("deployed", ""), {})
    bits = net.get("correct")
    return np.frombuffer(bits.encode(), dtype=np.uint8) - ord("0") if bits else None


CHANCE = 0.5  # a two-choice score's chance level


def paired_diff(a: np.ndarray, b: np.ndarray | float) -> stats.Estimate | None:
    """Accuracy of a minus b on the same pairs, with the paired normal 95% interval; a number b (CHANCE)
    is the same reference for every pair, so the interval is a's own."""
    if np.isscalar(b):
        b = np.full(len(a), float(b)) if a is not None else None
    if a is None or b is None or len(a) != len(b) or not len(a):
        return None
    d = a.astype(float) - b.astype(float)
    diff, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
    p = 1.0 if se == 0 and diff == 0 else 0.0 if se == 0 else math.erfc(abs(diff) / se / math.sqrt(2))
    return stats.Estimate(diff=diff, lo=diff - 1.96 * se, hi=diff + 1.96 * se, se=se, mdd=stats.MDD_FACTOR * se,
                          p=p, runs=(1, 1), finetune_seeds=0, paired=True)
