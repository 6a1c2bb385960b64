"""Attention on the CPU: PyTorch's SDPA against explicit batched products (q @ kᵀ, softmax, @ v),
forward and forward + backward, fp32 and bf16, at the encoder's shapes. This decides
``encoderlab.nn.encoder.EXPLICIT_BF16_MAX_LEN``. Then dropout: ``nn.Dropout`` against
``encoderlab.nn.dropout.Dropout`` (p = 0.1, forward) on hidden-state and attention-weight shapes.

    python benchmarks/attention.py [--shapes 32x12x128,32x8x128,16x12x256,8x12x512,1x12x128]
        [--dropout-shapes 32x128x256,32x4x128x128] [--seconds 2] [--json out.json]

Shapes are batch x heads x length, head size 64, no mask, no dropout (the dropout case is
decided separately: SDPA on the CPU draws its dropout mask per element). Times are medians.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, timeit  # noqa: E402


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def explicit(q, k, v):
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5  # (B, N, T, T)
    return s.softmax(-1) @ v  # (B, N, T, D)


def measure(shape: tuple[int, int, int], dtype: torch.dtype, seconds: float) -> dict:
    B, N, T = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, N, T, 64, generator=g).to(dtype).requires_grad_() for _ in range(3))
    grad = torch.randn(B, N, T, 64, generator=g).to(dtype)
    row = {"shape": f"{B}x{N}x{T}", "dtype": str(dtype).removeprefix("torch.")}
    for name, fn in (("sdpa", sdpa), ("explicit", explicit)):
        with torch.no_grad():
            row[f"{name}_forward_ms"] = 1e3 * timeit(lambda fn=fn: fn(q, k, v), min_time=seconds)
        row[f"{name}_train_ms"] = 1e3 * timeit(lambda fn=fn: fn(q, k, v).backward(grad), min_time=seconds)
    row["forward_speedup"] = row["sdpa_forward_ms"] / row["explicit_forward_ms"]
    row["train_speedup"] = row["sdpa_train_ms"] / row["explicit_train_ms"]
    return row


def measure_dropout(shape: tuple[int, ...], dtype: torch.dtype, seconds: float) -> dict:
    from encoderlab.nn.dropout import Dropout

    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    row = {"shape": "x".join(map(str, shape)), "dtype": str(dtype).removeprefix("torch.")}
    for name, mod in (("torch", torch.nn.Dropout(0.1)), ("encoderlab", Dropout(0.1))):
        mod.train()
        row[f"{name}_ms"] = 1e3 * timeit(lambda mod=mod: mod(x), min_time=seconds)
    row["speedup"] = row["torch_ms"] / row["encoderlab_ms"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="32x12x128,32x8x128,16x12x256,8x12x512,1x12x128")
    ap.add_argument("--dropout-shapes", default="32x128x256,32x4x128x128")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    rows = []
    print(json.dumps(machine()))
    shapes = [s for s in args.shapes.split(",") if s]
    if shapes:
        print("| B x N x T | dtype | SDPA fwd ms | explicit fwd ms | fwd speed-up | SDPA fwd+bwd ms "
              "| explicit fwd+bwd ms | fwd+bwd speed-up |")
        print("|---|---|---|---|---|---|---|---|")
    for s in shapes:
        shape = tuple(int(x) for x in s.split("x"))
        for d in args.dtypes.split(","):
            r = measure(shape, dtypes[d], args.seconds)
            rows.append(r)
            print(f"| {r['shape']} | {r['dtype']} | {r['sdpa_forward_ms']:.2f} | {r['explicit_forward_ms']:.2f} "
                  f"| {r['forward_speedup']:.2f}x | {r['sdpa_train_ms']:.1f} | {r['explicit_train_ms']:.1f} "
                  f"| {r['train_speedup']:.2f}x |", flush=True)
    drop_rows = []
    if args.dropout_shapes:
        print("\n| shape | dtype | nn.Dropout ms | encoderlab Dropout ms | speed-up |\n|---|---|---|---|---|")
    for s in [s for s in args.dropout_shapes.split(",") if s]:
        for d in args.dtypes.split(","):
            r = measure_dropout(tuple(int(x) for x in s.split("x")), dtypes[d], args.seconds)
            drop_rows.append(r)
            print(f"| {r['shape']} | {r['dtype']} | {r['torch_ms']:.2f} | {r['encoderlab_ms']:.2f} "
                  f"| {r['speedup']:.2f}x |", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"machine": machine(), "rows": rows, "dropout": drop_rows}, indent=1))


if __name__ == "__main__":
    main()
