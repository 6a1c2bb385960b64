"""ELECTRA's replaced-token detection and the paper's ablations, as one objective with fields.

variant=electra: generator MLM loss at the masked positions + disc_weight * the discriminator's
  binary loss over every real token (disc_positions=masked gives ELECTRA-15%: only the masked ones).
variant=replace_mlm: an MLM whose masked positions receive generator samples instead of [MASK];
  the MLM predicts the originals at those positions. Network: encoderlab.models.pairs.MLMPair.
variant=all_tokens_mlm: inputs replaced as in replace_mlm, and the MLM predicts the original of
  *every* real token. With copy_mechanism (the paper's), a sigmoid gate D per token gives the output
  p(y) = D * 1[y = x_t] + (1 - D) * softmax(y), x_t the token at the input: copying an unreplaced
  input has an output of its own and the softmax is left to predict. Without it (the default, as
  before the field existed) a plain softmax must learn to copy, and the loss is dominated by the
  unmasked tokens (70-85% of them): measured, that MLM copies and stays below the bigram baseline
  at the masked positions (docs/studies/claims-deep-ablations).

Replacements are sampled from the generator's distribution in fp32 by inverse CDF
(temperature configurable) under no_grad: no gradient flows through the sampling. A sample equal
to the original is labelled "original". Networks return logits; everything else lives here.

Shape letters: B batch, T length, V vocabulary, M masked positions, N real tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.config import ConfigError
from encoderlab.models.pairs import MLMPair, Pair
from encoderlab.objectives.base import (
    Objective,
    ObjectiveConfig,
    ObjectiveOutput,
    hit_sums,
    hits,
    mask_batch,
    mean_metric,
    ratio,
)
from encoderlab.objectives.token_ce import block_rows, token_nll


def sample_replacements(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """One sample per row of (M, V) logits (or log-probabilities) from softmax(logits / temperature),
    in fp32.

    Inverse CDF: one uniform per row, found in the row's cumulative distribution. The Gumbel-max
    trick draws M x V uniforms and takes two logs of each; on a CPU that costs several times more
    than the generator's sparse MLM head it samples from (benchmarks/train_step.py). The weights
    are left unnormalized (the uniform is scaled by the row's total instead), saving a pass."""
    M, V = logits.shape
    u_all = torch.rand(M, 1, generator=generator, device=logits.device, dtype=torch.float32)  # (M, 1)
    out = torch.empty(M, dtype=torch.long, device=logits.device)
    step = block_rows(logits)  # a block of rows at a time, in cache (objectives/token_ce.py); each row alone
    for i in range(0, M, step):
        x = logits[i : i + step].float()  # (b, V)
        if temperature != 1.0:
            x = x / temperature
        weights = (x - x.amax(-1, keepdim=True)).exp_()  # (b, V), largest weight 1 in each row
        cdf = weights.cumsum_(-1)  # (b, V), in place: the weights are not needed again
        u = u_all[i : i + step] * cdf[:, -1:]  # the row's total, not 1: rounding never selects past the end
        # right=True: the first index whose cdf exceeds u, so zero-probability tokens are never drawn
        out[i : i + step] = torch.searchsorted(cdf, u, right=True).clamp_(max=V - 1).squeeze(1)
    return out  # (M,)


class RTDObjective(Objective):
    def __init__(self, cfg: ObjectiveConfig):
        self.cfg = cfg

    # ---- two-stage training -----------------------------------------------------------------
    def on_step_start(self, model: Pair, step: int) -> None:
        """At the two-stage switch: freeze the generator (unless two_stage_freeze_generator is
        off), optionally copy it into the discriminator."""
        n = self.cfg.two_stage_generator_steps
        if n == 0 or step < n:
            return
        if self.cfg.rtd_stage(step) == "discriminator":
            for p in model.generator.parameters():
                p.requires_grad_(False)
        if step == n and self.cfg.two_stage_init_discriminator:
            _copy_matching(model.generator.encoder, model.main.encoder)

    # ---- the loss ---------------------------------------------------------------------------
    def __call__(self, model: Pair, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        cfg = self.cfg
        ids, am, tt = batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
        vocab = model.generator.encoder.config.vocab_size
        m = mask_batch(batch, cfg, vocab, generator)
        stage = self.cfg.rtd_stage(step)
        metrics: dict = {}
        loss = torch.zeros((), device=ids.device)
        if stage == "discriminator":  # frozen generator: sampling only
            with torch.no_grad():
                g_logits = model.generator(m.input_ids, am, tt, positions=m.positions).logits  # (M, V)
        else:
            g_logits = model.generator(m.input_ids, am, tt, positions=m.positions).logits  # (M, V)
            g_nll, g_hit = token_nll(g_logits, m.targets)  # (M,), (M,)
            g_loss = g_nll.sum() / max(m.targets.numel(), 1)
            loss = loss + g_loss
            metrics["gen_loss"] = mean_metric(g_loss)
            metrics["gen_accuracy"] = hits(g_hit)
        M = m.positions.numel()
        out = ObjectiveOutput(loss=loss, metrics=metrics, num_masked=M, tokens=ids.numel())
        if stage == "generator":
            metrics["loss"] = mean_metric(loss)
            return out
        with torch.no_grad():
            sampled = sample_replacements(g_logits.detach(), cfg.temperature, generator)  # (M,)
        replaced = ids.clone()
        replaced.view(-1)[m.positions] = sampled  # (B, T)
        is_replaced = replaced != ids  # (B, T): a sample equal to the original is "original"
        metrics["replacement_rate"] = ratio(is_replaced.sum(), torch.tensor(float(M), device=ids.device))
        if cfg.variant == "electra":
            main, out.scores = self._discriminator_loss(model, replaced, am, tt, is_replaced, m.positions, metrics)
            loss = loss + cfg.disc_weight * main
        else:
            main, out.num_predicted = self._mlm_ablation_loss(model, replaced, am, tt, ids, m.positions, metrics)
            loss = loss + main
        metrics["loss"] = mean_metric(loss)
        out.loss = loss
        return out

    def _discriminator_loss(self, model, replaced, am, tt, is_replaced, positions, metrics):
        logits = model.discriminator(replaced, am, tt).float()  # (B, T)
        if self.cfg.disc_positions == "masked":  # ELECTRA-15%
            where = torch.zeros_like(is_replaced).view(-1)
            where[positions] = True
            where = where.view_as(is_replaced)
        else:
            where = am.bool() if am is not None else torch.ones_like(is_replaced)
        labels = is_replaced.float()
        per_token = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")  # (B, T)
        n = where.sum()
        d_loss = (per_token * where).sum() / n.clamp(min=1)
        pred = (logits > 0) & where
        truth = is_replaced & where
        tp = (pred & truth).sum()
        metrics["disc_loss"] = mean_metric(d_loss)
        metrics["disc_accuracy"] = ratio(((pred == truth) & where).sum(), n)
        metrics["disc_precision"] = ratio(tp, pred.sum())
        metrics["disc_recall"] = ratio(tp, truth.sum())
        return d_loss, (logits.detach(), is_replaced, where)

    def _mlm_ablation_loss(self, model, replaced, am, tt, ids, positions, metrics):
        if not isinstance(model, MLMPair):
            raise ConfigError(f"variant {self.cfg.variant!r} trains an MLMPair (model built with this objective)")
        if self.cfg.variant == "replace_mlm":
            where = positions  # (M,)
        else:  # all_tokens_mlm: every real token
            real = am.bool() if am is not None else torch.ones_like(ids, dtype=torch.bool)
            where = real.view(-1).nonzero().squeeze(1)  # (N,)
        targets = ids.view(-1).index_select(0, where)
        out = model.mlm(replaced, am, tt, positions=where)
        if model.copy_gate is None:
            nll, hit = token_nll(out.logits, targets)  # (M or N,)
            loss = nll.sum() / max(targets.numel(), 1)
        else:
            hidden = out.hidden.reshape(-1, out.hidden.shape[-1]).index_select(0, where)  # (N, H)
            gate = model.copy_gate(hidden).squeeze(1)  # (N,) copy logits
            inputs = replaced.view(-1).index_select(0, where)  # (N,)
            loss, predicted, copy, softmax_predicted = copy_mixture(out.logits, gate, inputs, targets)
            hit = predicted == targets
            swapped = inputs != targets  # (N,) where copying is wrong: the gate should learn to close there
            metrics["copy_probability"] = ratio(copy.sum(), torch.tensor(float(copy.numel()), device=ids.device))
            metrics["copy_probability_replaced"] = ratio(copy[swapped].sum(), swapped.sum())
        metrics["mlm_loss"] = mean_metric(loss)
        metrics["mlm_accuracy"] = hits(hit)
        if self.cfg.variant == "all_tokens_mlm":
            # Over every token the accuracy counts copies of unreplaced inputs; at the masked
            # positions alone it is Replace-MLM's measure, the one a plateau is read from.
            masked = torch.zeros(ids.numel(), dtype=torch.bool, device=ids.device)
            masked[positions] = True
            at = masked[where]  # (N,) which predicted rows are masked positions
            metrics["mlm_masked_accuracy"] = hits(hit[at])
            if model.copy_gate is not None:  # what the softmax knows of the originals, the gate aside
                metrics["mlm_masked_softmax_accuracy"] = hit_sums(softmax_predicted[at], targets[at])
        return loss, where.numel()


def copy_mixture(logits: torch.Tensor, gate: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor):
    """All-Tokens-MLM's copy mechanism on (N, V) logits, (N,) gate logits and the (N,) input and
    target ids: (mean -log p(target), (N,) predictions, (N,) copy probabilities D, (N,) the
    softmax's own argmax), where p(y) = D * 1[y = input] + (1 - D) * softmax(logits)(y), in fp32
    and log space throughout.

    The softmax's share comes from token_nll, a block of rows at a time (no (N, V) fp32 matrix: at
    every token of a batch it is the step's largest tensor); its log-sum-exp is nll + the target's
    logit. The prediction is argmax p: the input when D + (1 - D) q(input) >= (1 - D) max q (a tie
    goes to the copy), else argmax q; (1 - D) scales every other entry alike, so no (N, V) copy is made."""
    nll, _ = token_nll(logits, targets)  # (N,) -log q(target), differentiable
    g = gate.float()
    log_keep, log_copy = F.logsigmoid(-g), F.logsigmoid(g)  # log(1 - D), log D
    soft = log_keep - nll  # (N,) the softmax's share
    logp = torch.where(targets == inputs, torch.logaddexp(soft, log_copy), soft)  # (N,)
    loss = -logp.sum() / max(targets.numel(), 1)
    with torch.no_grad():
        lse = nll + logits.gather(1, targets[:, None]).squeeze(1).float()  # (N,) log-sum-exp of each row
        best, arg = logits.max(-1)  # (N,) in the logits' dtype: widening to fp32 keeps order and ties
        at_input = torch.logaddexp(log_copy, log_keep + logits.gather(1, inputs[:, None]).squeeze(1).float() - lse)
        predicted = torch.where(at_input >= log_keep + best.float() - lse, inputs, arg)
    return loss, predicted, log_copy.detach().exp(), arg


def _copy_matching(src: nn.Module, dst: nn.Module) -> None:
    s, d = src.state_dict(), dst.state_dict()
    # gdes: the discriminator's tables are stopgrad(generator's) + delta already; delta stays
    d = {k: v for k, v in d.items() if not k.endswith(".delta")}
    bad = [k for k in d if k not in s or s[k].shape != d[k].shape]
    if bad:
        raise ConfigError(
            f"two_stage_init_discriminator needs a generator the discriminator's size; mismatched: {bad[:3]}")
    with torch.no_grad():
        for k, v in d.items():
            v.copy_(s[k])
