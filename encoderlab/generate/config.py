"""The settings of UniLM-style generation: fine-tuning an MLM as a seq2seq model, then decoding.

What ``key=value`` overrides on ``encoderlab generate train`` set; saved beside every fine-tuned
model (``generation.yaml``) and every result, so decoding later uses the lengths it was trained with.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from encoderlab.config import ConfigError
from encoderlab.tune.config import TuneSettings

# Which network of a checkpoint becomes the generator. auto: the MLM of a BERT/ALBERT checkpoint, or
# the body of a checkpoint without an MLM head (given a fresh one); an ELECTRA pair must be told
# which half. random: fresh weights in the shape of the network auto would take (for an ELECTRA pair:
# the discriminator's), the no-pretraining control.
Network = Literal["auto", "mlm", "generator", "discriminator", "random"]
# How a target token is predicted. mask: UniLM's, at an appended [MASK] (an MLM's way). next: from the
# hidden state of the token before it, as a causal LM does (the way a checkpoint pretrained with a
# causal objective, kind gptbert / clm / clm_then_mlm, reads its own head; GPT-BERT's masked rows read
# at t - 1 too): every target token predicted in training, teacher-forced, mask_prob unused.
Decoding = Literal["mask", "next"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationConfig(TuneSettings):
    """Defaults follow UniLM's seq2seq fine-tuning (Dong et al. 2019, section 3.2): 70% of the
    target tokens masked, label smoothing 0.1; the learning rate by model size as for fine-tuning
    (learning_rate, warmup, batch_size and the other keys shared with it are TuneSettings')."""

    network: Network = "auto"
    decoding: Decoding = "mask"
    epochs: float = 3.0
    max_steps: int | None = None  # caps the steps the epochs give
    mask_prob: float = 0.7  # fraction of target tokens (final [SEP] included) masked and predicted
    label_smoothing: float = 0.1
    max_source_length: int = 64  # source tokens, [CLS] and [SEP] not counted; capped by the positions
    max_target_length: int = 24  # target tokens including the final [SEP]: also the decoding limit
    beam_size: int = 4  # dev/test are decoded greedily and, when > 1, with a beam this wide
    length_penalty: float = 1.0  # beam hypotheses ranked by log p / length ** length_penalty
    eval_batch_size: int = 64
    seed: int = 0
    # max_train_examples: the first N (the task's order is already by article hash)

    def validate(self) -> None:
        super().validate()
        if not 0 < self.mask_prob <= 1:
            raise ConfigError(f"mask_prob must be in (0, 1], got {self.mask_prob}")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.max_source_length < 1 or self.max_target_length < 2:
            raise ConfigError("max_source_length must be >= 1 and max_target_length >= 2 (a token and [SEP])")
        if self.beam_size < 1 or self.batch_size < 1 or self.eval_batch_size < 1:
            raise ConfigError("beam_size, batch_size and eval_batch_size must be >= 1")
        if self.epochs <= 0 and not self.max_steps:
            raise ConfigError(f"epochs must be > 0, got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1 or null, got {self.max_steps}")
