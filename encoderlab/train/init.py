"""Resolving a recipe's model, and continued pretraining from released or earlier weights."""

from __future__ import annotations

import torch
from torch import nn

from encoderlab.checkpoint import load_config, load_model
from encoderlab.config import ConfigError
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import Pair, deployed, gdes_deltas
from encoderlab.models.spec import ModelSpec
from encoderlab.train.config import InitConfig


def resolve_model(spec: ModelSpec, init: InitConfig, vocab_size: int) -> ModelConfig:
    """The recipe's ModelConfig (ModelSpec.resolve); with neither a preset nor a config, the model
    of init.checkpoint, or an ELECTRA pair of init.generator and init.discriminator."""
    source = None
    if spec.config is None and spec.preset is None:
        if init.checkpoint is not None:
            source = load_config(init.checkpoint)
        elif init.generator is not None and init.discriminator is not None:
            d, g = load_config(init.discriminator), load_config(init.generator)
            source = ModelConfig(family="electra", head="electra", encoder=d.encoder, generator=g.encoder,
                                 embedding_sharing=spec.embedding_sharing)
    return spec.resolve(vocab_size, source, allow_resize_embeddings=init.allow_resize_embeddings)


def initialize_from(model: nn.Module, init: InitConfig) -> list[str]:
    """Copy released/earlier weights into ``model``; returns notes (missing heads, resized tables)."""
    notes: list[str] = []
    if init.checkpoint is not None:
        src = load_model(init.checkpoint)
        if isinstance(model, Pair) and isinstance(src, Pair):
            notes += _copy(src.generator, model.generator, init, "generator")
            notes += _copy(src.main, model.main, init, "main")
        else:
            notes += _copy(src, deployed(model), init, "model")
    if init.generator is not None:
        notes += _copy(load_model(init.generator), model.generator, init, "generator")
    if init.discriminator is not None:
        notes += _copy(load_model(init.discriminator), deployed(model), init, "discriminator")
    for name in model.pretraining_devices() if isinstance(model, Pair) else ():  # not in any saved network
        notes.append(f"{name}: kept its fresh initialization (init copies networks, not the trainer state)")
    return notes


def _copy(src: nn.Module, dst: nn.Module, init: InitConfig, label: str) -> list[str]:
    s, d = src.state_dict(), dst.state_dict()
    notes, out = [], {}
    # A gdes table holds a delta over the generator's (copied first): a checkpoint's plain table w
    # becomes delta = w - E_G, so the network starts from w, not from a fresh zero delta.
    embeddings = getattr(getattr(dst, "encoder", None), "embeddings", None)
    if embeddings is not None:
        s = gdes_deltas(s, embeddings, "encoder.embeddings.")
    for k, v in d.items():
        if k not in s:
            notes.append(f"{label}: {k} not in the checkpoint (kept its fresh initialization)")
            continue
        w = s[k]
        if w.shape != v.shape:
            resizable = "word_embeddings" in k or k.endswith("mlm_head.bias")
            if not (resizable and init.allow_resize_embeddings and w.shape[1:] == v.shape[1:]):
                raise ConfigError(f"{label}: {k} has shape {tuple(w.shape)} in the checkpoint but {tuple(v.shape)} "
                                  "in the model (a different tokenizer needs init.allow_resize_embeddings=true)")
            n = min(w.shape[0], v.shape[0])
            w = torch.cat([w[:n], v[n:]]) if v.shape[0] > n else w[:n]
            notes.append(f"{label}: {k} resized {tuple(s[k].shape)} -> {tuple(v.shape)}")
        out[k] = w
    dst.load_state_dict(out, strict=False)
    return notes
