"""Causal objectives through the one encoder: the same MaskedLM network, a (B, T, T) attention mask.

kind=clm: causal next-token prediction. Every query sees the keys at and before it (and, where the
  batch has ``sequence_ids``, only those of its own sequence); the output at t predicts token t+1,
  read through the tied MLM head at the positions whose next token is real.
kind=gptbert: GPT-BERT (Charpentier and Samuel, 2024, "GPT or BERT: why not both?"). The first
  round(causal_fraction * B) rows of each micro-batch are trained as kind clm; the others are masked
  (the recipe's masking) and seen bidirectionally, and each masked token at t is predicted from the
  output at t - 1 ("masked next-token prediction"), so both halves are next-token predictions of one
  head. One forward pass over the batch with a per-row mask; the loss is the mean cross-entropy
  over every prediction of the micro-batch, causal and masked together. build_networks marks the
  MaskedLM's head as a next-token head (ModelConfig.next_token_head), so fill-mask and pseudo-log-
  likelihoods read the saved model at t - 1 too.
kind=clm_then_mlm: causal pretraining, then masked (Gisserot-Boukhlef et al., 2025, "Should We Still
  Pretrain Encoders with Masked Language Modeling?"): optimizer steps before causal_steps are kind
  clm, the rest BERT's MLM (MLMObjective). causal_steps is resolved from causal_fraction and the
  steps the run's budget allows (train/budget.py), so the switch is by optimizer steps.

Networks are unchanged: the causal mask lives here, so a checkpoint fine-tunes as a bidirectional
encoder. Held-out evaluation (build_objective(..., evaluation=True)) scores every row both ways
where the kind has both: clm_* is next-token accuracy under the causal mask, mlm_* the masked
tokens at 15% [MASK] (read at t - 1 for gptbert, at t for clm_then_mlm).

Shape letters: B batch, T length, V vocabulary, P predicted positions.
"""

from __future__ import annotations

import torch

from encoderlab.objectives.base import (
    Objective,
    ObjectiveConfig,
    ObjectiveOutput,
    hits,
    mask_batch,
    mean_metric,
)
from encoderlab.objectives.mlm import MLMObjective
from encoderlab.objectives.token_ce import token_nll


def attention_masks(attention_mask: torch.Tensor, causal_rows: torch.Tensor,
                    sequence_ids: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, T) bool, True where query i may see key j: real keys, of the query's own sequence when
    ``sequence_ids`` (B, T) are given, and j <= i in the rows where ``causal_rows`` (B,) is True. The
    diagonal is always visible, so a padded query's row is never empty (no NaN from softmax)."""
    B, T = attention_mask.shape
    dev = attention_mask.device
    mask = attention_mask.bool()[:, None, :].expand(B, T, T)  # (B, T, T) keys that are real
    if sequence_ids is not None:
        mask = mask & (sequence_ids[:, :, None] == sequence_ids[:, None, :])
    past = torch.ones(T, T, dtype=torch.bool, device=dev).tril()  # (T, T) j <= i
    mask = mask & (past | ~causal_rows[:, None, None])
    return mask | torch.eye(T, dtype=torch.bool, device=dev)


def next_token_positions(ids: torch.Tensor, attention_mask: torch.Tensor, rows: torch.Tensor,
                         sequence_ids: torch.Tensor | None = None) -> torch.Tensor:
    """(P,) flat indices b * T + t, ascending, of the rows ``rows`` (B,) bool, whose next token t + 1
    is real and of the same sequence: the output at t predicts ids[b, t + 1]."""
    ok = torch.zeros_like(ids, dtype=torch.bool)  # (B, T)
    ok[:, :-1] = attention_mask[:, 1:].bool()
    if sequence_ids is not None:
        ok[:, :-1] &= sequence_ids[:, 1:] == sequence_ids[:, :-1]
    ok &= rows[:, None]
    return ok.view(-1).nonzero().squeeze(1)


class CausalLMObjective(Objective):
    """kind clm: next-token prediction under a causal mask."""

    def __init__(self, cfg: ObjectiveConfig, evaluation: bool = False):
        self.cfg = cfg

    def __call__(self, model, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        ids = batch["input_ids"]
        loss, metrics, P = causal_pass(model, batch)
        metrics["loss"] = mean_metric(loss)
        return ObjectiveOutput(loss=loss, metrics=metrics, num_masked=P, tokens=ids.numel())


def causal_pass(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, int]:
    """Every row causal: (loss, clm_* metrics, P predictions)."""
    ids, tt, seq = batch["input_ids"], batch.get("token_type_ids"), batch.get("sequence_ids")
    am = _real(batch)
    rows = torch.ones(ids.shape[0], dtype=torch.bool, device=ids.device)  # (B,)
    positions = next_token_positions(ids, am, rows, seq)  # (P,)
    targets = ids.view(-1).index_select(0, positions + 1)  # (P,)
    logits = model(ids, attention_masks(am, rows, seq), tt, positions=head_positions(model, positions)).logits  # (P, V)
    nll, hit = token_nll(logits, targets)  # (P,), (P,)
    loss = nll.sum() / max(targets.numel(), 1)
    return loss, {"clm_loss": mean_metric(loss), "clm_accuracy": hits(hit)}, positions.numel()


class GPTBERTObjective(Objective):
    """kind gptbert: causal rows beside masked next-token rows, in one forward pass. With
    ``evaluation``, every row is scored both ways (two passes) instead of the split."""

    def __init__(self, cfg: ObjectiveConfig, evaluation: bool = False):
        self.cfg, self.evaluation = cfg, evaluation

    def __call__(self, model, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        ids = batch["input_ids"]
        B = ids.shape[0]
        if self.evaluation:
            c_loss, metrics, P = causal_pass(model, batch)
            m_loss, m_metrics, M = self._split_pass(model, batch, generator, 0)
            metrics.update(m_metrics)
            loss = (c_loss + m_loss) / 2
            metrics["loss"] = mean_metric(loss)
            return ObjectiveOutput(loss=loss, metrics=metrics, num_masked=P + M, tokens=ids.numel())
        loss, metrics, n = self._split_pass(model, batch, generator, round(self.cfg.causal_share * B))
        metrics["loss"] = mean_metric(loss)
        return ObjectiveOutput(loss=loss, metrics=metrics, num_masked=n, tokens=ids.numel())

    def _split_pass(self, model, batch, generator, n_causal: int) -> tuple[torch.Tensor, dict, int]:
        """Rows [0, n_causal) causal, the rest masked: (mean loss over all predictions, metrics, count)."""
        ids, tt, seq = batch["input_ids"], batch.get("token_type_ids"), batch.get("sequence_ids")
        am = _real(batch)
        B, T = ids.shape
        causal = torch.arange(B, device=ids.device) < n_causal  # (B,)
        c_pos = next_token_positions(ids, am, causal, seq)  # (P,)
        c_targets = ids.view(-1).index_select(0, c_pos + 1)
        inputs, m_read, m_targets = ids, c_pos[:0], c_targets[:0]
        if n_causal < B:
            rest = {k: v[n_causal:] for k, v in batch.items() if k in ("input_ids", "word_start")}
            m = mask_batch(rest, self.cfg, model.encoder.config.vocab_size, generator)
            at = m.positions + n_causal * T  # (M,) flat indices into the whole batch
            # read at t - 1: never at a row's first position, nor across a sequence boundary
            keep = at % T != 0
            if seq is not None:
                flat_seq = seq.reshape(-1)
                keep &= flat_seq.index_select(0, at) == flat_seq.index_select(0, (at - 1).clamp(min=0))
            inputs = torch.cat([ids[:n_causal], m.input_ids])  # (B, T)
            m_read, m_targets = at[keep] - 1, m.targets[keep]
        positions = torch.cat([c_pos, m_read])  # (P + M,)
        masks = attention_masks(am, causal, seq)
        logits = model(inputs, masks, tt, positions=head_positions(model, positions)).logits  # (P + M, V)
        targets = torch.cat([c_targets, m_targets])  # (P + M,)
        nll, hit = token_nll(logits, targets)  # (P + M,) one pass over the logits serves all three means
        loss = nll.sum() / max(targets.numel(), 1)
        P = c_pos.numel()
        metrics = {}
        if P:
            metrics["clm_loss"] = mean_metric(nll[:P].mean())
            metrics["clm_accuracy"] = hits(hit[:P])
        if m_targets.numel():
            metrics["mlm_loss"] = mean_metric(nll[P:].mean())
            metrics["mlm_accuracy"] = hits(hit[P:])
        return loss, metrics, positions.numel()


class CLMThenMLMObjective(Objective):
    """kind clm_then_mlm: kind clm before optimizer step causal_steps, BERT's MLM from it on. With
    ``evaluation``, both are scored on every batch."""

    def __init__(self, cfg: ObjectiveConfig, evaluation: bool = False):
        self.cfg, self.evaluation = cfg, evaluation
        self.mlm = MLMObjective(cfg)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.mlm.state_dict()

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
        self.mlm.load_state_dict(tensors, device)

    def __call__(self, model, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        ids = batch["input_ids"]
        if self.evaluation:
            out = self.mlm(model, batch, generator)
            c_loss, metrics, P = causal_pass(model, batch)
            out.metrics.update(metrics)
            return out
        if not self.cfg.causal_phase(step):
            return self.mlm(model, batch, generator, step)
        loss, metrics, P = causal_pass(model, batch)
        metrics["loss"] = mean_metric(loss)
        return ObjectiveOutput(loss=loss, metrics=metrics, num_masked=P, tokens=ids.numel())


def head_positions(model, read: torch.Tensor) -> torch.Tensor:
    """The positions to give the network for its outputs at ``read`` (P,): a next-token head (GPT-BERT's,
    ModelConfig.next_token_head) names the tokens it predicts, one position later; a plain one, ``read``."""
    return read + 1 if model.config.next_token_head else read


def _real(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    am = batch.get("attention_mask")
    return am if am is not None else torch.ones_like(batch["input_ids"])
