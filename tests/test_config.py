"""Typed configs: YAML round trip, unknown keys named with the valid ones, overrides, validation."""

from __future__ import annotations

import pytest

from encoderlab.config import ConfigError
from encoderlab.models.config import ModelConfig
from encoderlab.models.presets import preset, preset_names
from encoderlab.nn.config import EncoderConfig
from tests.conftest import tiny_encoder


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_round_trips_through_yaml(name, tmp_path):
    cfg = preset(name)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    cfg.to_yaml(tmp_path / "c.yaml")
    assert ModelConfig.from_yaml(tmp_path / "c.yaml") == cfg


def test_unknown_key_lists_valid_keys(tmp_path):
    d = tiny_encoder().to_dict()
    d["hiden_size"] = 3
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['hiden_size'\].*valid keys: .*'hidden_size'"):
        EncoderConfig.from_dict(d)
    nested = preset("bert-tiny").to_dict()
    nested["encoder"]["nheads"] = 2
    p = tmp_path / "m.yaml"
    import yaml
    p.write_text(yaml.safe_dump(nested))
    with pytest.raises(ConfigError, match=r"m\.yaml\.encoder: unknown key"):
        ModelConfig.from_yaml(p)


def test_type_and_value_errors_name_the_key():
    d = tiny_encoder().to_dict()
    with pytest.raises(ConfigError, match="num_layers: expected an integer"):
        EncoderConfig.from_dict({**d, "num_layers": "two"})
    with pytest.raises(ConfigError, match="hidden_act: 'tanh' is not one of"):
        EncoderConfig.from_dict({**d, "hidden_act": "tanh"})
    with pytest.raises(ConfigError, match="not divisible"):
        EncoderConfig.from_dict({**d, "num_heads": 5})
    with pytest.raises(ConfigError, match="multiple of num_groups"):
        EncoderConfig.from_dict({**d, "sharing": "all", "num_groups": 3, "num_layers": 4})


def test_configs_are_frozen_and_keyword_only():
    cfg = tiny_encoder()
    with pytest.raises(AttributeError):
        cfg.hidden_size = 3
    with pytest.raises(TypeError):
        EncoderConfig(99, 32, 2, 4, 37)


def test_dotted_overrides():
    cfg = preset("electra-small").with_overrides(["encoder.num_layers=4", "embedding_sharing=gdes",
                                                   "generator.hidden_dropout=0"])
    assert cfg.encoder.num_layers == 4 and cfg.embedding_sharing == "gdes"
    assert cfg.generator.hidden_dropout == 0.0
    with pytest.raises(ConfigError, match="unknown key"):
        cfg.with_overrides(["encoder.depth=3"])
    with pytest.raises(ConfigError, match="key=value"):
        cfg.with_overrides(["encoder.num_layers"])


def test_electra_sharing_needs_matching_embeddings():
    cfg = preset("electra-small")
    bad = cfg.generator.replace(embedding_size=64)
    with pytest.raises(ConfigError, match="equal emb_size"):
        cfg.replace(generator=bad)
    assert cfg.replace(generator=bad, embedding_sharing="none").generator.emb_size == 64
