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
from encoderlab.data import masking as data_masking
from encoderlab.data.masking import MaskingConfig

# clm: causal next-token prediction; gptbert: GPT-BERT's masked + causal next-token prediction;
# clm_then_mlm: causal for the first causal_steps optimizer steps, then MLM (objectives/causal.py).
Kind = Literal["mlm", "rtd", "clm", "gptbert", "clm_then_mlm"]
CAUSAL_KINDS = ("clm", "gptbert", "clm_then_mlm")
# electra: the paper's RTD; replace_mlm / all_tokens_mlm: the paper's MLM ablations (see rtd.py).
RTDVariant = Literal["electra", "replace_mlm", "all_tokens_mlm"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObjectiveConfig(Config):
    kind: Kind = "mlm"
    # ---- masking (encoderlab.data.masking): rate, [MASK]/random/keep fractions, token or
    # whole-word/span/n-gram schemes. BERT's 15% with 80/10/10 by default.
    masking: MaskingConfig = dataclasses.field(default_factory=MaskingConfig)
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
    # False: after the switch both networks keep training jointly; with the copy above this is a
    # warm start of the discriminator from the MLM (not the paper's two-stage, which freezes).
    two_stage_freeze_generator: bool = True
    # All-Tokens-MLM's copy mechanism (the paper's): a sigmoid gate D per token, the output
    # p = D * 1[y = input] + (1 - D) * softmax, so copying an unreplaced input has an output of its
    # own and the softmax is left to predict. None (unset) and False: no gate, a plain softmax.
    copy_mechanism: bool | None = None
    # ---- causal kinds (objectives/causal.py). gptbert: the share of each micro-batch's rows trained
    # causally (the first round(causal_fraction * B) rows), the rest by masked next-token prediction.
    # clm_then_mlm: the share of the run's optimizer steps that are causal (the switch is by steps).
    # None: one half (None, not 0.5, so that the recipes of the other kinds keep their fingerprints).
    causal_fraction: float | None = None
    # clm_then_mlm: the causal phase's length in optimizer steps. None: round(causal_fraction x the
    # steps the run's budget allows), resolved when the run starts and saved in its config.yaml.
    causal_steps: int | None = None

    def applicable(self) -> dict:
        """The fields that act on this kind, as YAML would hold them: what a report shows of a variant's
        objective (an MLM's ``disc_weight: 50`` or a causal run's masking is a default that does nothing)."""
        d = self.to_dict()
        keep = ["kind", *([] if self.kind == "clm" else ["masking"])]
        if self.kind == "mlm":
            keep += ["sentence_loss"] + (["sentence_weight"] if self.sentence_loss else [])
        elif self.kind == "rtd":
            keep += ["variant", "disc_weight", "temperature", "disc_positions", "two_stage_generator_steps"]
            if self.two_stage_generator_steps:
                keep += ["two_stage_init_discriminator", "two_stage_freeze_generator"]
            if self.variant == "all_tokens_mlm":
                keep.append("copy_mechanism")
        if self.kind in ("gptbert", "clm_then_mlm"):
            keep.append("causal_fraction")
        if self.kind == "clm_then_mlm":
            keep.append("causal_steps")
        keep += [k for k in ("mask_token_id", "special_token_ids") if d[k] is not None]
        out = {k: d[k] for k in keep}
        if "masking" in out:  # a scheme's own parameters only
            own = {"span": ("span_p", "span_max"), "ngram": ("ngram_max",), "proposal": ("proposal_uniform",)}
            scheme_keys = ("span_p", "span_max", "ngram_max", "proposal_uniform")
            out["masking"] = {k: x for k, x in out["masking"].items()
                              if k not in scheme_keys or k in own.get(self.masking.scheme, ())}
        return out

    def validate(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if self.two_stage_generator_steps < 0:
            raise ConfigError("two_stage_generator_steps must be >= 0")
        if self.kind == "mlm" and self.variant != "electra":
            raise ConfigError(f"variant {self.variant!r} is an RTD ablation: set kind: rtd")
        if self.copy_mechanism and self.variant != "all_tokens_mlm":
            raise ConfigError(f"copy_mechanism is All-Tokens-MLM's (variant: all_tokens_mlm), not {self.variant!r}'s")
        if self.kind == "rtd" and self.masking.scheme == "proposal":
            raise ConfigError("masking scheme 'proposal' is an MLM objective's (kind: mlm); ELECTRA's generator "
                              "already chooses its replacements")
        if self.causal_fraction is not None and not 0.0 <= self.causal_fraction <= 1.0:
            raise ConfigError(f"causal_fraction must be in [0, 1], got {self.causal_fraction}")
        if self.causal_steps is not None and self.causal_steps < 0:
            raise ConfigError(f"causal_steps must be >= 0, got {self.causal_steps}")
        if self.kind in CAUSAL_KINDS and self.masking.scheme == "proposal":
            raise ConfigError(f"masking scheme 'proposal' is kind mlm's, not {self.kind!r}'s")
        if self.kind in CAUSAL_KINDS and self.variant != "electra":
            raise ConfigError(f"variant {self.variant!r} is an RTD ablation: set kind: rtd")

    @property
    def causal_share(self) -> float:
        """causal_fraction, one half where unset."""
        return 0.5 if self.causal_fraction is None else self.causal_fraction

    def causal_phase(self, step: int) -> bool:
        """clm_then_mlm: whether optimizer step ``step`` is in the causal phase (causal_steps unresolved:
        a step before the run's plan, e.g. timing one, counts as causal)."""
        return self.causal_steps is None or step < self.causal_steps

    def rtd_stage(self, step: int) -> str:
        """What trains at ``step``: joint, generator (alone) or discriminator (generator frozen)."""
        n = self.two_stage_generator_steps
        if n == 0:
            return "joint"
        if step < n:
            return "generator"
        return "discriminator" if self.two_stage_freeze_generator else "joint"


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


class Objective:
    """What the trainer asks of every objective, and nothing else (style habit 13): the loss of a
    batch, a hook at the start of each optimizer step, and the objective's own state.

    The state is flat named tensors: a trainable part the objective owns (the mask proposal) with
    its optimizer moments. The trainer saves them in its checkpoint under the prefix "objective."
    and hands them back, prefix removed, on resume. The defaults are for an objective with no state
    and nothing to do between steps; FLOPs are counted from the config in train/flops.py (see
    docs/architecture.md for why they are not a method here).
    """

    cfg: ObjectiveConfig

    def __call__(self, model, batch: dict[str, torch.Tensor], generator: torch.Generator,
                 step: int = 0) -> ObjectiveOutput:
        """The loss and metrics of one micro-batch at optimizer step ``step``."""
        raise NotImplementedError

    def on_step_start(self, model, step: int) -> None:
        """Called before the micro-batches of optimizer step ``step`` (RTD's two-stage switch)."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The objective's own tensors to checkpoint (names without the "objective." prefix)."""
        return {}

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
        """Restore what state_dict() saved; an objective without state ignores what it is given
        (as before this interface: a checkpoint's "objective." tensors were read only by one
        that had them)."""


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


def mask_batch(batch: dict[str, torch.Tensor], cfg: ObjectiveConfig, vocab_size: int,
               generator: torch.Generator, inclusion: torch.Tensor | None = None) -> Masked:
    """Mask a batch with encoderlab.data.masking and return the flat masked positions (the sparse
    MLM head computes logits there only). Special tokens and padding are never chosen.
    ``inclusion``: the proposal scheme's (B, T) probabilities."""
    if cfg.mask_token_id is None or cfg.special_token_ids is None:
        raise ConfigError("objective.mask_token_id / special_token_ids are not set (no tokenizer to take them from)")
    ids = batch["input_ids"]
    masked, labels = data_masking.mask_tokens(
        ids, batch.get("word_start"), cfg.special_token_ids, vocab_size, cfg.mask_token_id, cfg.masking, generator,
        inclusion=inclusion)
    positions = (labels.view(-1) != -100).nonzero().squeeze(1)  # (M,)
    return Masked(input_ids=masked, positions=positions, targets=ids.view(-1).index_select(0, positions))


def accuracy_sums(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return hit_sums(logits.detach().argmax(-1), targets)


def hit_sums(predicted: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return hits(predicted == targets)


def hits(hit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An accuracy metric from (M,) bool hits: (hits, M)."""
    return ratio(hit.sum(), torch.tensor(float(hit.numel()), device=hit.device))


def with_defaults(cfg: ObjectiveConfig, mask_token_id: int, special_token_ids: tuple[int, ...]) -> ObjectiveConfig:
    """Fill token ids left as None from a tokenizer's."""
    changes = {}
    if cfg.mask_token_id is None:
        changes["mask_token_id"] = mask_token_id
    if cfg.special_token_ids is None:
        changes["special_token_ids"] = tuple(special_token_ids)
    return dataclasses.replace(cfg, **changes) if changes else cfg
