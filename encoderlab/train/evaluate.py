"""Held-out evaluation at fixed settings: 15% [MASK], a fixed seed, the same batches every time.

MLM models: MLM loss and accuracy. ELECTRA: the generator's MLM loss and accuracy, and the
discriminator's accuracy and ROC AUC over all real tokens. MLM ablations: the main MLM's loss and
accuracy on generator-replaced inputs (the objective's own setting).
"""

from __future__ import annotations

import dataclasses

import torch

from encoderlab.data.masking import MaskingConfig
from encoderlab.objectives import build_objective
from encoderlab.objectives.base import ObjectiveConfig
from encoderlab.precision import autocast

EVAL_SEED = 12345


def eval_config(cfg: ObjectiveConfig) -> ObjectiveConfig:
    """The same for every model in a comparison: 15% of tokens, every one shown as [MASK].

    Not BERT's 80/10/10: with 10% of targets left in place, a model that only learned to copy its
    input would score 10% accuracy, which would blur the comparison with a unigram baseline."""
    return dataclasses.replace(cfg, masking=MaskingConfig(mask_fraction=1.0, random_fraction=0.0, keep_fraction=0.0),
                               two_stage_generator_steps=0, disc_positions="all")


@torch.no_grad()
def evaluate(model, cfg: ObjectiveConfig, batches: list[dict], *, device, precision: str = "fp32") -> dict[str, float]:
    """Held-out metrics; ``precision`` is a resolved one (fp32 or bf16)."""
    objective = build_objective(eval_config(cfg))
    was_training = model.training
    model.eval()
    sums: dict[str, list[torch.Tensor]] = {}
    scores, labels = [], []
    g = torch.Generator(device=device)
    for i, batch in enumerate(batches):
        batch = {k: v.to(device) for k, v in batch.items()}
        g.manual_seed(EVAL_SEED + i)
        with autocast(precision, device):
            out = objective(model, batch, g)
        for name, (num, den) in out.metrics.items():
            acc = sums.setdefault(name, [torch.zeros((), device=device), torch.zeros((), device=device)])
            acc[0] += num
            acc[1] += den
        if out.scores is not None:
            logits, truth, where = out.scores
            scores.append(logits[where].float().cpu())
            labels.append(truth[where].cpu())
    model.train(was_training)
    result = {f"eval_{k}": (n / d).item() if d > 0 else float("nan") for k, (n, d) in sums.items()}
    if scores:
        result["eval_disc_auc"] = roc_auc(torch.cat(scores), torch.cat(labels))
    return result


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Mann-Whitney AUC with average ranks for ties; NaN when one class is absent."""
    labels = labels.bool()
    P, N = int(labels.sum()), int((~labels).sum())
    if P == 0 or N == 0:
        return float("nan")
    order = scores.argsort()
    s = scores[order]
    ranks = torch.empty_like(scores, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    # average ranks over runs of equal scores
    uniq, inverse, counts = torch.unique_consecutive(s, return_inverse=True, return_counts=True)
    if len(uniq) < len(s):
        sorted_ranks = torch.arange(1, len(s) + 1, dtype=torch.float64)
        sums = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inverse, sorted_ranks)
        ranks[order] = (sums / counts)[inverse]
    return float((ranks[labels].sum() - P * (P + 1) / 2) / (P * N))
