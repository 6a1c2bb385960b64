"""The encoder speedrun: wall-clock and FLOPs to fixed quality targets on English Wikipedia.

    python benchmarks/speedrun.py run t1 --variant bert                   # the claims study's recipe
    python benchmarks/speedrun.py run t1 --variant bert --set optimizer.lr=0.002 --name lr2e-3
    python benchmarks/speedrun.py run t2 --variant electra
    python benchmarks/speedrun.py run t3 --variant bert --minutes 60
    python benchmarks/speedrun.py reference --minutes 10                  # plain transformers BERT-tiny
    python benchmarks/speedrun.py table docs/speedrun/records             # docs/speedrun.md's rows

Targets (docs/speedrun.md):
- t1: held-out MLM accuracy 0.30 at 15% of tokens masked BERT's way (80% [MASK], 10% random, 10% kept),
  on positions fixed once (16 held-out batches of 32 x 128, seeds 12345+i), with the unigram and bigram
  accuracies at the same positions beside it. For a BERT-family network (an MLM head on the encoder).
- t2: a joint from-scratch ELECTRA's discriminator held-out ROC AUC 0.80 on its own generator's fakes,
  with the generator at least half way from the unigram to the bigram accuracy on the trainer's
  held-out evaluation (15%, every chosen token shown as [MASK]).
- t3: BLiMP dev (36 of BLiMP's 67 paradigms, 100 pairs each, by pseudo-log-likelihood) 0.65.

The data are the claims study's: a WordPiece vocabulary of 8,192 trained on the corpus and a held-out
article split (5%, seed 0), prepared once under --out and reused. A run is the claims study's recipe
for --variant (encoderlab/study/builtin/claims.yaml: its budget sets the schedule's horizon) with
--set overrides; it stops at the target (or at --minutes, or at the end of the horizon). The clock
counts training steps only (data loading included, the evaluations and the one-time setup of model
and precision probe not: setup is recorded beside it). Each run writes one JSON record under --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from encoderlab.data.masking import MaskingConfig, mask_tokens
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.models.presets import preset
from encoderlab.objectives.base import Masked, ObjectiveConfig
from encoderlab.precision import autocast
from encoderlab.study import blimp
from encoderlab.study.cli import load_study
from encoderlab.study.data_stage import prepare_data
from encoderlab.study.plan import variant_recipe
from encoderlab.study.progress import Progress
from encoderlab.study.stages import Stages
from encoderlab.train.baselines import count_baselines, count_hits, count_tables
from encoderlab.train.data import make_source
from encoderlab.train.evaluate import EVAL_SEED, evaluate
from encoderlab.train.flops import step_flops
from encoderlab.train.trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
TARGETS = {"t1": 0.30, "t2": 0.80, "t3": 0.65}
BERT_MASKING = MaskingConfig(rate=0.15)  # 80/10/10
HELDOUT_BATCHES = 16


def study(args):
    corpus = Path(args.corpus)
    if not corpus.exists():
        sys.exit(f"speedrun: the corpus {corpus} is absent (it is ../shared/data/enwiki_extract on the project's "
                 "machines); pass --corpus")
    return load_study("claims", [f"corpus=[{corpus}]", f"out_dir={args.out}", *getattr(args, "study_set", [])])


def prepare(cfg, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    return prepare_data(cfg, out, Stages(out / "stages.json"), Progress(1.0, print, heartbeat_s=None))


class HeldOut:
    """T1's fixed held-out positions and the count baselines at them."""

    def __init__(self, data_cfg, store_path: str):
        store = TokenStore(store_path, "train")
        self.special = tuple(sorted(set(store.special_ids.values())))
        self.V, mask_id = store.vocab_size, store.special_ids["mask"]
        it = iter(make_source(data_cfg, split="valid", rank=0, world_size=1, seed=0, pairs=None))
        g = torch.Generator()
        self.batches = []
        for i in range(HELDOUT_BATCHES):
            b = next(it)
            g.manual_seed(EVAL_SEED + i)
            inputs, labels = mask_tokens(b["input_ids"], None, self.special, self.V, mask_id, BERT_MASKING, g)
            positions = (labels.view(-1) != -100).nonzero().squeeze(1)  # (M,)
            self.batches.append((Masked(input_ids=inputs, positions=positions,
                                        targets=b["input_ids"].view(-1)[positions]), b["attention_mask"]))
        top, best, _ = count_tables(store_path)
        hits = [count_hits(top, best, self.special[0], m) for m, _ in self.batches]
        n = self.positions
        self.baselines = {"unigram": sum(h[0] for h in hits) / n, "bigram": sum(h[1] for h in hits) / n}

    @property
    def positions(self) -> int:
        return sum(m.targets.numel() for m, _ in self.batches)

    @torch.no_grad()
    def accuracy(self, logits_at) -> float:
        """logits_at(input_ids (B, T), attention_mask (B, T), positions (M,)) -> (M, V) logits."""
        hits = sum(int((logits_at(m.input_ids, am, m.positions).argmax(-1) == m.targets).sum())
                   for m, am in self.batches)
        return hits / self.positions


def _mlm_logits(model, precision: str):
    def at(ids, am, positions):
        with autocast(precision, torch.device("cpu")):
            return model(ids, am, None, positions=positions).logits.float()
    return at


def metrics_of(target: str, trainer: Trainer, held: HeldOut | None, pairs: list | None) -> dict:
    model, prec = trainer.model, trainer.precision.precision
    was = model.training
    model.eval()
    try:
        if target == "t1":
            return {"t1_accuracy": held.accuracy(_mlm_logits(model, prec))}
        if target == "t2":
            ev = evaluate(model, trainer.ocfg, trainer.eval_batches, device=trainer.device, precision=prec)
            return {"disc_auc": ev["eval_disc_auc"], "gen_accuracy": ev["eval_gen_accuracy"]}
        got = blimp.score(model, load_tokenizer(trainer.tokenizer_dir), pairs, precision=prec)
        return {"blimp_dev": got["networks"][got["deployed"]]["accuracy"]}
    finally:
        model.train(was)


def reached(target: str, m: dict, baselines: dict) -> bool:
    if target == "t1":
        return m["t1_accuracy"] >= TARGETS["t1"]
    if target == "t2":
        half = (baselines["unigram"] + baselines["bigram"]) / 2
        return m["disc_auc"] >= TARGETS["t2"] and m["gen_accuracy"] >= half
    return m["blimp_dev"] >= TARGETS["t3"]


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout
        return sha.strip() + ("+dirty" if dirty.strip() else "")
    except OSError:
        return "unknown"


def write_record(out: Path, rec: dict) -> Path:
    path = out / "records" / f"{rec['target']}-{rec['name']}-seed{rec['seed']}-{rec['started'].replace(':', '')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(path)
    return path


def speedrun_recipe(args, run: str, seed: int):
    """(the claims study's recipe for --variant with the run's overrides, the prepared data): no
    checkpoints, logs or evaluations of the trainer's own (the speedrun evaluates), never a resume."""
    torch.set_num_threads(args.threads)
    cfg = study(args)
    out = Path(args.out)
    data = prepare(cfg, out)
    v = next((x for x in cfg.variants if x.name == args.variant), None)
    if v is None:
        names = ", ".join(x.name for x in cfg.variants)
        sys.exit(f"speedrun: no variant {args.variant!r} in the claims study ({names})")
    recipe = variant_recipe(cfg, v, data, out / "runs" / run, seed=seed)
    return recipe.with_overrides(["trainer.checkpoint_every=0", "trainer.log_every=0", "trainer.eval_every=0",
                                  "trainer.resume=never", *args.set]), data


def cmd_run(args) -> None:
    name = args.name or args.variant
    recipe, data = speedrun_recipe(args, f"{name}-seed{args.seed}", args.seed)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    at_commit = commit()  # now: the tree may change while a long run trains
    t0 = time.perf_counter()
    trainer = Trainer(recipe)
    held = HeldOut(recipe.data, data["store"]) if args.target == "t1" else None
    if args.target == "t1":
        baselines = held.baselines
    else:
        baselines = {k: v for k, v in count_baselines(trainer.cfg).items() if k in ("unigram", "bigram")}
    pairs = blimp.load_pairs(args.blimp, per_paradigm=100) if args.target == "t3" else None
    setup_s = time.perf_counter() - t0
    horizon = trainer.budget.steps
    every = args.eval_every or max(1, round(horizon / args.evals))
    print(f"speedrun {args.target} {name} seed {args.seed}: {trainer.precision.precision} "
          f"({trainer.precision.reason}), {torch.get_num_threads()} threads, eval every {every} steps; "
          f"baselines {baselines}", flush=True)
    curve, hit, train_s = [], None, 0.0
    limit = args.minutes * 60 if args.minutes else math.inf

    def point() -> dict:
        m = metrics_of(args.target, trainer, held, pairs)
        p = {"step": trainer.step, "seconds": round(train_s, 2), "flops": trainer.flops, "tokens": trainer.tokens,
             "load": os.getloadavg()[0], **m}
        curve.append(p)
        print(json.dumps(p), flush=True)
        return m

    while trainer.progress() < 1.0 and train_s < limit:
        t = time.perf_counter()
        trainer.train_step()
        train_s += time.perf_counter() - t
        if trainer.step % every == 0:
            if reached(args.target, point(), baselines) and hit is None:
                hit = curve[-1]
                if not args.past_target:
                    break
    if not curve or curve[-1]["step"] != trainer.step:
        if reached(args.target, point(), baselines) and hit is None:
            hit = curve[-1]
    if args.blimp_at_end and args.target != "t3":  # a T3 frontier point from a T1/T2 run, off its clock
        pairs = blimp.load_pairs(args.blimp, per_paradigm=100)
        curve[-1]["blimp_dev"] = metrics_of("t3", trainer, None, pairs)["blimp_dev"]
        print(f"BLiMP dev (36 of 67 paradigms, 100 pairs each) at the end: {curve[-1]['blimp_dev']:.4f}", flush=True)
    rec = {"target": args.target, "goal": TARGETS[args.target], "name": name, "variant": args.variant,
           "seed": args.seed, "overrides": list(args.set),
           "study_overrides": list(args.study_set), "started": started, "commit": at_commit,
           "machine": {**machine(), "cores": os.cpu_count()}, "precision": trainer.precision.precision,
           "precision_reason": trainer.precision.reason,
           "horizon_flops": trainer.cfg.trainer.max_flops, "horizon_steps": horizon, "setup_s": round(setup_s, 1),
           "baselines": baselines, "reached": hit, "final": curve[-1], "curve": curve,
           "command": " ".join(["python", "benchmarks/speedrun.py", *sys.argv[1:]])}
    print(f"record: {write_record(Path(args.out), rec)}; reached: {hit}")


def cmd_reference(args) -> None:
    """transformers' BertForMaskedLM, the standard BERT-tiny recipe (2 x 128, 2 heads, learned positions,
    dropout 0.1, 15% masking 80/10/10 at full length 128, AdamW with BERT's lr 1e-4 unless --lr), batches
    of 32 x 128 from the same store, its faster precision measured here, linear warm-up over 1% and
    decay over --minutes of training: the loop a user would write, on T1's held-out positions."""
    import transformers

    torch.set_num_threads(args.threads)
    cfg = study(args)
    out = Path(args.out)
    data = prepare(cfg, out)
    torch.manual_seed(args.seed)
    store = TokenStore(data["store"], "train")
    V, mask_id = store.vocab_size, store.special_ids["mask"]
    special = tuple(sorted(set(store.special_ids.values())))
    base = cfg.base.data.replace(kind="store", path=data["store"], tokenizer_dir=data["tokenizer"], short_seq_steps=0)
    held = HeldOut(base, data["store"])
    mcfg = preset("bert-tiny", vocab_size=V)
    enc = mcfg.encoder
    hcfg = transformers.BertConfig(vocab_size=V, hidden_size=enc.hidden_size, num_hidden_layers=enc.num_layers,
                                   num_attention_heads=enc.num_heads, intermediate_size=enc.intermediate_size,
                                   max_position_embeddings=512)
    model = transformers.BertForMaskedLM(hcfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-6)
    train = iter(make_source(base, split="train", rank=0, world_size=1, seed=args.seed, pairs=None))
    g = torch.Generator().manual_seed(args.seed)

    def step(dtype) -> None:
        b = next(train)
        x, y = mask_tokens(b["input_ids"], None, special, V, mask_id, BERT_MASKING, g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = model(input_ids=x, attention_mask=b["attention_mask"], labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    # Its best precision, measured: 5 steps each after one warm-up (at lr 0, so the weights stay as drawn).
    for group in opt.param_groups:
        group["lr"] = 0.0
    speed = {}
    for dtype in ("fp32", "bf16", "fp32", "bf16"):
        t = time.perf_counter()
        for _ in range(5):
            step(dtype)
        speed[dtype] = time.perf_counter() - t  # the second pass of each counts
    precision = min(speed, key=speed.get)
    opt.state.clear()
    B, T = base.batch_size, base.seq_len
    per_step = step_flops(mcfg, ObjectiveConfig(kind="mlm"), B, T, B * T).total  # dense logits: all positions
    limit = args.minutes * 60
    every_s = limit / args.evals
    curve, hit, train_s, steps, next_eval = [], None, 0.0, 0, every_s
    model.train()

    def logits_at(ids, am, positions):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            return model(input_ids=ids, attention_mask=am).logits.float().view(-1, V)[positions]

    def point() -> None:
        nonlocal hit
        model.eval()
        acc = held.accuracy(logits_at)
        model.train()
        p = {"step": steps, "seconds": round(train_s, 2), "flops": steps * per_step, "tokens": steps * B * T,
             "load": os.getloadavg()[0], "t1_accuracy": acc}
        curve.append(p)
        print(json.dumps(p), flush=True)
        if acc >= TARGETS["t1"] and hit is None:
            hit = p

    at_commit = commit()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"reference: BertForMaskedLM bert-tiny, {precision} (5 steps fp32 {speed['fp32']:.2f} s, bf16 "
          f"{speed['bf16']:.2f} s), {torch.get_num_threads()} threads; baselines {held.baselines}", flush=True)
    while train_s < limit:
        lr = args.lr * min(1.0, train_s / (0.01 * limit)) * max(0.0, 1 - train_s / limit)
        for group in opt.param_groups:
            group["lr"] = lr
        t = time.perf_counter()
        step(precision)
        train_s += time.perf_counter() - t
        steps += 1
        if train_s >= next_eval:
            point()
            next_eval += every_s
    if curve[-1]["step"] != steps:
        point()
    rec = {"target": "t1", "goal": TARGETS["t1"], "name": f"reference-hf-bert-tiny-lr{args.lr:g}", "variant": None,
           "seed": args.seed, "overrides": [], "started": started, "commit": at_commit,
           "machine": {**machine(), "cores": os.cpu_count()},
           "precision": precision,
           "precision_reason": f"5 steps: fp32 {speed['fp32']:.2f} s, bf16 {speed['bf16']:.2f} s",
           "horizon_s": limit, "baselines": held.baselines, "reached": hit, "final": curve[-1], "curve": curve,
           "command": " ".join(["python", "benchmarks/speedrun.py", *sys.argv[1:]])}
    print(f"record: {write_record(out, rec)}; reached: {hit}")


def _minutes(rec: dict, point: dict | None) -> str:
    return f"{point['seconds'] / 60:.1f}" if point else "not reached"


def cmd_table(args) -> None:
    """Markdown rows of docs/speedrun.md from committed records, newest first."""
    recs = [json.loads(p.read_text()) for p in sorted(Path(args.records).glob("*.json"))]
    recs.sort(key=lambda r: r["started"], reverse=True)
    metric = {"t1": "t1_accuracy", "t2": "disc_auc", "t3": "blimp_dev"}
    print("| date | target | run | seed | CPU (capability), threads | precision | minutes to target | FLOPs to target "
          "| final (minutes: value) | unigram / bigram | commit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        m, hit, fin = r["machine"], r["reached"], r["final"]
        flops = f"{hit['flops']:.2e}" if hit else "-"
        extra = f", gen {fin['gen_accuracy']:.3f}" if r["target"] == "t2" else ""
        extra += f", BLiMP dev {fin['blimp_dev']:.3f}" if "blimp_dev" in fin and r["target"] != "t3" else ""
        limits = " limited to AVX2" if m.get("isa_limits") else ""
        loads = [p["load"] for p in r["curve"] if "load" in p]
        # A run beside other work: its minutes are inflated (its FLOPs are not); marked, never mixed in.
        mean = sum(loads) / len(loads) if loads else 0.0
        busy = (f" (shared: load {mean:.1f})" if mean > m.get("cores", m["threads"] + 1) + 0.5
                else " (shared)" if r.get("shared") else "")
        print(f"| {r['started'][:10]} | {r['target'].upper()} >= {r['goal']} | {r['name']} | {r['seed']} "
              f"| {m['cpu']} ({m['capability']}{limits}), {m['threads']} | {r['precision']} | {_minutes(r, hit)}{busy} "
              f"| {flops} | {fin['seconds'] / 60:.1f}: {fin[metric[r['target']]]:.3f}{extra} "
              f"| {r['baselines']['unigram']:.3f} / {r['baselines']['bigram']:.3f} | {r['commit']} |")


def cmd_profile(args) -> None:
    """Where a training step's time goes: --steps steps of the variant's recipe (after --warmup) under
    torch.profiler, the top operators by self CPU time, and the share spent outside the model
    (fetching the batch, the optimizer)."""
    from torch.profiler import ProfilerActivity, profile

    recipe, _ = speedrun_recipe(args, "profile", 0)
    trainer = Trainer(recipe)
    if args.long:  # past the short-sequence steps: length 128
        trainer.step = trainer.cfg.data.short_seq_steps
        trainer.iterator = iter(make_source(trainer.cfg.data.replace(short_seq_steps=0), split="train", rank=0,
                                            world_size=1, seed=0, pairs=None))
    for _ in range(args.warmup):
        trainer.train_step()
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            trainer.train_step()
    wall = time.perf_counter() - t
    print(f"{args.variant} {' '.join(args.set)}: {trainer.precision.precision}, {torch.get_num_threads()} threads, "
          f"{wall / args.steps * 1000:.1f} ms a step (under the profiler)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "reference"):
        p = sub.add_parser(name)
        if name == "run":
            p.add_argument("target", choices=sorted(TARGETS))
            p.add_argument("--variant", default="bert", help="a variant of the built-in claims study")
            p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe override")
            p.add_argument("--study-set", action="append", default=[], metavar="KEY=VALUE",
                           help="a claims-study override, e.g. budget_flops=8.6e13 (the schedule's horizon), "
                                "short_seq_fraction=0.25, warmup_fraction=0.05")
            p.add_argument("--name", help="the record's name (default: the variant's)")
            p.add_argument("--eval-every", type=int, help="steps between evaluations (default: horizon / --evals)")
            p.add_argument("--past-target", action="store_true", help="train on to the horizon after the target")
            p.add_argument("--blimp", default=str(SHARED / "blimp"))
            p.add_argument("--blimp-at-end", action="store_true", help="score BLiMP dev on the last model")
        else:
            p.add_argument("--lr", type=float, default=1e-4)
        p.add_argument("--corpus", default=str(SHARED / "enwiki_extract"))
        p.add_argument("--out", default=str(ROOT / "runs" / "speedrun"))
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=torch.get_num_threads())
        p.add_argument("--minutes", type=float, default=None if name == "run" else 10.0)
        p.add_argument("--evals", type=int, default=40, help="evaluations over the horizon")
    p = sub.add_parser("profile")
    p.add_argument("--variant", default="bert")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--corpus", default=str(SHARED / "enwiki_extract"))
    p.add_argument("--out", default=str(ROOT / "runs" / "speedrun"))
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rows", type=int, default=25)
    p.add_argument("--long", action="store_true", help="profile length-128 steps (after the short ones)")
    p = sub.add_parser("table")
    p.add_argument("records", nargs="?", default=str(ROOT / "docs" / "speedrun" / "records"))
    args = ap.parse_args()
    {"run": cmd_run, "reference": cmd_reference, "table": cmd_table, "profile": cmd_profile}[args.cmd](args)


if __name__ == "__main__":
    main()
