"""Hugging Face transformers interop: one key map per family, config translation, both ways.

Nothing here imports transformers: configs are written as plain ``config.json`` dicts and weights
as HF-named tensors, so encoderlab checkpoints are loadable by transformers' Auto classes without
encoderlab needing transformers to save them. Tests check parity against transformers itself.

Supported: BERT (BertModel, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification,
BertForTokenClassification), ALBERT (the same five, groups included, inner_group_num 1) and
ELECTRA (ElectraModel, ElectraForPreTraining = discriminator, ElectraForMaskedLM = generator,
ElectraForSequenceClassification, ElectraForTokenClassification).
"""

from __future__ import annotations

import dataclasses

import torch

from encoderlab.errors import EncoderlabError
from encoderlab.models.config import ModelConfig
from encoderlab.nn.config import EncoderConfig

ARCHITECTURES = {
    ("bert", "encoder"): "BertModel",
    ("bert", "mlm"): "BertForMaskedLM",
    ("bert", "pretraining"): "BertForPreTraining",
    ("bert", "sequence_classification"): "BertForSequenceClassification",
    ("bert", "token_classification"): "BertForTokenClassification",
    ("albert", "encoder"): "AlbertModel",
    ("albert", "mlm"): "AlbertForMaskedLM",
    ("albert", "pretraining"): "AlbertForPreTraining",
    ("albert", "sequence_classification"): "AlbertForSequenceClassification",
    ("albert", "token_classification"): "AlbertForTokenClassification",
    ("electra", "encoder"): "ElectraModel",
    ("electra", "discriminator"): "ElectraForPreTraining",
    ("electra", "mlm"): "ElectraForMaskedLM",
    ("electra", "sequence_classification"): "ElectraForSequenceClassification",
    ("electra", "token_classification"): "ElectraForTokenClassification",
}
_HEAD_OF_ARCH = {arch: key for key, arch in ARCHITECTURES.items()}
_ACT_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "relu": "relu",
                "silu": "silu", "swish": "silu"}
PREFIX = {"bert": "bert.", "albert": "albert.", "electra": "electra."}


class ExportError(EncoderlabError):
    """The model has no transformers equivalent (and cannot be made one losslessly)."""


# ---- configs -------------------------------------------------------------------------------------
def hf_config(cfg: ModelConfig) -> dict:
    """The transformers ``config.json`` for a (single-network) model config."""
    e = cfg.encoder
    check_exportable(cfg)
    arch = ARCHITECTURES.get((cfg.family, cfg.head))
    if arch is None:
        raise ExportError(f"no transformers class for family {cfg.family!r} with head {cfg.head!r}")
    d = {
        "architectures": [arch], "model_type": cfg.family, "vocab_size": e.vocab_size,
        "hidden_size": e.hidden_size, "num_hidden_layers": e.num_layers, "num_attention_heads": e.num_heads,
        "intermediate_size": e.intermediate_size, "hidden_act": e.hidden_act,
        "hidden_dropout_prob": e.hidden_dropout, "attention_probs_dropout_prob": e.attention_dropout,
        "max_position_embeddings": e.max_position_embeddings, "type_vocab_size": e.type_vocab_size,
        "initializer_range": e.initializer_range, "layer_norm_eps": e.layer_norm_eps,
        "pad_token_id": e.pad_token_id, "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
    }
    if cfg.family == "albert":
        d.update(embedding_size=e.emb_size, inner_group_num=1,
                 num_hidden_groups=e.num_groups if e.sharing == "all" else e.num_layers,
                 classifier_dropout_prob=cfg.classifier_dropout)
    elif cfg.family == "electra":
        d.update(embedding_size=e.emb_size, summary_type="first", summary_use_proj=True,
                 summary_activation="gelu", summary_last_dropout=cfg.classifier_dropout)
    if cfg.head in ("sequence_classification", "token_classification"):
        d["num_labels"] = cfg.num_labels
        d["id2label"] = {str(i): f"LABEL_{i}" for i in range(cfg.num_labels)}
        d["label2id"] = {f"LABEL_{i}": i for i in range(cfg.num_labels)}
        if cfg.num_labels == 1:
            d["problem_type"] = "regression"
    return d


def check_exportable(cfg: ModelConfig) -> None:
    e = cfg.encoder
    if cfg.next_token_head:
        raise ExportError("a next-token MLM head (GPT-BERT's: token t read from the output at t - 1) has no "
                          "transformers equivalent: its MaskedLM would read each token at its own position")
    modern = [f"{name}={getattr(e, name)!r}" for name, plain in
              (("position", "absolute"), ("gated_ffn", False), ("bias", True), ("first_attention_norm", True))
              if getattr(e, name) != plain]
    if e.type_vocab_size == 0:
        modern.append("type_vocab_size=0")
    if modern:
        raise ExportError(f"{', '.join(modern)}: BERT/ALBERT/ELECTRA in transformers have absolute positions, "
                          "ungated feed-forward layers and biases; this model has no lossless equivalent there")
    if e.norm != "post":
        raise ExportError("pre-LN encoders have no transformers equivalent among BERT/ALBERT/ELECTRA")
    if cfg.family == "bert" and e.emb_size != e.hidden_size:
        raise ExportError("a BERT with embedding_size != hidden_size has no BertModel equivalent")
    if hf_has_pooler(cfg.family, cfg.head) and not e.pooler:
        raise ExportError(f"transformers {ARCHITECTURES[(cfg.family, cfg.head)]} has a pooler; this config has none")
    if cfg.family == "electra" and e.pooler:
        raise ExportError("transformers ElectraModel has no pooler; this config has one")
    if cfg.family == "bert" and e.sharing != "none":
        raise ExportError("a BERT with shared layers has no BertModel equivalent: unshare it first")
    if cfg.family == "albert" and e.sharing in ("attention", "ffn"):
        raise ExportError(f"ALBERT with sharing={e.sharing!r} has no transformers equivalent: unshare it first")


def hf_has_pooler(family: str, head: str) -> bool:
    """transformers builds BERT/ALBERT without a pooler for the MLM and token-classification heads.
    (We still write our pooler into such files when the model has one: transformers ignores it.)"""
    return family != "electra" and head in ("encoder", "pretraining", "sequence_classification")


def config_from_hf(d: dict, *, where: str = "config.json") -> ModelConfig:
    """Translate a transformers config.json dict into a ModelConfig (family and head included)."""
    family = d.get("model_type")
    if family not in PREFIX:
        raise ValueError(f"{where}: model_type {family!r} is not one of {sorted(PREFIX)}")
    archs = d.get("architectures") or [ARCHITECTURES[(family, "encoder")]]
    if archs[0] not in _HEAD_OF_ARCH:
        raise ValueError(f"{where}: architecture {archs[0]!r} is not supported; valid: {sorted(_HEAD_OF_ARCH)}")
    fam, head = _HEAD_OF_ARCH[archs[0]]
    if fam != family:
        raise ValueError(f"{where}: architecture {archs[0]} does not match model_type {family!r}")
    if d.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{where}: only absolute position embeddings are supported")
    act = _ACT_FROM_HF.get(d.get("hidden_act", "gelu"))
    if act is None:
        raise ValueError(f"{where}: hidden_act {d.get('hidden_act')!r} not supported; valid: {sorted(_ACT_FROM_HF)}")
    L = d["num_hidden_layers"]
    sharing, groups = "none", 1
    if family == "albert":
        if d.get("inner_group_num", 1) != 1:
            raise ValueError(f"{where}: ALBERT inner_group_num != 1 is not supported")
        groups = d.get("num_hidden_groups", 1)
        sharing = "none" if groups == L else "all"
    enc = EncoderConfig(
        vocab_size=d["vocab_size"], hidden_size=d["hidden_size"], num_layers=L,
        num_heads=d["num_attention_heads"], intermediate_size=d["intermediate_size"],
        embedding_size=d.get("embedding_size") if family != "bert" else None,
        max_position_embeddings=d.get("max_position_embeddings", 512), type_vocab_size=d.get("type_vocab_size", 2),
        hidden_act=act, hidden_dropout=d.get("hidden_dropout_prob", 0.1),
        attention_dropout=d.get("attention_probs_dropout_prob", 0.1), layer_norm_eps=d.get("layer_norm_eps", 1e-12),
        sharing=sharing, num_groups=groups if sharing != "none" else 1, pooler=hf_has_pooler(family, head),
        pad_token_id=d.get("pad_token_id", 0) or 0, initializer_range=d.get("initializer_range", 0.02),
    )
    num_labels = len(d["id2label"]) if "id2label" in d else d.get("num_labels", 2)
    if d.get("problem_type") == "regression":
        num_labels = 1
    drop = d.get("classifier_dropout") or d.get("classifier_dropout_prob") or d.get("summary_last_dropout")
    return ModelConfig(family=family, head=head, encoder=enc, num_labels=num_labels,
                       classifier_dropout=drop if drop is not None else enc.hidden_dropout)


# ---- weights ----------------------------------------------------------------------------------
def _layer_keys(family: str, cfg: EncoderConfig, i: int, p: str) -> dict[str, str]:
    """HF names for layer (or ALBERT group) i, keyed by role."""
    if family == "albert":
        b = f"{p}encoder.albert_layer_groups.{i}.albert_layers.0."
        return {"q": b + "attention.query", "k": b + "attention.key", "v": b + "attention.value",
                "out": b + "attention.dense", "ln1": b + "attention.LayerNorm", "up": b + "ffn",
                "down": b + "ffn_output", "ln2": b + "full_layer_layer_norm"}
    b = f"{p}encoder.layer.{i}."
    return {"q": b + "attention.self.query", "k": b + "attention.self.key", "v": b + "attention.self.value",
            "out": b + "attention.output.dense", "ln1": b + "attention.output.LayerNorm",
            "up": b + "intermediate.dense", "down": b + "output.dense", "ln2": b + "output.LayerNorm"}


def _pairs(family: str, cfg: EncoderConfig, p: str, ours: str) -> list[tuple[str, str]]:
    """(our name, HF name) for every 1:1 tensor of the encoder; qkv is handled separately."""
    out = []
    for t in ("word", "position", "token_type"):
        out.append((f"{ours}embeddings.{t}_embeddings.weight", f"{p}embeddings.{t}_embeddings.weight"))
    for s in ("weight", "bias"):
        out.append((f"{ours}embeddings.layer_norm.{s}", f"{p}embeddings.LayerNorm.{s}"))
        if cfg.emb_size != cfg.hidden_size:
            hf = f"{p}encoder.embedding_hidden_mapping_in" if family == "albert" else f"{p}embeddings_project"
            out.append((f"{ours}embeddings.projection.{s}", f"{hf}.{s}"))
        if cfg.pooler:
            out.append((f"{ours}pooler.{s}", f"{p}pooler.{s}" if family == "albert" else f"{p}pooler.dense.{s}"))
    n = cfg.num_groups if (family == "albert" and cfg.sharing == "all") else cfg.num_layers
    for i in range(n):
        k = _layer_keys(family, cfg, i, p)
        for s in ("weight", "bias"):
            out += [(f"{ours}attention.{i}.out.{s}", f"{k['out']}.{s}"),
                    (f"{ours}attention.{i}.layer_norm.{s}", f"{k['ln1']}.{s}"),
                    (f"{ours}ffn.{i}.up.{s}", f"{k['up']}.{s}"), (f"{ours}ffn.{i}.down.{s}", f"{k['down']}.{s}"),
                    (f"{ours}ffn.{i}.layer_norm.{s}", f"{k['ln2']}.{s}")]
    return out


def _qkv(family: str, cfg: EncoderConfig, p: str, ours: str) -> list[tuple[str, tuple[str, str, str]]]:
    n = cfg.num_groups if (family == "albert" and cfg.sharing == "all") else cfg.num_layers
    out = []
    for i in range(n):
        k = _layer_keys(family, cfg, i, p)
        for s in ("weight", "bias"):
            out.append((f"{ours}attention.{i}.qkv.{s}", (f"{k['q']}.{s}", f"{k['k']}.{s}", f"{k['v']}.{s}")))
    return out


def _head_pairs(cfg: ModelConfig, p: str) -> list[tuple[str, str]]:
    """(our name, HF name) for the head tensors."""
    fam, head = cfg.family, cfg.head
    out: list[tuple[str, str]] = []
    if head in ("mlm", "pretraining"):
        if fam == "bert":
            mp = "cls.predictions."
            names = {"dense": mp + "transform.dense", "layer_norm": mp + "transform.LayerNorm", "bias": mp + "bias"}
        elif fam == "albert":
            names = {"dense": "predictions.dense", "layer_norm": "predictions.LayerNorm", "bias": "predictions.bias"}
        else:
            names = {"dense": "generator_predictions.dense", "layer_norm": "generator_predictions.LayerNorm",
                     "bias": "generator_lm_head.bias"}
        for s in ("weight", "bias"):
            out += [(f"mlm_head.dense.{s}", f"{names['dense']}.{s}"),
                    (f"mlm_head.layer_norm.{s}", f"{names['layer_norm']}.{s}")]
        out.append(("mlm_head.bias", names["bias"]))
    if head == "pretraining":
        hf = "cls.seq_relationship" if fam == "bert" else "sop_classifier.classifier"
        out += [(f"sentence_head.classifier.{s}", f"{hf}.{s}") for s in ("weight", "bias")]
    if head == "discriminator":
        for s in ("weight", "bias"):
            out += [(f"rtd_head.dense.{s}", f"discriminator_predictions.dense.{s}"),
                    (f"rtd_head.prediction.{s}", f"discriminator_predictions.dense_prediction.{s}")]
    if head == "sequence_classification":
        for s in ("weight", "bias"):
            if fam == "electra":
                out += [(f"head.dense.{s}", f"classifier.dense.{s}"), (f"head.out.{s}", f"classifier.out_proj.{s}")]
            else:
                out.append((f"head.out.{s}", f"classifier.{s}"))
    if head == "token_classification":
        out += [(f"head.out.{s}", f"classifier.{s}") for s in ("weight", "bias")]
    return out


def _tied_hf_keys(cfg: ModelConfig, p: str) -> dict[str, str]:
    """HF keys that transformers ties to another key: not written (as transformers does), and
    accepted without use when a file carries them."""
    if cfg.head not in ("mlm", "pretraining"):
        return {}
    dec = {"bert": "cls.predictions.decoder", "albert": "predictions.decoder", "electra": "generator_lm_head"}
    d = {f"{dec[cfg.family]}.weight": f"{p}embeddings.word_embeddings.weight"}
    if cfg.family != "electra":  # ELECTRA's generator_lm_head has a bias of its own
        d[f"{dec[cfg.family]}.bias"] = {"bert": "cls.predictions.bias", "albert": "predictions.bias"}[cfg.family]
    return d


def to_hf_state_dict(model_state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict (of build_model(cfg)) -> transformers names, for the class in hf_config(cfg)."""
    check_exportable(cfg)
    p = PREFIX[cfg.family]
    e = cfg.encoder
    out: dict[str, torch.Tensor] = {}
    for ours, hf in _pairs(cfg.family, e, p, "encoder.") + _head_pairs(cfg, p):
        out[hf] = model_state[ours]
    for ours, (q, k, v) in _qkv(cfg.family, e, p, "encoder."):
        out[q], out[k], out[v] = model_state[ours].chunk(3, dim=0)
    expected = len(_pairs(cfg.family, e, p, "encoder.")) + 3 * len(_qkv(cfg.family, e, p, "encoder.")) + len(
        _head_pairs(cfg, p))
    assert len(out) == expected, f"key map produced {len(out)} tensors, expected {expected}"
    if cfg.head == "encoder":  # the bare model's own files carry no prefix
        out = {k.removeprefix(p): v for k, v in out.items()}
    return {k: v.contiguous() for k, v in out.items()}


def from_hf_state_dict(hf_state: dict[str, torch.Tensor], cfg: ModelConfig, *, where: str = "") -> dict:
    """transformers tensors -> our state dict for build_model(cfg). Checks every shape and that no
    tensor is left unused (position-id buffers and tied copies excepted)."""
    p = PREFIX[cfg.family]
    if not any(k.startswith(p) for k in hf_state):  # saved from the bare model: no prefix
        hf_state = {p + k: v for k, v in hf_state.items()}
    e = cfg.encoder
    out, used = {}, set()

    def take(hf_key: str) -> torch.Tensor:
        if hf_key not in hf_state:
            raise ValueError(f"{where}: missing tensor {hf_key!r} for {cfg.family}/{cfg.head}")
        used.add(hf_key)
        return hf_state[hf_key]

    for ours, hf in _pairs(cfg.family, e, p, "encoder.") + _head_pairs(cfg, p):
        out[ours] = take(hf)
    for ours, keys in _qkv(cfg.family, e, p, "encoder."):
        out[ours] = torch.cat([take(k) for k in keys], dim=0)
    used |= set(_tied_hf_keys(cfg, p))
    # Position-id buffers and a pooler the head does not use (BertForMaskedLM files may carry one).
    leftover = sorted(k for k in set(hf_state) - used if not k.endswith("position_ids") and ".pooler." not in k)
    if leftover:
        raise ValueError(f"{where}: {len(leftover)} tensor(s) not used by {cfg.family}/{cfg.head}: {leftover[:6]}")
    return out


def check_shapes(state: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], where: str = "") -> None:
    missing = sorted(set(reference) - set(state))
    extra = sorted(set(state) - set(reference))
    if missing or extra:
        raise ValueError(f"{where}: state dict mismatch: missing {missing[:6]}, unexpected {extra[:6]}")
    for k, v in reference.items():
        if tuple(state[k].shape) != tuple(v.shape):
            raise ValueError(f"{where}: {k} has shape {tuple(state[k].shape)}, expected {tuple(v.shape)}")


def encoder_only(cfg: ModelConfig) -> ModelConfig:
    return dataclasses.replace(cfg, head="encoder")
