"""Real processes: a run killed (SIGKILL, SIGTERM, SIGINT) and resumed reproduces the uninterrupted
run's losses exactly (fp32, CPU); two data-parallel CPU processes (torchrun, gloo) follow the same
loss trajectory as one process with the same global batch."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from encoderlab.train import pretrain
from tests.pretrain_helpers import read_metrics, tiny_model, tiny_recipe

ROOT = Path(__file__).resolve().parents[1]
IDS = dict(mask_token_id=3, special_token_ids=(0, 1, 2, 3, 4))
TIMING = {"elapsed_s", "tokens_per_s", "peak_memory_mb"}
TEARDOWN_ABORT = "terminate called without an active exception"


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    return env


def _cli(recipe: Path, *overrides) -> list[str]:
    return [sys.executable, "-m", "encoderlab", "pretrain", str(recipe), *overrides]


def _losses(run_dir) -> dict[int, dict]:
    return {r["step"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(run_dir)}


@pytest.mark.parametrize("sig,family", [(signal.SIGKILL, "electra"), (signal.SIGTERM, "bert"),
                                        (signal.SIGINT, "albert")])
def test_interrupted_run_resumes_exactly(tmp_path, sig, family):
    torch.set_num_threads(1)
    objective = dict(kind="rtd" if family == "electra" else "mlm", **IDS)
    cfg = tiny_recipe(tmp_path / "run", tiny_model(family), objective, steps=40, pairs=family != "electra",
                      log_every=1, checkpoint_every=4, eval_every=10)
    cfg = cfg.replace(data=cfg.data.replace(synthetic=cfg.data.synthetic.replace(delay_s=0.04)))
    recipe = tmp_path / "recipe.yaml"
    cfg.to_yaml(recipe)
    proc = subprocess.Popen(_cli(recipe), env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    metrics = tmp_path / "run" / "metrics.jsonl"
    while time.time() < deadline:
        if metrics.exists() and len(read_metrics(tmp_path / "run")) >= 14:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    killed_at = max(_losses(tmp_path / "run"))
    assert killed_at < 40, "the run finished before it could be interrupted"
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # a graceful stop saves a checkpoint at the step it stopped
        assert proc.returncode == 128 + sig, err.decode()  # 130 for Ctrl-C (SIGINT), 143 for SIGTERM
        assert (tmp_path / "run" / "checkpoints" / f"step-{killed_at:06d}").is_dir()
    done = subprocess.run(_cli(recipe), env=_env(), cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert not list((tmp_path / "run" / "checkpoints").glob(".*")), "temporary checkpoint directories left behind"
    reference = pretrain(cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "ref"))))
    assert reference.status == "completed"
    a, b = _losses(tmp_path / "ref"), _losses(tmp_path / "run")
    assert sorted(a) == sorted(b) == list(range(1, 41))
    assert a == b, [s for s in a if a[s] != b[s]][:3]
    assert read_metrics(tmp_path / "ref", "eval") == read_metrics(tmp_path / "run", "eval")


def test_two_process_data_parallel_equals_one_process(tmp_path):
    torch.set_num_threads(1)
    cfg = tiny_recipe(tmp_path / "ddp", tiny_model("electra"), dict(kind="rtd", **IDS), steps=12, log_every=1,
                      checkpoint_every=6)
    recipe = tmp_path / "recipe.yaml"
    cfg.to_yaml(recipe)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "encoderlab", "pretrain", str(recipe)]
    done = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, timeout=180)
    err = done.stderr.decode(errors="replace")
    if done.returncode != 0 and TEARDOWN_ABORT in err:
        # Once in CI (never in 52 runs here) a rank aborted with this C++ message while its peer
        # was still writing the last checkpoint; the trainer now meets at a barrier before tearing
        # gloo down. One rerun from scratch tells that rare abort from a real failure, which repeats.
        shutil.rmtree(tmp_path / "ddp")
        done = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, timeout=180)
        err = done.stderr.decode(errors="replace")
    # the head holds the ranks' own messages, the tail torchrun's summary
    assert done.returncode == 0, err[:3000] + "\n[...]\n" + err[-2000:]
    one = cfg.replace(trainer=cfg.trainer.replace(run_dir=str(tmp_path / "one"), grad_accum=2))
    pretrain(one)
    a, b = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "ddp")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 13))
    for ra, rb in zip(a, b):
        assert ra["tokens"] == rb["tokens"] and ra["flops"] == rb["flops"]
        for k in ("loss", "gen_loss", "disc_loss", "disc_accuracy", "grad_norm"):
            assert rb[k] == pytest.approx(ra[k], rel=1e-4, abs=1e-6), (ra["step"], k)
    assert a[0]["loss"] != a[-1]["loss"]
