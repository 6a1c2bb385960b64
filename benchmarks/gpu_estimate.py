"""Expected wall-clock of a GPU study's pretraining runs, from measured training step rates.

  python benchmarks/gpu_estimate.py [docs/studies/gpu-headline/study.yaml]

For each variant: the optimizer steps its FLOPs budget buys at the study's batch (the plan's own
arithmetic, train/flops.py), the tokens they hold, and the hours at each measured rate of that model
on a GPU. The rates are those `benchmarks/gpu_check.sh` measured on an NVIDIA H200 (docs/benchmarks.md,
"On a GPU", 2026-12-04, encoderlab's step at batch 32 x 128 and 256 x 128): inputs quoted from that
run, not measured here. An H100 has the H200's compute and less memory bandwidth; for these small
models, bound by kernel launches at batch 32, expect about the same rate (not measured).
"""

from __future__ import annotations

import sys

from encoderlab.study.config import StudyConfig
from encoderlab.train.flops import steps_for_budget
from encoderlab.train.init import resolve_model

# tokens/s of encoderlab's training step on one H200 (docs/benchmarks.md, 2026-12-04): {preset: {setting: rate}}
MEASURED = {
    "bert-small": {"fp32, batch 32": 250658, "bf16, batch 32": 250772},
    "electra-small": {"fp32, batch 32": 77653, "bf16, batch 32": 62633, "bf16, batch 256": 447413},
}


def main(path: str = "docs/studies/gpu-headline/study.yaml") -> None:
    cfg = StudyConfig.from_yaml(path)
    B, T = cfg.base.data.batch_size, cfg.base.data.seq_len
    print(f"{path}: {cfg.budget_flops:.3g} FLOPs a run, batch {B} x {T}, {cfg.pretrain_seeds} run(s) a variant")
    for v in cfg.variants:
        recipe = cfg.base.replace(model=v.model, objective=v.objective)
        model = resolve_model(recipe.model, recipe.init, cfg.vocab_size)
        steps = steps_for_budget(model, v.objective, B, T, cfg.budget_flops)
        tokens = steps * B * T
        rates = MEASURED.get(v.model.preset or "", {})
        times = ", ".join(f"{tokens / r / 3600:.1f} h at {r:,} tokens/s ({s})" for s, r in rates.items())
        print(f"  {v.name} ({v.model.preset}): {steps:,} steps, {tokens / 1e9:.2f}B tokens; "
              + (times or "no measured rate"))


if __name__ == "__main__":
    main(*sys.argv[1:])
