"""Every claim's verdict over a study's results: the claim functions (study/claims.py, and the arms'
in study/claims_arms.py) run by role, the not-testable rule applied where no task carries transfer,
and Holm's adjustment over every directional comparison."""

from __future__ import annotations

from encoderlab.study import claims as claim_defs
from encoderlab.study import stats
from encoderlab.study.claims import NOT_TESTABLE, SANITY, Claim, V, left_plateau
from encoderlab.study.claims_arms import ARM_CLAIMS
from encoderlab.study.judge import Judge
from encoderlab.study.published import compute_ratio, published
from encoderlab.study.roles import ClaimRoles


def evaluate_claims(v: V, roles: ClaimRoles | None = None, baselines: dict | None = None, *,
                    margin: float = 0.01, controls: dict | None = None, signal: dict[str, bool] | None = None,
                    budget_flops: float | None = None) -> list[Claim]:
    """Every claim over the variants' results; a run quality claim lists, under ``plateau``, the
    variants it compares that had not left the unigram plateau (baselines: the held-out unigram
    and bigram accuracies). Which tasks enter a claim's aggregates: those its compared variants learn
    beyond the random-init control (``controls``, Judge.among), or a fixed ``signal`` for every claim
    (task -> enters), or every task when neither is given. Holm's adjustment runs over every
    directional comparison of every claim."""
    roles = roles or ClaimRoles()
    judge = Judge(v, margin=margin, signal=signal, controls=controls)
    out = []
    for claim in claim_defs.CLAIMS + ARM_CLAIMS:  # read at call time: a test registers more
        c = claim(judge, roles)
        if c.verdict != "not run":
            c.plateau = [n for n in c.compared if n in v and left_plateau(v[n], baselines) is False]
        c.published, c.compute = c.published or published(c.claim), compute_ratio(c.claim, budget_flops)
        if c.kind != SANITY and c.verdict != "not run" and c.signal and not any(ok for ok, _ in c.signal.values()):
            c.verdict = NOT_TESTABLE  # its comparisons' verdicts stay in the table, read over no task
            every = claim(Judge(v, margin=margin, signal={t: True for t in c.signal}), roles)
            c.untested = [x for x in every.comparisons if x.estimate is not None]
            c.note = ("no task carries transfer for its variants (pooled against random init, below), so the "
                      "encoders compared are, for these tasks, no better than untrained ones; docs/transfer.md gives "
                      "the pretraining budget at which BERT's does" + (f". {c.note}" if c.note else ""))
        out.append(c)
    # Holm's family: the directional comparisons (a claim of matching reads its margin, not a p against zero)
    every = [x for c in out for x in c.comparisons if x.estimate is not None and x.kind == "greater"]
    for x, p in zip(every, stats.holm([x.estimate.p for x in every])):
        x.holm_p = p
    return out
