"""What the built-in claims study costs on this machine, estimated from measured stages.

    python scripts/claims_cost.py --out runs/claims --save runs/claims-speed.json \
        --bert-record docs/speedrun/records/t1-claims-bert-seed0-2026-12-06T031258+0000.json \
        --pair-s 95 --prompt-s 40 --blimp-s 50
    python scripts/claims_cost.py --rates docs/studies/claims-arms/claims-speed.json ...   # no re-timing
    python scripts/claims_cost.py --rates R --out runs/claims --retime all-tokens-mlm-copy --save R2 ...

Pretraining: a run's core-seconds are the study's budget over its FLOP rate. BERT's rate is the one a
speedrun record measured (one thread, side by side with another one-thread job, nothing else
running); every other variant's is BERT's times its own rate relative to BERT's, timed here as the
study's speed stage times them (study/speed.py: each variant's own pretraining step at full length,
all variants in turns in one process, one thread, the best of the rounds; tokens/s x planned FLOPs
per token). clm-then-mlm is timed in its causal phase (the first half of its steps); its masked phase
is BERT's step (the same network and objective), so it is costed at BERT's rate. ``--out``: a study
folder whose data stage is prepared (its token store feeds the steps).
Fine-tuning: a checkpoint-task pair's measured core-seconds (all its seeds), scaled for a wider
encoder by the split the study's ETA weights use (study/plan.py: a fixed share and a share that grows
with the encoder's FLOPs). Prompting and BLiMP: measured core-seconds per run and per scoring. Two jobs
share the two cores: hours on 2 cores = core-hours / 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from encoderlab.study.cli import load_study
from encoderlab.study.config import StudyConfig, VariantSpec
from encoderlab.study.plan import family_model, pair_cost_share, plan
from encoderlab.study.runner import control_shapes
from encoderlab.study.speed import training_speed
from encoderlab.study.stages import Stages
from encoderlab.train.config import InitConfig
from encoderlab.train.flops import phase_step_flops
from encoderlab.train.init import resolve_model


def measure_rates(cfg: StudyConfig, out: Path, rounds: int) -> dict[str, float]:
    """{variant: FLOP/s of its pretraining step at full length, one thread}."""
    data = (Stages(out / "stages.json").data.get("data") or {}).get("result")
    if data is None:
        raise SystemExit(f"{out}/stages.json has no data stage: run the study's data stage there first")
    torch.set_num_threads(1)
    recipes = plan(cfg.replace(pretrain_seeds=1), data, out / "cost-probe")
    speed = training_speed(recipes, rounds=rounds)
    out_rates = {}
    for name, r in recipes.items():
        v = cfg.variant(name)
        model = resolve_model(r.model, r.init, cfg.vocab_size)
        B, T = r.data.batch_size, r.data.seq_len
        first_phase = phase_step_flops(model, v.objective, B, T)[0][1]  # the phase the speed stage's steps run in
        out_rates[name] = speed[name]["tokens_per_s"] * first_phase / (B * T)
    return out_rates


def run_minutes(cfg: StudyConfig, v: VariantSpec, rates: dict[str, float]) -> float:
    """Minutes of a core for one pretraining run of ``v``: each phase's share of the budget at its rate
    (FLOP/s), clm-then-mlm's masked phase at BERT's."""
    phases = phase_step_flops(variant_model(cfg, v), v.objective, cfg.base.data.batch_size, cfg.base.data.seq_len)
    spent = sum(share * flops for share, flops in phases)
    phase_rates = [rates[v.name]] + [rates["bert"]] * (len(phases) - 1)
    seconds = sum(cfg.budget_flops * share * flops / spent / rate for (share, flops), rate in zip(phases, phase_rates))
    return seconds / 60


def variant_model(cfg: StudyConfig, v: VariantSpec):
    return resolve_model(family_model(cfg.base.model, v.model), InitConfig(), cfg.vocab_size)


def pair_weight(cfg: StudyConfig, v: VariantSpec) -> float:
    """A pair's cost relative to a bert-tiny-shaped one's (the study's ETA split, plan.pair_cost_share)."""
    return pair_cost_share(variant_model(cfg, v).encoder)


def only(cfg: StudyConfig, names: list[str]) -> StudyConfig:
    """The study with these variants only; the fields that name another go with it."""
    return cfg.replace(variants=tuple(v for v in cfg.variants if v.name in names), allow_missing_roles=True,
                       extra_finetune_fractions={n: f for n, f in cfg.extra_finetune_fractions.items() if n in names})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bert-record", required=True, help="a speedrun T1 record of the claims study's bert")
    ap.add_argument("--out", type=Path, help="a study folder with a prepared data stage (to time the steps)")
    ap.add_argument("--rates", type=Path, help="rates saved by an earlier --save (instead of timing)")
    ap.add_argument("--save", type=Path, help="write the timed rates here")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pair-s", type=float, required=True, help="core-seconds of one 4 x 128 checkpoint-task pair")
    ap.add_argument("--prompt-s", type=float, default=0.0, help="core-seconds of one run's prompting probe")
    ap.add_argument("--blimp-s", type=float, default=0.0, help="core-seconds of one BLiMP dev scoring (0: off)")
    ap.add_argument("--study", default="claims")
    ap.add_argument("--retime", default="", help="with --rates and --out: time these variants again beside "
                    "bert and update their rates in --rates' scale (after a change to their step)")
    ap.add_argument("--skip", default="", help="comma-separated variants to leave out (a scope's cost: "
                    "gpt-bert,clm-then-mlm,clm is the study before issue 36's arms)")
    args = ap.parse_args()

    cfg = full = load_study(args.study)  # full: bert, the reference of every rate and pair, even when skipped
    skip = [n for n in args.skip.split(",") if n]
    retime = [n for n in args.retime.split(",") if n]
    unknown = [n for n in skip + retime if cfg.variant(n) is None]
    if unknown:
        raise SystemExit(f"--skip/--retime: no variant {unknown} in {args.study} (its variants: "
                         f"{[v.name for v in cfg.variants]})")
    if skip:
        cfg = only(cfg, [v.name for v in cfg.variants if v.name not in skip])
    if retime and not (args.rates and args.out):
        raise SystemExit("--retime needs --rates (the file to update) and --out (a study folder to time in)")
    if args.rates:
        measured = json.loads(args.rates.read_text())
        if retime:  # these variants' rates again, against bert timed beside them, in the file's scale
            again = measure_rates(only(full, ["bert", *retime]), args.out, args.rounds)
            measured.update({n: measured["bert"] * again[n] / again["bert"] for n in retime})
    elif args.out:
        measured = measure_rates(full, args.out, args.rounds)
    else:
        raise SystemExit("give --out (to time the steps) or --rates")
    if args.save and (retime or not args.rates):
        args.save.write_text(json.dumps(measured, indent=1) + "\n")
    record = json.loads(Path(args.bert_record).read_text())
    bert_rate = record["reached"]["flops"] / record["reached"]["seconds"]
    rates = {name: r / measured["bert"] * bert_rate for name, r in measured.items()}  # FLOP/s at BERT's record
    minutes = {v.name: run_minutes(cfg, v, rates) for v in cfg.variants}
    runs = cfg.pretrain_seeds
    pretrain = sum(minutes.values()) * 60 * runs
    # each checkpoint fine-tuned: the final one, the extra fractions', and an unshared copy of it (unshare)
    pairs = {v.name: len(cfg.tasks) * runs * (1 + len(cfg.extra_finetune_fractions.get(v.name, [])) + v.unshare)
             for v in cfg.variants}
    bert_weight = pair_weight(full, full.variant("bert"))
    finetune = sum(n * args.pair_s * pair_weight(cfg, cfg.variant(name)) / bert_weight for name, n in pairs.items())
    shapes = set(control_shapes(cfg, {v.name: variant_model(cfg, v) for v in cfg.variants}).values())
    control = len(shapes) * len(cfg.tasks) * args.pair_s if cfg.random_control else 0.0  # one per architecture
    prompted = sum(runs for v in cfg.variants if v.objective.kind != "clm") if cfg.prompt_tasks else 0
    scorings = len(cfg.variants) * (len(cfg.eval_fractions) + runs - 1)
    rows = [("pretraining", f"{len(cfg.variants)} variants x {runs} seeds", pretrain),
            ("fine-tuning", f"{sum(pairs.values())} checkpoint-task pairs", finetune),
            ("random-init controls", f"{len(shapes) * len(cfg.tasks)} pairs ({len(shapes)} architectures)", control),
            ("prompting probe", f"{prompted} runs", prompted * args.prompt_s),
            ("BLiMP dev (`blimp=`)", f"{scorings} scorings", scorings * args.blimp_s)]
    print(f"bert pretrains at {bert_rate:.3g} FLOP/s ({record['machine'].get('cpu')}, "
          f"{Path(args.bert_record).name}); two jobs share the two cores\n")
    print("| stage | what | core-hours | hours on 2 cores |\n|---|---|---|---|")
    for what, n, s in rows:
        print(f"| {what} | {n} | {s / 3600:.1f} | {s / 7200:.1f} |")
    total = sum(s for *_, s in rows)
    print(f"| total | | {total / 3600:.1f} | **{total / 7200:.1f}** |")
    print(f"\nwithout BLiMP dev: {(total - rows[-1][2]) / 7200:.1f} hours on 2 cores")
    print("minutes of a core per pretraining run: " + ", ".join(f"{n} {m:.1f}" for n, m in minutes.items()))


if __name__ == "__main__":
    main()
