"""What each claim's paper reported, and how far the study's compute is from the paper's.

Where a table is cited without a number, the figure was not to hand exactly and is left for the
reader to look up. The figures of claims 1, 7 and 9 were written from memory of the papers and have
not been checked against them in this repository (no paper text is stored here): each says so, so
that a report never quotes them as verified. Claim 5a's are the ones issue 32 cites from Table 1.

ELECTRA: Clark, Luong, Le, Manning, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators", ICLR 2020. ALBERT: Lan et al., "ALBERT: A Lite BERT for Self-supervised Learning of
Language Representations", ICLR 2020.
"""

from __future__ import annotations

# ELECTRA Table 1 lists pretraining ("train") FLOPs of 1.4e18 for both ELECTRA-Small and BERT-Small
# (the small models the claims study's tiny encoders stand in for).
ELECTRA_SMALL_TRAIN_FLOPS = 1.4e18

PUBLISHED: dict[int | str, str] = {
    1: "ALBERT Table 1: ALBERT-base 12M parameters against BERT-base 108M (embedding factorisation and "
       "cross-layer sharing) [from memory, not checked against the paper here]",
    2: "ALBERT Table 2 (speedup column; sharing saves parameters, not computation: ALBERT-xxlarge trains "
       "slower than BERT-large)",
    3: "ALBERT Table 2 (training speedup against BERT-large, by size)",
    4: "ALBERT Table 2: BERT-base's average over SQuAD1.1, SQuAD2.0, MNLI, SST-2 and RACE (not a GLUE average) "
       "above ALBERT-base's at equal width and depth; Table 4 (cross-layer sharing costs accuracy)",
    "5a": "ELECTRA Table 1: ELECTRA-Small 79.9 against BERT-Small 75.1 GLUE dev at equal train FLOPs (1.4e18)",
    "5b": "ELECTRA abstract and Table 2 (ELECTRA matches RoBERTa and XLNet with less than 1/4 of their compute); "
          "Figure 1 (GLUE against pretraining FLOPs)",
    6: "ELECTRA Figure 3 (left): GLUE by generator size at equal discriminator size and equal steps; "
       "generators 1/4-1/2 of the discriminator's size work best",
    7: "ELECTRA Table 5 (base size, GLUE dev): ELECTRA 85.0, All-Tokens MLM 84.3, Replace MLM 82.4, "
       "ELECTRA 15% 82.4, BERT 82.2 [from memory, not checked against the paper here]",
    8: "ELECTRA §3.2 (the generator is a smaller MLM); the discriminator has no MLM head by design",
    9: "ELECTRA §3.2 (weight sharing, GLUE dev): no tying 83.6, tied token embeddings 84.3, all weights 84.4 "
       "[from memory, not checked against the paper here]",
    10: "ALBERT Table 5 (none / NSP / SOP: NSP does not solve SOP, SOP solves NSP)",
    11: "the mask-proposal seed article's comparison with ELECTRA (no figure recorded here)",
    12: "the seed article on UniLM-style generation from an ELECTRA discriminator (no figure recorded here)",
    13: "the seed article on robustness to synonym substitution (no figure recorded here)",
    14: "ModernBERT (Warner et al. 2024) on pre-LN, rotary positions, GeGLU and no biases (no figure recorded "
        "here)",
}
# Claims whose paper figure is ELECTRA-Small's (Table 1), so the compute ratio is against its FLOPs.
_SMALL_FLOPS = {"5a", "5b"}


def published(claim: int | str) -> str:
    return PUBLISHED.get(claim, "")


def compute_ratio(claim: int | str, budget_flops: float | None) -> str:
    """The study's pretraining budget against the paper's, where the paper's FLOPs are known here."""
    if budget_flops is None or claim not in _SMALL_FLOPS:
        return ""
    ratio = ELECTRA_SMALL_TRAIN_FLOPS / budget_flops
    return (f"this study's budget is {budget_flops:.3g} FLOPs per variant, 1/{ratio:,.0f}"
            f" of ELECTRA-Small's {ELECTRA_SMALL_TRAIN_FLOPS:.2g} train FLOPs (ELECTRA Table 1)")
