"""Masked language modelling (BERT, RoBERTa), with NSP (BERT) or SOP (ALBERT) when the network has a
sentence head and the batch carries ``sentence_label``.

Shape letters: B batch, T length, V vocabulary, M masked positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from encoderlab.data.masking import maskable_positions, proposal_inclusion
from encoderlab.objectives.base import (
    Objective,
    ObjectiveConfig,
    ObjectiveOutput,
    accuracy_sums,
    hits,
    mask_batch,
    mean_metric,
)
from encoderlab.objectives.proposal import MaskProposal
from encoderlab.objectives.token_ce import token_nll


class MLMObjective(Objective):
    """BERT's pretraining loss on a MaskedLM: MLM at the masked positions (sparse head) [+ NSP/SOP];
    with masking scheme "proposal", positions come from a mask proposal and the MLM loss is the
    importance-weighted estimate (objectives/proposal.py)."""

    def __init__(self, cfg: ObjectiveConfig):
        self.cfg = cfg
        self.proposal = MaskProposal() if cfg.masking.scheme == "proposal" else None

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.proposal.state_dict() if self.proposal is not None else {}

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
        if self.proposal is not None:
            self.proposal.load_state_dict(tensors, device)

    def __call__(self, model, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        ids, am, tt = batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
        vocab = model.encoder.config.vocab_size
        inclusion = None
        if self.proposal is not None:
            maskable = maskable_positions(ids, self.cfg.special_token_ids)  # (B, T)
            inclusion = proposal_inclusion(self.proposal.scores(ids, vocab), maskable, self.cfg.masking)
        m = mask_batch(batch, self.cfg, vocab, generator, inclusion)
        out = model(m.input_ids, am, tt, positions=m.positions)
        token_loss, hit = token_nll(out.logits, m.targets)  # logits (M, V); (M,), (M,)
        loss = token_loss.sum() / max(m.targets.numel(), 1)
        metrics = {"mlm_loss": mean_metric(loss), "mlm_accuracy": hits(hit)}
        if inclusion is not None:
            # Horvitz-Thompson: sum over masked of loss / pi, over the maskable count: in expectation
            # the mean loss over all maskable tokens, which is what uniform masking estimates.
            pi = inclusion.reshape(-1).index_select(0, m.positions)  # (M,)
            loss = (token_loss / pi).sum() / maskable.sum().clamp(min=1)
            metrics["mlm_loss_weighted"] = mean_metric(loss)
            metrics["proposal_error"] = mean_metric(self.proposal.update(ids, m.positions, token_loss))
            metrics["proposal_max_weight"] = mean_metric((self.cfg.masking.rate / pi).max() if pi.numel()
                                                         else torch.zeros(()))
        if self.cfg.sentence_loss and out.sentence_logits is not None and "sentence_label" in batch:
            name = model.config.sentence_objective  # nsp | sop
            labels = batch["sentence_label"]
            s_loss = F.cross_entropy(out.sentence_logits.float(), labels)  # (B, 2)
            loss = loss + self.cfg.sentence_weight * s_loss
            metrics[f"{name}_loss"] = mean_metric(s_loss)
            metrics[f"{name}_accuracy"] = accuracy_sums(out.sentence_logits, labels)
        metrics["loss"] = mean_metric(loss)
        return ObjectiveOutput(loss=loss, metrics=metrics, num_masked=m.positions.numel(), tokens=ids.numel())
