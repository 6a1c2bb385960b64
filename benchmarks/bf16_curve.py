"""Does bf16 autocast change pretraining? The same run (model, data order, masking, seed) in fp32
and in bf16 autocast, training loss and held-out MLM figures side by side.

    python benchmarks/bf16_curve.py --work runs/learning --model bert-tiny --steps 1000 [--parallel]

Reuses (or builds) benchmarks/pretrain_learning.py's tokenizer and token store from
../shared/data/enwiki_extract. ``--parallel`` runs the two precisions as two processes of one
thread each (one per core on a 2-core machine). Writes bf16_curve-MODEL.json in --work.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pretrain_learning import add_run_arguments, build_store, recipe  # noqa: E402

from encoderlab.train import pretrain  # noqa: E402


def run_one(args, precision: str) -> None:
    torch.set_num_threads(args.threads)
    store = build_store(Path(args.work), Path(args.corpus), args.vocab, 2)
    cfg = recipe(args.model, store, Path(args.work) / f"bf16_curve-{precision}", args, max_steps=args.steps,
                 log_every=args.log_every, eval_every=args.steps // 4, precision=precision)
    r = pretrain(cfg)
    if r.status != "completed":
        raise SystemExit(f"{precision}: {r.status} at step {r.step}")


def read(run_dir: Path) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == "train"], [r for r in rows if r["split"] == "eval"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--model", default="bert-tiny")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--parallel", action="store_true")
    ap.add_argument("--only", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only:
        return run_one(args, args.only)
    build_store(Path(args.work), Path(args.corpus), args.vocab, 2)
    cmds = [[sys.executable, __file__, *sys.argv[1:], "--only", p] for p in ("fp32", "bf16")]
    if args.parallel:
        for p in [subprocess.Popen(c) for c in cmds]:
            if p.wait():
                raise SystemExit(f"{p.args[-1]} run failed")
    else:
        for c in cmds:
            subprocess.run(c, check=True)
    (t32, e32), (t16, e16) = (read(Path(args.work) / f"bf16_curve-{p}" / args.model) for p in ("fp32", "bf16"))
    key = "loss"
    diffs = [abs(a[key] - b[key]) for a, b in zip(t32, t16)]
    lines = [f"{args.model}, {args.steps} steps of {args.batch_size} x {args.seq_len}, lr {args.lr}, seed "
             f"{args.seed}, {args.threads} thread(s) per run; training loss is the mean over each "
             f"{args.log_every}-step window.", "",
             "| step | fp32 train loss | bf16 train loss | difference | fp32 tokens/s | bf16 tokens/s |",
             "|---|---|---|---|---|---|"]
    for a, b in zip(t32, t16):
        lines.append(f"| {a['step']} | {a[key]:.4f} | {b[key]:.4f} | {b[key] - a[key]:+.4f} | "
                     f"{a['tokens_per_s']:.0f} | {b['tokens_per_s']:.0f} |")
    m = "eval_gen" if args.model.startswith("electra") else "eval_mlm"  # ELECTRA: its generator's MLM
    lines += ["", "| step | fp32 held-out MLM loss / acc | bf16 held-out MLM loss / acc |", "|---|---|---|"]
    for a, b in zip(e32, e16):
        lines.append(f"| {a['step']} | {a[m + '_loss']:.4f} / {a[m + '_accuracy']:.4f} | "
                     f"{b[m + '_loss']:.4f} / {b[m + '_accuracy']:.4f} |")
    lines += ["", f"Largest training-loss difference: {max(diffs):.4f} (at {len(diffs)} logged points)."]
    out = {"args": vars(args), "fp32": {"train": t32, "eval": e32}, "bf16": {"train": t16, "eval": e16},
           "max_train_loss_diff": max(diffs)}
    Path(args.work, f"bf16_curve-{args.model}.json").write_text(json.dumps(out, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
