"""The trainer and the encoder on a CUDA device: every objective trains there in bf16, its checkpoint
loads on a CPU and computes what the GPU computed, a resumed fp32 run follows the uninterrupted one,
and a one-process torchrun with NCCL runs. Skipped on machines without CUDA (CI); run on a GPU with
``pytest tests/test_cuda.py`` (docs/benchmarks.md records the last run)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from encoderlab.checkpoint import load_model
from encoderlab.train import pretrain
from tests.pretrain_helpers import objective_cases, read_metrics, tiny_model, tiny_recipe

# ENCODERLAB_TEST_DEVICE=cpu runs the same checks on the CPU: a dry run of this file before GPU time is spent.
DEVICE = os.environ.get("ENCODERLAB_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                reason="needs a CUDA device (run on a GPU machine)")

IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
OBJECTIVES = objective_cases(two_stage_steps=20)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_objective_trains_on_cuda_and_its_checkpoint_runs_on_cpu(tmp_path, name):
    model, objective, pairs = OBJECTIVES[name]
    cfg = tiny_recipe(tmp_path, model(), dict(objective, **IDS), steps=60, pairs=pairs, device=DEVICE, precision="bf16",
                      log_every=10, checkpoint_every=30, eval_every=30, repeat_one=True)
    res = pretrain(cfg)
    assert res.status == "completed" and res.step == 60
    recs = read_metrics(tmp_path)
    assert all(math.isfinite(r["loss"]) for r in recs)
    # One repeated batch: it must fit (two-stage: within the discriminator's stage, whose loss is another)
    stage = [r["loss"] for r in recs if r["step"] > objective.get("two_stage_generator_steps", 0)]
    assert stage[-1] < stage[0], stage
    assert recs[-1]["peak_memory_mb"] > 0

    # The saved weights run on a machine without a GPU and compute what they computed on the GPU.
    cpu = load_model(res.checkpoint).eval()
    gpu = load_model(res.checkpoint).to(DEVICE).eval()
    net_cpu, net_gpu = getattr(cpu, "discriminator", cpu), getattr(gpu, "discriminator", gpu)
    ids = torch.randint(5, net_cpu.encoder.config.vocab_size, (2, 16))
    with torch.no_grad():
        h_cpu, h_gpu = net_cpu.encoder(ids).hidden, net_gpu.encoder(ids.to(DEVICE)).hidden  # (B, T, H)
    torch.testing.assert_close(h_gpu.cpu(), h_cpu, rtol=1e-4, atol=1e-4)


def test_resume_on_cuda_follows_the_uninterrupted_run(tmp_path):
    """fp32 on the GPU: the resumed run's losses equal the uninterrupted run's up to the rounding of
    non-deterministic CUDA kernels (the masking and sampling streams are reseeded per micro-batch and
    the RNG states are restored, as on the CPU, where the match is exact)."""
    cfg = tiny_recipe(tmp_path / "a", tiny_model("electra"), dict(kind="rtd", **IDS), steps=16, device=DEVICE,
                      log_every=3, checkpoint_every=5, keep_last=10)
    full = pretrain(cfg)
    shutil.copytree(tmp_path / "a" / "checkpoints" / "step-000010", tmp_path / "b" / "checkpoints" / "step-000010")
    resumed = pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "b"))))
    a, b = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "b")
    assert [r["step"] for r in b] == [12, 15, 16]
    for ra, rb in zip(a[-3:], b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-4)
    assert resumed.flops == full.flops


def test_torchrun_one_process_with_nccl(tmp_path):
    """The distributed path (NCCL process group, DistributedDataParallel) on one GPU."""
    cfg = tiny_recipe(tmp_path / "run", tiny_model("bert", head="mlm"), dict(kind="mlm", sentence_loss=False, **IDS),
                      steps=20, device=DEVICE)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(cfg.to_yaml())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "-m", "encoderlab",
                          "pretrain", str(recipe)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    recs = read_metrics(tmp_path / "run")
    assert recs[-1]["step"] == 20 and math.isfinite(recs[-1]["loss"])
