"""How a recipe names its model, and its resolution to a ModelConfig.

A :class:`ModelSpec` is a preset name with its options, or a full ModelConfig; with neither, the
model is an earlier checkpoint's (continued pretraining: train/init.py reads that config and hands
it to :meth:`ModelSpec.resolve`, since reading checkpoints sits above this package).

``ENCODER_OPTIONS`` is the one list of encoder fields a recipe may set for every network of its
model. ModelSpec's fields (typed as EncoderConfig types them), the resolution and a study's
family-wide options (``FAMILY_MODEL_FIELDS``, study/plan.py) all derive from it: a new encoder
option is a field of EncoderConfig (nn/config.py), its code in the core, and its name here.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional, get_type_hints

from encoderlab.config import Config, ConfigError
from encoderlab.models.config import ModelConfig
from encoderlab.models.presets import preset
from encoderlab.nn.config import EncoderConfig

# EncoderConfig fields set, when given, for both networks of a pair (None: the preset's). A
# "bert-modern" is bert-* with norm pre, position rope, gated_ffn, bias false; max_position_embeddings
# None is the preset's 512; num_layers sets every network's depth (generator_layers then an ELECTRA
# generator's alone).
ENCODER_OPTIONS = ("max_position_embeddings", "norm", "position", "gated_ffn", "bias", "hidden_act", "num_layers")

# The model fields a study's base may set for every variant (the recipe family's architecture-wide
# options); a variant that sets one itself keeps its own.
FAMILY_MODEL_FIELDS = ("dropout", *ENCODER_OPTIONS)


def _with_encoder_options(cls: type) -> type:
    """Add one ``name: <EncoderConfig's type> | None = None`` field per ENCODER_OPTIONS entry."""
    hints = get_type_hints(EncoderConfig)
    for name in ENCODER_OPTIONS:
        cls.__annotations__[name] = Optional[hints[name]]  # noqa: UP045 (a runtime type, not an annotation)
        setattr(cls, name, None)
    return cls


@dataclasses.dataclass(frozen=True, kw_only=True)
@_with_encoder_options
class ModelSpec(Config):
    """Either a preset name (with its options) or a full ModelConfig; with neither, the model is the
    one of ``init.checkpoint`` (continued pretraining). vocab_size None: the tokenizer's. Also one
    field per ENCODER_OPTIONS entry (above)."""

    preset: str | None = None
    config: ModelConfig | None = None
    generator_multiplier: float | None = None
    generator_by: Literal["width", "depth"] = "width"
    embedding_sharing: Literal["none", "shared", "gdes"] = "shared"
    vocab_size: int | None = None
    dropout: float | None = None  # None: the preset's; hidden and attention dropout alike
    # An ELECTRA generator's depth alone, after num_layers (a deep discriminator beside a shallow
    # generator, the largest AUC gain of issue 18's ablations: docs/benchmarks.md "Issue 18,
    # ablations 4 and 5").
    generator_layers: int | None = None

    def validate(self) -> None:
        if self.preset is not None and self.config is not None:
            raise ConfigError("model: give either preset or config, not both")
        for name in ("num_layers", "generator_layers"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"model.{name} must be >= 1, got {getattr(self, name)}")

    def resolve(self, vocab_size: int, source: ModelConfig | None = None, *,
                allow_resize_embeddings: bool = False) -> ModelConfig:
        """The ModelConfig: the config, else the preset, else ``source`` (an earlier checkpoint's),
        with this spec's options applied. A config's or source's vocabulary other than the
        tokenizer's ``vocab_size`` is refused unless ``allow_resize_embeddings``."""
        if self.config is not None:
            mc = self.config
        elif self.preset is not None:
            mc = preset(self.preset, generator_multiplier=self.generator_multiplier, generator_by=self.generator_by,
                        embedding_sharing=self.embedding_sharing, vocab_size=self.vocab_size or vocab_size)
        elif source is not None:
            mc = source
        else:
            raise ConfigError("model: give a preset, a config, or init.checkpoint / init.generator+discriminator")
        changes = {name: getattr(self, name) for name in ENCODER_OPTIONS if getattr(self, name) is not None}
        if self.dropout is not None:
            changes["hidden_dropout"] = changes["attention_dropout"] = self.dropout
        if self.preset is None and mc.encoder.vocab_size != vocab_size:
            if not allow_resize_embeddings:
                raise ConfigError(
                    f"the model's vocabulary ({mc.encoder.vocab_size}) differs from the tokenizer's ({vocab_size}): "
                    "a new tokenizer is refused unless init.allow_resize_embeddings=true (embeddings are then resized)")
            changes["vocab_size"] = vocab_size
        if changes:
            enc = dataclasses.replace(mc.encoder, **changes)
            gen = dataclasses.replace(mc.generator, **changes) if mc.generator is not None else None
            mc = dataclasses.replace(mc, encoder=enc, generator=gen)
        if self.generator_layers is not None:
            if mc.generator is None:
                raise ConfigError(f"model.generator_layers: the {mc.family} model has no generator (an ELECTRA "
                                  "pair has)")
            mc = dataclasses.replace(mc, generator=dataclasses.replace(mc.generator, num_layers=self.generator_layers))
        return mc
