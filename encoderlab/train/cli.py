"""``encoderlab pretrain RECIPE.yaml [key=value ...]``; works under torchrun for data parallelism."""

from __future__ import annotations

import signal

from encoderlab.train import PretrainConfig, pretrain


def register(sub) -> None:
    p = sub.add_parser("pretrain", help="pretrain (or resume) a model from a recipe",
                       description="Pretrain from a YAML recipe; key=value overrides (e.g. trainer.max_steps=100). "
                                   "Resumes from the run directory's latest checkpoint unless trainer.resume=never.")
    p.add_argument("recipe")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=_pretrain)


def _pretrain(args) -> int:
    cfg = PretrainConfig.from_yaml(args.recipe).with_overrides(args.overrides)
    result = pretrain(cfg)
    print(f"{result.status}: step {result.step}, {result.tokens} tokens, {result.flops:.3e} FLOPs, "
          f"checkpoint {result.checkpoint}")
    if result.eval:
        causal = "eval_clm_*: next tokens under the causal mask; " if "eval_clm_loss" in result.eval else ""
        print(f"held-out ({causal}15% of tokens, each shown as [MASK]; the log's first lines say how training "
              "accuracy differs): " + " ".join(f"{k}={v:.4f}" for k, v in result.eval.items() if k != "step"))
    if result.status == "interrupted":  # 130 for Ctrl-C (SIGINT), 143 for SIGTERM, as a shell reports them
        return 128 + int(result.stop_signal or signal.SIGTERM)
    return 0 if result.status == "completed" else 3
