"""Training checkpoints: the model in the foundation format plus the trainer state, one directory.

    run_dir/checkpoints/step-000100/
      encoderlab.yaml, config.json, model.safetensors ...   save_model (transformers-loadable)
      generator/                                            the MLM ablations' generator
      recipe.yaml                                           the resolved PretrainConfig
      trainer_state.safetensors                             optimizer moments, RNG states, metric sums;
                                                            an MLM ablation's extra_state (its exact
                                                            gdes deltas, All-Tokens-MLM's copy gate)
      trainer_state.json                                    step, tokens, FLOPs, data positions, and
                                                            the sha256 of trainer_state.safetensors

The directory is filled under a hidden temporary name and renamed into place, so a kill at any
moment leaves either the previous checkpoint or the new one complete. Nothing is unpickled:
tensors through safetensors, the rest JSON. A checkpoint whose files are missing, truncated or do
not match their recorded hashes is refused with CheckpointError.

A pair whose checkpoint is its main network (Pair.MAIN_AT_ROOT: the MLM ablations) is written here
through the pair's own methods (networks, extra_state, load_networks); any other model, an ELECTRA
pair included, is written by save_model alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import nn

from encoderlab.checkpoint import CheckpointError, load_model, save_model
from encoderlab.config import ConfigError
from encoderlab.models.pairs import Pair

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
OBJECTIVE = "objective."  # trainer-state prefix of the objective's own state (Objective.state_dict)
_STEP_DIR = re.compile(r"^step-(\d+)$")


def save_checkpoint(run_dir: Path, step: int, model: nn.Module, *, tensors: dict[str, torch.Tensor],
                    info: dict, recipe_yaml: str, keep_last: int, tokenizer_dir=None) -> Path:
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".step-{step:06d}.tmp-{os.getpid()}"
    for stale in root.glob(".step-*"):  # left by a process killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    at_root = _main_at_root(model)
    if at_root:  # the checkpoint's MLM holds E_G + delta: keep each delta exactly (and the copy gate)
        tensors = {**tensors, **model.extra_state()}
    blob = st_save({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()})
    info = dict(info, step=step, tensors_sha256=hashlib.sha256(blob).hexdigest())
    if at_root:
        save_model(model.main, tmp, tokenizer_dir=tokenizer_dir)  # first: it writes the whole directory
        for name, (_, net) in model.networks().items():
            if name != model.MAIN:
                save_model(net, tmp / name, tokenizer_dir=tokenizer_dir)
    else:
        save_model(model, tmp, tokenizer_dir=tokenizer_dir)
    (tmp / STATE_TENSORS).write_bytes(blob)
    (tmp / "recipe.yaml").write_text(recipe_yaml)
    (tmp / STATE_JSON).write_text(json.dumps(info, indent=1))  # written last: marks completeness
    _fsync_dir(tmp)
    old = root / f".step-{step:06d}.old-{os.getpid()}"
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    for stale in list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(stale, ignore_errors=True)
    return final


def _main_at_root(model: nn.Module) -> bool:
    return isinstance(model, Pair) and model.MAIN_AT_ROOT


def _fsync_dir(d: Path) -> None:
    for p in d.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete-looking step directories, oldest first (hidden temporaries are ignored)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def checkpoint_info(path: Path) -> dict:
    """What a training checkpoint records of its run (step, tokens, FLOPs, precision, ...), without
    loading its tensors: what a study reads to pick checkpoints by budget fraction."""
    path = Path(path)
    try:
        return json.loads((path / STATE_JSON).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: {STATE_JSON} is missing: not a training checkpoint, or an incomplete one") \
            from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path / STATE_JSON}: not valid JSON ({e}): truncated or corrupt checkpoint") from None


def load_checkpoint(path: Path, model: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    """Load weights into ``model`` (same architecture) and return (info, tensors) of the trainer."""
    path = Path(path)
    info, tensors = _read_state(path)
    load_weights(path, model, tensors)
    return info, tensors


def _read_state(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """A checkpoint's trainer state (info, tensors), the tensors verified against their hash."""
    info = checkpoint_info(path)
    blob_file = path / STATE_TENSORS
    if not blob_file.exists():
        raise CheckpointError(f"{path}: {STATE_TENSORS} is missing (truncated checkpoint?)")
    blob = blob_file.read_bytes()
    if hashlib.sha256(blob).hexdigest() != info.get("tensors_sha256"):
        raise CheckpointError(f"{blob_file}: does not match the sha256 in {STATE_JSON}: corrupt checkpoint")
    try:
        return info, st_load(blob)
    except (SafetensorError, ValueError) as e:
        raise CheckpointError(f"{blob_file}: unreadable ({e})") from None


def load_weights(path: Path, model: nn.Module, tensors: dict[str, torch.Tensor] | None = None) -> None:
    """Copy a checkpoint's weights (verified against their hashes) into an identical architecture.
    A pair whose checkpoint is its main network also takes what only its trainer state holds (its
    extra_state); ``tensors``: that state, when the caller has read it already."""
    path = Path(path)
    if _main_at_root(model):
        state = tensors if tensors is not None else _read_state(path)[1]
        states = {name: load_model(path if name == model.MAIN else path / name).state_dict()
                  for name in model.networks()}
        try:
            model.load_networks(states, state)
        except ConfigError as e:  # the pair and the checkpoint disagree (a copy gate in one only)
            raise CheckpointError(f"{path / STATE_TENSORS}: {e}") from None
        return
    model.load_state_dict(load_model(path).state_dict())


# ---- optimizer and RNG state as flat tensors + JSON -------------------------------------------------
def optimizer_state(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            tensors[f"optimizer.{idx}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return tensors, {"param_groups": sd["param_groups"]}


def load_optimizer_state(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], info: dict) -> None:
    state: dict[int, dict] = {}
    for name, v in tensors.items():
        if name.startswith("optimizer."):
            _, idx, k = name.split(".", 2)
            state.setdefault(int(idx), {})[k] = v
    groups = info["param_groups"]
    for g in groups:
        g["betas"] = tuple(g["betas"])
    opt.load_state_dict({"state": state, "param_groups": groups})


def rng_state() -> dict[str, torch.Tensor]:
    out = {"rng.cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["rng.cuda"] = torch.cuda.get_rng_state()
    return out


def load_rng_state(tensors: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(tensors["rng.cpu"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
