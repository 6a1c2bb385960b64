"""Does ``precision: auto`` give the same answer on every fresh run of the same machine?

Runs the precision probe (encoderlab/precision.py, measure_cpu) N times at each width the recipes
use, each as a first run on an empty cache would, and reports per width: how many runs chose bf16,
the median ratio (fp32 time / bf16 time of a layer's step, fastest calls) over runs, its lowest and
highest reading, the rounds taken and the probe's time. A stable decision is N of N or 0
of N at every width.

    python benchmarks/probe_stability.py [--runs 20] [--widths 128,256,512,768] [--threads 2]
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/probe_stability.py   # an AVX2-only CPU

Prints a markdown table and the machine line (benchmarks/common.py); --out writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from encoderlab.precision import MIN_BF16_SPEEDUP, PROBE_MARGIN, measure_cpu  # noqa: E402

# Width -> feed-forward width, as the presets have them (4x): tiny, mini/small-ELECTRA, small, base.
WIDTHS = "128,256,512,768"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--widths", default=WIDTHS)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (the probe runs on one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine()
    print(json.dumps(info))
    rows = []
    for w in map(int, args.widths.split(",")):
        recs, times = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            recs.append(measure_cpu(w, 4 * w))
            times.append(time.perf_counter() - t)
        rows.append({"width": w, "runs": args.runs, "bf16_chosen": sum(r["bf16_fast"] for r in recs),
                     "median_speedup": statistics.median(r["speedup"] for r in recs),
                     "speedup_range": [min(r["speedup"] for r in recs), max(r["speedup"] for r in recs)],
                     "rounds": [min(r["rounds"] for r in recs), max(r["rounds"] for r in recs)],
                     "probe_s": statistics.median(times), "records": recs})
        r = rows[-1]
        print(f"width {w}: bf16 chosen {r['bf16_chosen']}/{args.runs}, median ratio {r['median_speedup']:.2f}, "
              f"range {r['speedup_range'][0]:.2f}-{r['speedup_range'][1]:.2f}, rounds {r['rounds']}, "
              f"{r['probe_s']:.2f} s per probe", flush=True)
    print("\n| width | bf16 chosen | median ratio fp32/bf16 | ratio, min-max over runs | rounds | s per probe |"
          "\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['width']} | {r['bf16_chosen']}/{r['runs']} | {r['median_speedup']:.2f} | "
              f"{r['speedup_range'][0]:.2f}-{r['speedup_range'][1]:.2f} | {r['rounds'][0]}-{r['rounds'][1]} | "
              f"{r['probe_s']:.2f} |")
    print(f"(bf16 is chosen when the ratio is >= {MIN_BF16_SPEEDUP * (1 + PROBE_MARGIN):.3g})")
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": info, "threshold": MIN_BF16_SPEEDUP, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
