"""What every objective shares: its config, its typed output, BERT-style masking and metric sums.

Shape letters: B batch, T length, V vocabulary, M masked positions.

Metrics are kept as (numerator, denominator) tensor pairs so that the trainer can add them over
steps and ranks without a host sync, and divide only when it logs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import torch

from encoderlab.config import Config, ConfigError

Kind = Literal["mlm", "rtd"]
# electra: the paper's RTD; replace_mlm / all_tokens_mlm: the paper's MLM ablations (see rtd.py).
RTDVariant = Literal["electra", "replace_mlm", "all_tokens_mlm"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObjectiveConfig(Config):
    kind: Kind = "mlm"
    # ---- masking (BERT): rate of maskable tokens chosen; of those, mask_token_prob get [MASK],
    # random_token_prob a uniform random id, the rest keep their token.
    mask_rate: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    # Token ids: None means "take them from the tokenizer" (the trainer fills them in).
    mask_token_id: int | None = None
    special_token_ids: tuple[int, ...] | None = None  # never masked ([CLS], [SEP], [PAD], ...)
    # ---- MLM: NSP (BERT) / SOP (ALBERT) loss when the network has a sentence head and the batch
    # carries sentence_label.
    sentence_loss: bool = True
    sentence_weight: float = 1.0
    # ---- RTD (ELECTRA)
    variant: RTDVariant = "electra"
    disc_weight: float = 50.0  # lambda
    temperature: float = 1.0  # generator sampling temperature
    # all: discriminator loss over every real token; masked: only at masked positions (ELECTRA-15%).
    disc_positions: Literal["all", "masked"] = "all"
    # Two-stage training: the generator alone for this many steps, then it is frozen and only the
    # discriminator trains. 0 means joint training (the paper's default).
    two_stage_generator_steps: int = 0
    # At the switch, copy the generator's weights into the discriminator when their shapes allow
    # (the paper's two-stage setting uses an equal-size generator for this).
    two_stage_init_discriminator: bool = False

    def validate(self) -> None:
        if not 0 < self.mask_rate < 1:
            raise ConfigError(f"mask_rate must be in (0, 1), got {self.mask_rate}")
        if self.mask_token_prob < 0 or self.random_token_prob < 0 or self.mask_token_prob + self.random_token_prob > 1:
            raise ConfigError("mask_token_prob and random_token_prob must be >= 0 and sum to <= 1")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if self.two_stage_generator_steps < 0:
            raise ConfigError("two_stage_generator_steps must be >= 0")
        if self.kind == "mlm" and self.variant != "electra":
            raise ConfigError(f"variant {self.variant!r} is an RTD ablation: set kind: rtd")

    def needs_pair(self) -> bool:
        return self.kind == "rtd"


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor  # scalar, what backward() runs on
    # name -> (numerator, denominator) as 0-d tensors; metric = sum(num) / sum(den)
    metrics: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    num_masked: int = 0  # M, known on the host from the masking's shapes (no sync)
    tokens: int = 0  # B * T
    num_predicted: int | None = None  # All-Tokens-MLM: real tokens the MLM predicts (FLOPs)
    # RTD: (logits (B, T), is_replaced (B, T), where (B, T) bool) for AUC at evaluation time
    scores: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None


def mean_metric(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A per-step scalar (a loss) logged as its mean over steps."""
    v = value.detach().float()
    return v, torch.ones((), device=v.device)


def ratio(num: torch.Tensor, den: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return num.detach().float(), den.detach().float()


@dataclass
class Masked:
    input_ids: torch.Tensor  # (B, T) with [MASK] / random / kept tokens at the chosen positions
    positions: torch.Tensor  # (M,) flat indices into B*T, ascending
    targets: torch.Tensor  # (M,) original ids at those positions


def maskable(input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
             special_token_ids: tuple[int, ...]) -> torch.Tensor:
    """(B, T) bool: real, non-special tokens."""
    ok = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    for t in special_token_ids:
        ok &= input_ids != t
    return ok


def mask_tokens(input_ids: torch.Tensor, candidates: torch.Tensor, cfg: ObjectiveConfig, vocab_size: int,
                generator: torch.Generator) -> Masked:
    """BERT masking: each candidate is chosen with probability mask_rate; chosen ones become [MASK]
    (80%), a random id (10%) or stay (10%) by default. Losses divide by max(M, 1), so a batch with
    nothing chosen gives a zero loss, not NaN."""
    if cfg.mask_token_id is None:
        raise ConfigError("objective.mask_token_id is not set (no tokenizer given to take it from)")
    dev = input_ids.device
    u = torch.rand(input_ids.shape, generator=generator, device=dev)  # (B, T)
    chosen = (u < cfg.mask_rate) & candidates
    positions = chosen.view(-1).nonzero().squeeze(1)  # (M,)
    targets = input_ids.view(-1).index_select(0, positions)
    r = torch.rand(positions.shape, generator=generator, device=dev)  # (M,)
    rand_ids = torch.randint(0, vocab_size, positions.shape, generator=generator, device=dev)
    new = torch.where(r < cfg.mask_token_prob, torch.full_like(targets, cfg.mask_token_id), targets)
    new = torch.where((r >= cfg.mask_token_prob) & (r < cfg.mask_token_prob + cfg.random_token_prob),
                      rand_ids, new)
    masked = input_ids.clone()
    masked.view(-1)[positions] = new
    return Masked(input_ids=masked, positions=positions, targets=targets)


def accuracy_sums(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    correct = (logits.detach().argmax(-1) == targets).sum()
    return ratio(correct, torch.tensor(float(targets.numel()), device=targets.device))


def with_defaults(cfg: ObjectiveConfig, mask_token_id: int, special_token_ids: tuple[int, ...]) -> ObjectiveConfig:
    """Fill token ids left as None from a tokenizer's."""
    changes = {}
    if cfg.mask_token_id is None:
        changes["mask_token_id"] = mask_token_id
    if cfg.special_token_ids is None:
        changes["special_token_ids"] = tuple(special_token_ids)
    return dataclasses.replace(cfg, **changes) if changes else cfg
