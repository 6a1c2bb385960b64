"""Short probes of the unigram plateau: which change gets a tiny model off it soonest?

    python benchmarks/plateau_probes.py --name seq32 --steps 2400 --seq-len 32 --batch-size 128
    python benchmarks/plateau_probes.py --name preln --steps 3000 --norm pre
    python benchmarks/plateau_probes.py --model electra-tiny --name e-g1 --generator-multiplier 1 \
        --steps 1800 --seq-len 32 --batch-size 128

--model electra-tiny probes the ELECTRA pair the same way (the changes reach the generator too;
--generator-multiplier, --sharing, --two-stage and --disc-weight are ELECTRA's own). For ELECTRA,
1,800 steps at length 32 proved too short to tell settings apart: an equal-size generator leaves
the plateau after 2,500-3,000 steps (docs/benchmarks.md); compare at pretrain_learning.py's budget.

Each probe is the learning benchmark's recipe (pretrain_learning.py: same token store,
lr, bf16, held-out evaluation with every chosen token shown as [MASK]) for --steps steps, the
learning rate decaying to zero over them, with one thing changed: the initializer range, pre- or
post-LayerNorm, dropout, training masks (all [MASK] instead of 80/10/10), or the batch shape.
Held-out batches have the probe's own length. Prints the held-out curve; the run directory is
--work/NAME/bert-tiny. Run two probes side by side, one thread each, on a 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch
from pretrain_learning import add_run_arguments, build_store, recipe

from encoderlab.data.masking import MaskingConfig
from encoderlab.data.store import TokenStore
from encoderlab.models.presets import preset
from encoderlab.train import ModelSpec, pretrain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--name", required=True)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--init", type=float, default=None, help="initializer_range (bert-tiny: 0.02)")
    ap.add_argument("--norm", choices=("post", "pre"), default=None)
    ap.add_argument("--dropout", type=float, default=None, help="hidden and attention dropout (0.1)")
    ap.add_argument("--all-mask", action="store_true", help="train with every chosen token as [MASK]")
    ap.add_argument("--model", choices=("bert-tiny", "electra-tiny"), default="bert-tiny")
    ap.add_argument("--disc-weight", type=float, default=None, help="ELECTRA discriminator loss weight (50)")
    ap.add_argument("--clip", type=float, default=None, help="gradient clipping norm (1.0; 0 disables)")
    ap.add_argument("--position", choices=("absolute", "rope"), default=None, help="position encoding (absolute)")
    ap.add_argument("--gated-ffn", action="store_true", help="GeGLU feed-forward (with the preset's gelu)")
    ap.add_argument("--no-bias", action="store_true", help="no biases in the layers' linears and norms")
    ap.add_argument("--mask-rate", type=float, default=None, help="share of tokens chosen for MLM (0.15)")
    ap.add_argument("--layers", type=int, default=None, help="layers of every network (the preset's: 2)")
    ap.add_argument("--generator-layers", type=int, default=None,
                    help="ELECTRA: the generator's layers alone (after --layers), e.g. a shallower generator")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    store = build_store(work, Path(args.corpus), args.vocab, workers=2)

    name = args.model
    cfg = recipe(name, store, work / args.name, args, max_steps=args.steps, eval_every=max(1, args.steps // 6))
    spec = cfg.model
    model = preset(name, vocab_size=TokenStore(store, "train").vocab_size,
                   **({"generator_multiplier": spec.generator_multiplier,
                       "embedding_sharing": spec.embedding_sharing} if name.startswith("electra") else {}))
    changes = {"max_position_embeddings": args.seq_len}
    if args.init is not None:
        changes["initializer_range"] = args.init
    if args.norm is not None:
        changes["norm"] = args.norm
    if args.dropout is not None:
        changes["hidden_dropout"] = changes["attention_dropout"] = args.dropout
    if args.position is not None:
        changes["position"] = args.position
    if args.layers is not None:
        changes["num_layers"] = args.layers
    if args.gated_ffn:
        changes["gated_ffn"] = True
    if args.no_bias:
        changes["bias"] = False
    nets = {"encoder": dataclasses.replace(model.encoder, **changes)}
    if model.generator is not None:  # ELECTRA: the generator gets the same changes
        nets["generator"] = dataclasses.replace(model.generator, **changes)
    if args.generator_layers is not None:
        if model.generator is None:
            ap.error("--generator-layers needs --model electra-tiny")
        nets["generator"] = dataclasses.replace(nets["generator"], num_layers=args.generator_layers)
    model = dataclasses.replace(model, **nets)
    cfg = cfg.replace(model=ModelSpec(config=model))
    if args.disc_weight is not None:
        cfg = cfg.replace(objective=cfg.objective.replace(disc_weight=args.disc_weight))
    if args.clip is not None:
        cfg = cfg.replace(optimizer=cfg.optimizer.replace(clip_norm=args.clip))
    if args.mask_rate is not None:
        masking = cfg.objective.masking.replace(rate=args.mask_rate)
        cfg = cfg.replace(objective=cfg.objective.replace(masking=masking))
    if args.all_mask:
        every = MaskingConfig(mask_fraction=1.0, random_fraction=0.0, keep_fraction=0.0)
        cfg = cfg.replace(objective=cfg.objective.replace(masking=every))
    result = pretrain(cfg)
    for line in (work / args.name / name / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["split"] != "eval":
            continue
        if "eval_mlm_accuracy" in row:
            print(f"{args.name} step {row['step']}: held-out MLM accuracy {row['eval_mlm_accuracy']:.4f}, "
                  f"loss {row['eval_mlm_loss']:.3f}")
        else:
            print(f"{args.name} step {row['step']}: held-out generator accuracy {row['eval_gen_accuracy']:.4f}, "
                  f"loss {row['eval_gen_loss']:.3f}; discriminator AUC {row['eval_disc_auc']:.4f}")
    print(f"{args.name}: {result.step} steps, status {result.status}")


if __name__ == "__main__":
    main()
