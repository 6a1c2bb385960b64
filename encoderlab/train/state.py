"""Training checkpoints: the model in the foundation format plus the trainer state, one directory.

    run_dir/checkpoints/step-000100/
      encoderlab.yaml, config.json, model.safetensors ...   save_model (transformers-loadable)
      generator/                                            the MLM ablations' generator
      recipe.yaml                                           the resolved PretrainConfig
      trainer_state.safetensors                             optimizer moments, RNG states, metric sums,
                                                            All-Tokens-MLM's copy gate
      trainer_state.json                                    step, tokens, FLOPs, data positions, and
                                                            the sha256 of trainer_state.safetensors

The directory is filled under a hidden temporary name and renamed into place, so a kill at any
moment leaves either the previous checkpoint or the new one complete. Nothing is unpickled:
tensors through safetensors, the rest JSON. A checkpoint whose files are missing, truncated or do
not match their recorded hashes is refused with CheckpointError.
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
from encoderlab.models.pairs import MLMPair, gdes_deltas, gdes_tables

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
MLM_DELTA = "mlm_gdes."  # trainer-state prefix of an MLM ablation's gdes deltas
COPY_GATE = "copy_gate."  # trainer-state prefix of All-Tokens-MLM's copy gate (not in the deployed MLM)
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
    if isinstance(model, MLMPair):  # the checkpoint's MLM holds E_G + delta: keep each delta exactly
        deltas = gdes_tables(model.mlm.encoder.embeddings)
        tensors = {**tensors, **{f"{MLM_DELTA}{n}": t.delta for n, t in deltas.items()}}
        if model.copy_gate is not None:
            tensors.update({f"{COPY_GATE}{k}": v for k, v in model.copy_gate.state_dict().items()})
    blob = st_save({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()})
    info = dict(info, step=step, tensors_sha256=hashlib.sha256(blob).hexdigest())
    if isinstance(model, MLMPair):
        save_model(model.mlm, tmp, tokenizer_dir=tokenizer_dir)
        save_model(model.generator, tmp / "generator", tokenizer_dir=tokenizer_dir)
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
    An MLM ablation's pair also takes what only its trainer state holds (each gdes delta exactly, the
    copy gate); ``tensors``: that state, when the caller has read it already."""
    path = Path(path)
    if isinstance(model, MLMPair):
        state = tensors if tensors is not None else _read_state(path)[1]
        model.generator.load_state_dict(load_model(path / "generator").state_dict())
        # The saved MLM holds effective tables; a gdes MLM takes them as deltas over the generator's,
        # exactly as saved where the state has them (subtracting E_G again would round).
        exact = {n: state[f"{MLM_DELTA}{n}"] for n in gdes_tables(model.mlm.encoder.embeddings)
                 if f"{MLM_DELTA}{n}" in state}
        model.mlm.load_state_dict(gdes_deltas(load_model(path).state_dict(), model.mlm.encoder.embeddings,
                                              "encoder.embeddings.", exact))
        gate = {k[len(COPY_GATE):]: v for k, v in state.items() if k.startswith(COPY_GATE)}
        if model.copy_gate is not None and not gate:
            raise CheckpointError(f"{path}: holds no copy gate ({COPY_GATE}* in {STATE_TENSORS}), but the "
                                  "objective sets copy_mechanism: it was trained without one")
        if model.copy_gate is None and gate:
            raise CheckpointError(f"{path}: holds a copy gate ({COPY_GATE}* in {STATE_TENSORS}), but the "
                                  "objective does not set copy_mechanism: it was trained with one")
        if gate:
            model.copy_gate.load_state_dict(gate)
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
