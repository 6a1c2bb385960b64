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
    objective = build_objective(eval_config(cfg), evaluation=True)
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


def describe_accuracy(cfg: ObjectiveConfig) -> str | None:
    """What the training and the held-out MLM accuracies each measure, said once in every run's log:
    they differ by design. Training counts the positions the recipe masks, including those left as
    they are (which a model predicts by copying them) and those made random; the held-out
    evaluation shows every chosen position as [MASK] (eval_config). A run where eval_mlm_accuracy is
    far below mlm_accuracy (a Chinese run in issue 34: keep_fraction 0.1, whole-word masking) has a
    model that copies its visible inputs, not a broken evaluation."""
    m = cfg.masking
    if cfg.kind == "clm":
        return ("clm_accuracy (training) and eval_clm_accuracy (held-out) are next-token accuracies under the "
                "causal mask, at every position whose next token is real")
    train = "gen_accuracy (the generator's)" if cfg.kind == "rtd" else "mlm_accuracy"
    held = "eval_gen_accuracy" if cfg.kind == "rtd" else "eval_mlm_accuracy"
    switch = ""
    if cfg.kind == "clm_then_mlm" and cfg.causal_steps is not None:
        switch = (f"clm_then_mlm: causal (clm_*) for the first {cfg.causal_steps:,} optimizer steps, MLM from step "
                  f"{cfg.causal_steps:,} on; ")
    return (f"{switch}{train} (training) is scored at the positions the recipe chooses ({m.scheme} masking, "
            f"{m.rate:.0%} of tokens: {m.mask_fraction:.0%} shown as [MASK], {m.random_fraction:.0%} random, "
            f"{m.keep_fraction:.0%} left as they are, which a model gets right by copying); {held} (held-out) "
            f"at 15% of tokens, each shown as [MASK], token masking: it is the lower, comparable number")


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
