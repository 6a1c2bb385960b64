"""Replacement sampling on the CPU: encoderlab's inverse CDF (``sample_replacements``) against the
Gumbel-max trick and ``torch.multinomial``, on the generator's (M, V) logits, fp32.

    python benchmarks/sampling.py [--shapes 615x30522,615x8000] [--seconds 2] [--json out.json]

M is the masked positions of a 32 x 128 batch at 15%, V the vocabulary. Run it on each CPU kind
(the choice was made on an AMX Xeon; an AVX2-only CPU has other vector units): every method is
timed in the same run, and the ratio printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, timeit  # noqa: E402

from encoderlab.objectives.rtd import sample_replacements  # noqa: E402


def gumbel_max(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    u = torch.rand(logits.shape, generator=generator).clamp_(min=1e-9)
    return (logits.float() - torch.log(-torch.log(u))).argmax(-1)  # (M,)


def multinomial(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.multinomial(logits.float().softmax(-1), 1, generator=generator).squeeze(1)  # (M,)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="615x30522,615x8000")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(json.dumps(machine()))
    print("| M x V | inverse CDF ms | Gumbel-max ms | multinomial ms | vs Gumbel | vs multinomial |")
    print("|---|---|---|---|---|---|")
    rows = []
    for s in args.shapes.split(","):
        M, V = (int(x) for x in s.split("x"))
        logits = torch.randn(M, V, generator=torch.Generator().manual_seed(0))
        g = torch.Generator().manual_seed(1)
        ms = {name: 1e3 * timeit(lambda fn=fn, x=logits, g=g: fn(x, g), min_time=args.seconds) for name, fn in (
            ("inverse_cdf", lambda x, g: sample_replacements(x, 1.0, g)), ("gumbel", gumbel_max),
            ("multinomial", multinomial))}
        row = {"shape": s, **{f"{k}_ms": v for k, v in ms.items()}}
        rows.append(row)
        print(f"| {s} | {ms['inverse_cdf']:.2f} | {ms['gumbel']:.2f} | {ms['multinomial']:.2f} | "
              f"{ms['gumbel'] / ms['inverse_cdf']:.2f}x | {ms['multinomial'] / ms['inverse_cdf']:.2f}x |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
