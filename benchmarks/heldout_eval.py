"""A run's held-out evaluation, again, on saved checkpoints: the metrics of the present code.

The trainer scores each evaluated checkpoint on the run's held-out batches (train/evaluate.py) and
writes what that code measured into metrics.jsonl. A metric added later (All-Tokens-MLM's accuracy
at the masked positions, say) is absent there; this rebuilds the same held-out batches from the
run's config.yaml and token store, with the same masking seeds, and prints every metric for each
checkpoint given, beside what metrics.jsonl recorded at that step, so the reconstruction is checked
on the metrics both have.

    python benchmarks/heldout_eval.py runs/claims-deep/runs/all-tokens-mlm \\
        runs/claims-deep/runs/all-tokens-mlm/checkpoints/step-003074

Prints one JSON line a checkpoint: {"checkpoint", "step", "now": {...}, "recorded": {...}}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from encoderlab.objectives import build_networks
from encoderlab.train.config import PretrainConfig
from encoderlab.train.data import make_source
from encoderlab.train.evaluate import evaluate
from encoderlab.train.state import load_checkpoint


def heldout_batches(cfg: PretrainConfig) -> list[dict]:
    """The trainer's held-out batches (train/trainer.py): packed full sentences of the valid split."""
    src = make_source(cfg.data, split="valid", rank=0, world_size=1, seed=cfg.trainer.seed, pairs=None)
    it = iter(src)
    return [next(it) for _ in range(cfg.data.eval_batches)]


def recorded(run: Path) -> dict[int, dict]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("split") == "eval":
            out[rec["step"]] = rec
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a pretraining run directory (config.yaml, metrics.jsonl)")
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"],
                    help="the precision the run evaluated in (its pretrain.log says; a study's auto "
                         "chose bf16 on an AMX Xeon)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = PretrainConfig.from_yaml(args.run / "config.yaml")  # resolved by the trainer: model and token ids
    batches = heldout_batches(cfg)
    before = recorded(args.run)
    for ck in args.checkpoints:
        step = int(ck.name.split("-")[-1])
        model = build_networks(cfg.model.config, cfg.objective)  # the whole training pair, as trained
        load_checkpoint(ck, model)
        now = evaluate(model, cfg.objective, batches, device=torch.device("cpu"), precision=args.precision)
        print(json.dumps({"checkpoint": str(ck), "step": step, "now": now, "recorded": before.get(step, {})}))


if __name__ == "__main__":
    main()
