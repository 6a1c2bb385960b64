"""ModelSpec's encoder options come from one list (models/spec.py ENCODER_OPTIONS): each is a field
of the spec, typed as EncoderConfig types it, set by the resolution on both networks of a pair, and
a family-wide option a study's base hands to its variants. A new option added to the list (and to
EncoderConfig and the core) is covered here without a change to this file
(for an option typed as a Literal, a bool or an int)."""

import dataclasses
from typing import Literal, Optional, get_args, get_origin, get_type_hints

import pytest

from encoderlab.models.spec import ENCODER_OPTIONS, FAMILY_MODEL_FIELDS, ModelSpec
from encoderlab.nn.config import EncoderConfig
from encoderlab.study.plan import family_model
from encoderlab.train.config import InitConfig, PretrainConfig
from encoderlab.train.config import ModelSpec as ReExported
from encoderlab.train.init import resolve_model

ENCODER_TYPES = get_type_hints(EncoderConfig)
OWN_FIELDS = {"preset", "config", "generator_multiplier", "generator_by", "embedding_sharing", "vocab_size",
              "dropout", "generator_layers"}


def _other(name: str, value):
    """A value of EncoderConfig's type for ``name`` unlike ``value`` (the preset's)."""
    tp = ENCODER_TYPES[name]
    if get_origin(tp) is Literal:
        return next(v for v in get_args(tp) if v != value)
    if tp is bool:
        return not value
    return value + 1


def test_the_spec_has_one_field_per_encoder_option_typed_as_the_encoder_types_it():
    fields = {f.name: f for f in dataclasses.fields(ModelSpec)}
    assert set(fields) == OWN_FIELDS | set(ENCODER_OPTIONS)
    hints = get_type_hints(ModelSpec)
    for name in ENCODER_OPTIONS:
        assert fields[name].default is None and hints[name] == Optional[ENCODER_TYPES[name]]  # noqa: UP045
    assert ReExported is ModelSpec and get_type_hints(PretrainConfig)["model"] is ModelSpec


@pytest.mark.parametrize("name", ENCODER_OPTIONS)
def test_each_encoder_option_is_resolved_on_both_networks_and_handed_down_by_a_study(name):
    plain = resolve_model(ModelSpec(preset="electra-tiny"), InitConfig(), 99)
    value = _other(name, getattr(plain.encoder, name))
    spec = ModelSpec(preset="electra-tiny", **{name: value})
    mc = resolve_model(spec, InitConfig(), 99)
    assert getattr(mc.encoder, name) == value and getattr(mc.generator, name) == value
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    assert name in FAMILY_MODEL_FIELDS
    assert getattr(family_model(spec, ModelSpec(preset="bert-tiny")), name) == value
    own = getattr(plain.encoder, name)
    assert getattr(family_model(spec, ModelSpec(preset="bert-tiny", **{name: own})), name) == own  # the variant's own
