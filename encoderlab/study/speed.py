"""Side-by-side speed: every variant's training step and inference latency, timed in one process
and interleaved round by round, once all variants are pretrained.

Pretraining logs its own tokens/s, but variants pretrain at different times (with pretrain_jobs > 1,
two or more at once, sharing the cores), so their logged rates share no conditions. Here each
round times every variant in turn, and the best round of each is reported: other work on the
machine can only slow a round down, so the fastest is the least disturbed (as timeit's minimum),
where a median still moves with the load (3 rounds of the demo next to two pretrainings: 1,577,
13,003 and 1,648 tokens/s for one variant). Peak memory still comes from each pretraining process
(its own VmHWM, which other processes do not change).
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path

import torch

from encoderlab.runtime import resolve_runtime
from encoderlab.study.metrics import TOKENS_PER_S
from encoderlab.train.trainer import Trainer

ROUNDS = 5


def _trainer(recipe, run_dir: Path):
    """The variant's own trainer (model, objective, optimizer, data) at full sequence length,
    writing nothing: the step timed is exactly the pretraining step."""
    cfg = recipe.replace(data=recipe.data.replace(short_seq_steps=0, eval_batches=0),
                         trainer=recipe.trainer.replace(run_dir=str(run_dir), resume="never", max_flops=None,
                                                        max_steps=10**9, log_every=0, eval_every=0,
                                                        checkpoint_every=0, progress=False))
    return Trainer(cfg)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_speed(recipes: dict, *, rounds: int = ROUNDS, seconds: float = 2.0) -> dict[str, dict]:
    """{variant: {"tokens_per_s": the best round's, "rounds": [...], "device": "cpu" | "cuda"}}:
    pretraining steps of every variant, round-robin; each round runs a variant's steps for about
    ``seconds`` (at least two)."""
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {name: _trainer(r, Path(tmp) / name) for name, r in recipes.items()}
        for tr in trainers.values():  # warm-up: first-call allocations, autocast caches
            tr.train_step()
        rates: dict[str, list[float]] = {name: [] for name in trainers}
        devices = {name: tr.device.type for name, tr in trainers.items()}
        for _ in range(rounds):
            for name, tr in trainers.items():
                _sync(tr.device)
                tokens0, n, start = tr.tokens, 0, time.perf_counter()
                while n < 2 or time.perf_counter() - start < seconds:
                    tr.train_step()
                    n += 1
                _sync(tr.device)
                rates[name].append((tr.tokens - tokens0) / (time.perf_counter() - start))
        trainers.clear()  # every variant's model and optimizer state: freed before what comes next
        tr = None  # noqa: F841 (the loop's last reference)
        gc.collect()
    return {name: {TOKENS_PER_S: max(r), "rounds": r, "device": devices[name]} for name, r in rates.items()}


def latency_precisions(precision: str, configs: list) -> tuple[str, ...]:
    """The precisions inference is timed in: fp32 always, and bf16 where the study's precision is
    bf16 on this machine for the widest encoder (auto on a CPU without fast bf16 products: fp32
    only; timing bf16 there would take minutes to report a precision no one would deploy)."""
    chosen = resolve_runtime(precision, "cpu", max(configs, key=lambda c: c.hidden_size)).precision
    return ("fp32", "bf16") if chosen.bf16 else ("fp32",)


def inference_latency(encoders: dict, *, rounds: int = ROUNDS, seconds: float = 0.5,
                      dtypes: tuple[str, ...] = ("fp32", "bf16")) -> dict[str, dict]:
    """{variant: {"fp32_b1": ms, "fp32_b32": ms, "bf16_b1": ms, "bf16_b32": ms}}: each encoder's
    forward time at sequence 128 (or its maximum), batch 1 and 32, in each of ``dtypes`` (bf16:
    autocast, with the attention kernel a bf16 run on this machine uses): the median call of a
    round, the best round; every variant in turn each round (on the CPU). Kernels are resolved
    here, before inference mode is entered."""
    if "bf16" in dtypes:
        for enc in encoders.values():
            resolve_runtime("bf16", "cpu", enc.config).apply(enc)
    with torch.inference_mode():
        return _latency(encoders, rounds, seconds, dtypes)


def _latency(encoders: dict, rounds: int, seconds: float, dtypes: tuple[str, ...]) -> dict[str, dict]:
    times: dict[str, dict[str, list[float]]] = {name: {} for name in encoders}
    for _ in range(rounds):
        for name, enc in encoders.items():
            T = min(128, enc.config.max_position_embeddings)
            for dtype in dtypes:
                for B in (1, 32):
                    g = torch.Generator().manual_seed(0)
                    ids = torch.randint(5, enc.config.vocab_size, (B, T), generator=g)
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                        enc(ids)  # warm-up
                        calls, start = [], time.perf_counter()
                        while time.perf_counter() - start < seconds or len(calls) < 3:
                            t = time.perf_counter()
                            enc(ids)
                            calls.append(time.perf_counter() - t)
                    times[name].setdefault(f"{dtype}_b{B}", []).append(statistics.median(calls))
    return {name: {k: 1000 * min(v) for k, v in d.items()} for name, d in times.items()}
