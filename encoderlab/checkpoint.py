"""The checkpoint directory format.

An encoderlab checkpoint is a directory that transformers can load directly when the model has a
transformers equivalent:

    ckpt/
      encoderlab.yaml      our ModelConfig, the weight naming, and sha256 of every weight file
      config.json          transformers config (architectures, model_type, sizes)
      model.safetensors    weights under transformers' names
      tokenizer files      copied in when a tokenizer is given (vocab.txt, tokenizer.json, ...)

An ELECTRA generator/discriminator pair is two such directories, ``generator/`` and
``discriminator/``, under one ``encoderlab.yaml``; with gdes sharing the discriminator's exported
tables are E_G + delta and ``extra.safetensors`` keeps each delta itself so training resumes exactly.
A pair is written and read through its own methods (models/pairs.py: networks, network_states,
extra_state, load_networks); this module never asks which kind of pair it holds.
Variants with no transformers equivalent (pre-LN, a BERT with shared layers, ALBERT with only
attention or only FFN shared, a BERT with factorized embeddings) are stored under encoderlab's own
names (``weights: native``) and no config.json; ``export_hf`` refuses them with the reason.

Weights are read from safetensors only: no pickle is ever loaded, no code from a checkpoint run.
Writes are atomic: a temporary directory is filled, then renamed over the old one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
from glob import escape as glob_escape
from pathlib import Path

import torch
import yaml
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from encoderlab.config import ConfigError
from encoderlab.errors import EncoderlabError
from encoderlab.interop import hf
from encoderlab.models.build import build_model, unshare
from encoderlab.models.config import ModelConfig
from encoderlab.models.pairs import Pair, materialized_state

META = "encoderlab.yaml"
WEIGHTS = "model.safetensors"
EXTRA = "extra.safetensors"  # a pair's extra_state (its exact gdes deltas)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                   "spiece.model", "encoderlab_tokenizer.json")
FORMAT_VERSION = 1


class CheckpointError(EncoderlabError):
    """A checkpoint directory is missing, corrupt or not loadable."""


# ---- saving -----------------------------------------------------------------------------------
def save_model(model: nn.Module, path: str | Path, *, tokenizer_dir: str | Path | None = None,
               extra_files: dict[str, bytes] | None = None) -> Path:
    """Write ``model`` (built by build_model) to ``path`` atomically and return the path."""
    path = Path(path)
    cfg: ModelConfig = model.config
    _clean_stale(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files: dict[str, str] = {}
    if isinstance(model, Pair):
        states = model.network_states()
        weights = {name: _save_network(states[name], ncfg, tmp, f"{name}/", files)
                   for name, (ncfg, _) in model.networks().items()}
        extra = model.extra_state()
        if extra:
            save_file({k: v.detach().to("cpu").contiguous() for k, v in extra.items()}, tmp / EXTRA)
            files[EXTRA] = _sha256(tmp / EXTRA)
        for sub in weights:
            _copy_tokenizer(tokenizer_dir, tmp / sub)
    else:
        # A network with gdes tables (an MLM ablation's MLM) is written with its effective tables.
        state = materialized_state(model) if hasattr(model, "encoder") else model.state_dict()
        weights = {"": _save_network(state, cfg, tmp, "", files)}
    _copy_tokenizer(tokenizer_dir, tmp)
    for name, data in (extra_files or {}).items():
        (tmp / name).write_bytes(data)
    meta = {"format_version": FORMAT_VERSION, "model": cfg.to_dict(), "weights": weights, "sha256": files}
    (tmp / META).write_text(yaml.safe_dump(meta, sort_keys=False))
    _replace_dir(tmp, path)
    return path


def _save_network(state: dict, cfg: ModelConfig, root: Path, sub: str, files: dict) -> str:
    """One network into root/sub: HF names + config.json when possible, else native names."""
    d = root / sub
    d.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    try:
        tensors, kind = hf.to_hf_state_dict(state, cfg), "hf"
        (d / "config.json").write_text(json.dumps(hf.hf_config(cfg), indent=2))
    except hf.ExportError:
        tensors, kind = _dedupe(state), "native"
    save_file(tensors, d / WEIGHTS, metadata={"format": "pt"})
    files[sub + WEIGHTS] = _sha256(d / WEIGHTS)
    return kind


def _dedupe(state: dict) -> dict:
    """safetensors refuses aliased tensors; keep shared storage once (sharing is in the config)."""
    seen, out = set(), {}
    for k, v in state.items():
        key = (v.data_ptr(), v.shape, v.stride())
        if key in seen:
            continue
        seen.add(key)
        out[k] = v.clone() if v.storage_offset() or not v.is_contiguous() else v
    return out


def _copy_tokenizer(tokenizer_dir, dest: Path) -> None:
    if tokenizer_dir is None:
        return
    src = Path(tokenizer_dir)
    if not src.is_dir():
        raise CheckpointError(f"tokenizer directory {src} does not exist")
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)


def _clean_stale(path: Path) -> None:
    """Remove what a writer of ``path`` killed mid-save left (a hidden tmp or old copy of a process
    that no longer runs). A kill between the two renames of _replace_dir leaves no ``path`` but a
    complete old copy: that copy is put back, so a rerun never finds the checkpoint simply gone."""
    for stale in sorted(path.parent.glob(f".{glob_escape(path.name)}.*-*")):
        kind, _, pid = stale.name.rpartition("-")
        if not pid.isdigit() or _alive(int(pid)) or not kind.endswith((".tmp", ".old")):
            continue
        if kind.endswith(".old") and not path.exists():
            os.replace(stale, path)
        else:
            shutil.rmtree(stale, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own leftover from an earlier failed save
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _replace_dir(tmp: Path, path: Path) -> None:
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- loading ----------------------------------------------------------------------------------
_STEP = re.compile(r"^step-(\d+)$")


def resolve_checkpoint(path: str | Path) -> tuple[Path, str | None]:
    """``path`` itself when it is a checkpoint; a pretraining run directory (or its ``checkpoints/``)
    gives its latest checkpoint, with a note saying so (the command line prints it)."""
    p = Path(path)
    if not p.is_dir() or (p / META).exists() or (p / "config.json").exists():
        return p, None
    found = latest_step_dir(p)
    if found is None:
        return p, None
    return found, f"{p} is a run directory: using its latest checkpoint, {found}"


def latest_step_dir(run_dir: Path) -> Path | None:
    """The highest ``step-N`` directory under ``run_dir/checkpoints`` (or ``run_dir``) that holds a
    checkpoint description; None when there is none."""
    for root in (run_dir / "checkpoints", run_dir):
        steps = sorted((int(m.group(1)), d) for d in (root.iterdir() if root.is_dir() else ())
                       if (m := _STEP.match(d.name)) and (d / META).exists())
        if steps:
            return steps[-1][1]
    return None


def load_config(path: str | Path) -> ModelConfig:
    path = Path(path)
    if (path / META).exists():
        try:
            return ModelConfig.from_dict(_read_meta(path)["model"], where=f"{path / META}: model")
        except ConfigError as e:  # a damaged description is a damaged checkpoint
            raise CheckpointError(str(e)) from None
    if (path / "config.json").exists():
        return _read_hf_config(path / "config.json")
    latest = latest_step_dir(path) if path.is_dir() else None
    hint = f"; it is a run directory, whose latest checkpoint is {latest}" if latest else ""
    raise CheckpointError(f"{path}: neither {META} nor config.json found: not a checkpoint directory{hint}")


def _read_hf_config(f: Path) -> ModelConfig:
    """config.json -> ModelConfig; anything malformed (bad JSON, a missing key, a wrong type) is a
    CheckpointError naming the file, not a KeyError from deep inside the translation."""
    try:
        d = json.loads(f.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{f}: not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise CheckpointError(f"{f}: expected a JSON object, got {type(d).__name__}")
    try:
        return hf.config_from_hf(d, where=str(f))
    except KeyError as e:
        raise CheckpointError(f"{f}: missing key {e}") from None
    except (TypeError, ValueError, OverflowError) as e:  # a value of the wrong type or out of range
        msg = str(e)
        raise CheckpointError(msg if str(f) in msg else f"{f}: {msg}") from None


def load_model(path: str | Path, *, verify: bool = True) -> nn.Module:
    """Load an encoderlab checkpoint or a transformers model directory (safetensors only)."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    cfg = load_config(path)
    if not (path / META).exists():  # a plain transformers directory
        # Shapes are checked against a meta-device reference before anything is allocated: a
        # config.json that claims a huge model fails at once instead of filling memory first.
        _check_layer_count(path, cfg)
        state = _read_hf_network(path, cfg)
        model = build_model(cfg)
        model.load_state_dict(state)
        return model
    model = build_model(cfg)
    meta = _read_meta(path)
    if verify:
        for rel, digest in meta.get("sha256", {}).items():
            f = path / rel
            if not f.exists():
                raise CheckpointError(f"{path}: {rel} is missing (truncated checkpoint?)")
            if _sha256(f) != digest:
                raise CheckpointError(f"{path}: {rel} does not match its recorded sha256: corrupt checkpoint")
    if isinstance(model, Pair):
        states = {name: _read_network(path / name, ncfg, _weights_kind(meta, path, name))
                  for name, (ncfg, _) in model.networks().items()}
        model.load_networks(states, _load_safetensors(path / EXTRA) if model.extra_state() else {})
    else:
        model.load_state_dict(_read_network(path, cfg, _weights_kind(meta, path, "")))
    return model


def _check_layer_count(path: Path, cfg: ModelConfig) -> None:
    """A config.json claiming 10**9 layers would build 10**9 modules (even on the meta device)
    before any shape check: compare with the layers model.safetensors holds, from its header."""
    f = path / WEIGHTS
    if not f.exists():
        return  # _read_hf_network says what is missing
    try:
        with safe_open(f, "pt") as weights:
            names = list(weights.keys())
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{f}: unreadable safetensors file ({e}): truncated or corrupt checkpoint") from None
    kind = "albert_layer_groups" if cfg.family == "albert" else "layer"
    held = {m.group(1) for n in names if (m := re.search(rf"\.{kind}\.(\d+)\.", n))}
    e = cfg.encoder
    wanted = e.num_groups if cfg.family == "albert" and e.sharing == "all" else e.num_layers
    if held and len(held) != wanted:
        raise CheckpointError(f"{path / 'config.json'}: {wanted} layer(s) (or ALBERT groups), "
                              f"but {f} holds {len(held)}")


def _read_meta(path: Path) -> dict:
    try:
        meta = yaml.safe_load((path / META).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path / META}: invalid YAML: {e}") from None
    if not isinstance(meta, dict) or "model" not in meta:
        raise CheckpointError(f"{path / META}: not an encoderlab checkpoint description (no 'model' key)")
    version = meta.get("format_version", 0)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"{path / META}: format_version {version!r} is not one this encoderlab reads "
                              f"(<= {FORMAT_VERSION})")
    for key in ("weights", "sha256"):  # what load_model indexes: a wrong shape here is a clear error
        if not isinstance(meta.get(key, {}), dict):
            raise CheckpointError(f"{path / META}: {key!r} must be a mapping, got {meta[key]!r}")
    weights = meta.setdefault("weights", {})
    bad = {k: v for k, v in weights.items() if v not in ("hf", "native")}
    if bad:
        raise CheckpointError(f"{path / META}: weights {bad} must each be 'hf' or 'native'")
    return meta


def _weights_kind(meta: dict, path: Path, network: str) -> str:
    if network not in meta["weights"]:
        raise CheckpointError(f"{path / META}: key 'weights' has no entry {network!r} for this model")
    return meta["weights"][network]


def _read_network(d: Path, cfg: ModelConfig, kind: str) -> dict:
    if kind == "hf":
        return _read_hf_network(d, cfg)
    state = _load_safetensors(d / WEIGHTS)
    reference = build_model(cfg).state_dict()
    for k in reference:  # re-create aliases dropped by _dedupe (tied / shared tables)
        if k not in state:
            state[k] = _alias_of(k, reference, state, d / WEIGHTS)
    try:
        hf.check_shapes(state, reference, where=str(d / WEIGHTS))
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    return state


def _alias_of(key, reference, state, where: Path):
    ref = reference[key]
    for k, v in reference.items():
        if k in state and v.data_ptr() == ref.data_ptr():
            return state[k]
    raise CheckpointError(f"{where}: tensor {key!r} is missing from the checkpoint")


def _read_hf_network(d: Path, cfg: ModelConfig) -> dict:
    if not (d / WEIGHTS).exists():
        if any((d / n).exists() for n in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")):
            raise CheckpointError(
                f"{d}: only model.safetensors is loaded (pickled weights are never unpickled); convert with "
                "transformers: AutoModel.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)")
        raise CheckpointError(f"{d}: {WEIGHTS} not found")
    try:
        state = hf.from_hf_state_dict(_load_safetensors(d / WEIGHTS), cfg, where=str(d / WEIGHTS))
        hf.check_shapes(state, _reference_state(cfg), where=str(d / WEIGHTS))
    except CheckpointError:
        raise
    except ValueError as e:  # hf names the file: a missing, unused or wrongly shaped tensor
        raise CheckpointError(str(e)) from None
    return state


def _reference_state(cfg: ModelConfig) -> dict:
    with torch.device("meta"):
        return build_model(cfg).state_dict()


def _load_safetensors(f: Path) -> dict:
    if not f.exists():
        raise CheckpointError(f"{f} not found")
    try:
        return load_file(f)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{f}: unreadable safetensors file ({e}): truncated or corrupt checkpoint") from None


# ---- plain transformers export -----------------------------------------------------------------
def export_hf(model: nn.Module, path: str | Path, *, tokenizer_dir: str | Path | None = None) -> list[str]:
    """Write a plain transformers directory (no encoderlab.yaml). Returns notes on what was changed.

    Sharing patterns transformers cannot express (a BERT with shared layers, ALBERT sharing only
    attention or only FFN) are exported unshared: the outputs are identical, the sharing constraint
    is gone. Pre-LN encoders and BERTs with factorized embeddings are refused (ExportError).
    A gdes discriminator is exported with its effective tables E_G + delta.
    """
    cfg = model.config
    nets = [c for c, _ in model.networks().values()] if isinstance(model, Pair) else [cfg]
    notes = []
    if any(_sharing_not_exportable(c) for c in nets):
        model = unshare(copy.deepcopy(model))
        notes.append("layers were unshared: transformers has no class for this sharing pattern (outputs unchanged)")
        nets = [n.replace(encoder=n.encoder.unshared()) for n in nets]
    for c in nets:
        hf.check_exportable(c)
    out = save_model(model, path, tokenizer_dir=tokenizer_dir)
    (out / META).unlink()
    (out / EXTRA).unlink(missing_ok=True)
    return notes


def _sharing_not_exportable(cfg: ModelConfig) -> bool:
    e = cfg.encoder
    if cfg.family == "bert":
        return e.sharing != "none"
    return cfg.family == "albert" and e.sharing in ("attention", "ffn")
