"""What a model is: a family, an encoder config, and which heads sit on it."""

from __future__ import annotations

import dataclasses
from typing import Literal

from encoderlab.config import Config, ConfigError
from encoderlab.nn.config import EncoderConfig

Family = Literal["bert", "albert", "electra"]
# encoder: no head; mlm: MLM head; pretraining: MLM + sentence-pair head (NSP for BERT, SOP
# for ALBERT); discriminator: RTD head; electra: generator (MLM) + discriminator (RTD) pair;
# sequence_classification / token_classification: fine-tuning heads.
Head = Literal[
    "encoder", "mlm", "pretraining", "discriminator", "electra", "sequence_classification",
    "token_classification",
]
EmbeddingSharing = Literal["none", "shared", "gdes"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(Config):
    family: Family
    head: Head
    encoder: EncoderConfig
    # ELECTRA pair only: the generator's encoder, and how it shares its token, position and
    # token-type tables with the discriminator (none | shared | gdes: DeBERTa-v3's
    # gradient-disentangled sharing, here applied to all three tables).
    generator: EncoderConfig | None = None
    embedding_sharing: EmbeddingSharing = "shared"
    # GPT-BERT (objective kind gptbert): the MLM head predicts each token from the output at the position
    # before it, so MaskedLM's positions name the tokens predicted and the head reads one earlier. Set
    # by build_networks for kind gptbert and kept in the checkpoint, so fill-mask and pseudo-log-
    # likelihoods read such a model where it was trained. None (unset) and False: at the position itself.
    next_token_head: bool | None = None
    num_labels: int = 2  # classification heads; 1 means regression
    classifier_dropout: float = 0.1

    @property
    def sentence_objective(self) -> str:
        return "sop" if self.family == "albert" else "nsp"

    def validate(self) -> None:
        if self.head == "electra":
            if self.generator is None:
                raise ConfigError("head 'electra' needs a generator encoder config")
            g, d = self.generator, self.encoder
            if self.embedding_sharing != "none":
                for name in ("emb_size", "vocab_size", "max_position_embeddings", "type_vocab_size"):
                    if getattr(g, name) != getattr(d, name):
                        raise ConfigError(
                            f"embedding_sharing={self.embedding_sharing!r} needs equal {name} in generator "
                            f"({getattr(g, name)}) and discriminator ({getattr(d, name)})"
                        )
        if self.num_labels < 1:
            raise ConfigError(f"num_labels must be >= 1, got {self.num_labels}")

    def with_head(self, head: str, **changes) -> ModelConfig:
        return dataclasses.replace(self, head=head, **changes)
