"""Does pretraining learn? bert-tiny and electra-tiny on English Wikipedia at one fixed FLOPs budget.

    python benchmarks/pretrain_learning.py --work runs/learning --minutes 10

1. Builds (or reuses) a WordPiece tokenizer and token store from ../shared/data/enwiki_extract.
2. Calibrates the FLOPs budget: a short bert-tiny run measures analytic FLOPs/s on this machine,
   budget = that rate x --minutes (or give --flops directly). Both models get the same budget.
3. Pretrains bert-tiny (MLM + NSP) and electra-tiny (RTD) in precision auto, evaluating on the
   store's held-out split at fixed settings (15% masking, 80/10/10, fixed seed) ~10 times.
4. Computes two count baselines on exactly the same held-out masked positions: unigram (always the
   most frequent non-special training token) and bigram (the most frequent successor of the visible
   left neighbour).

Prints a markdown summary (final figures and curves) for docs/benchmarks.md and writes
results-MODELS.json in --work. A tiny model that does not clearly beat the unigram baseline is a bug.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.masking import MaskingConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.tokenizer import train_tokenizer
from encoderlab.objectives import ObjectiveConfig
from encoderlab.train import DataConfig, ModelSpec, OptimizerConfig, PretrainConfig, TrainerConfig, pretrain
from encoderlab.train.baselines import count_baselines

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "enwiki_extract"
ELECTRA_MASK = {"rate": 0.15, "mask_fraction": 0.85, "random_fraction": 0.0, "keep_fraction": 0.15}


def build_store(work: Path, corpus: Path, vocab: int, workers: int) -> Path:
    tok, store = work / "tokenizer", work / "store"
    ccfg = CorpusConfig(paths=(str(corpus),), format="wikiextractor")
    if not (tok / "tokenizer.json").exists():
        t0 = time.perf_counter()
        train_tokenizer(Corpus(ccfg), vocab_size=vocab, out=tok)
        print(f"tokenizer: {time.perf_counter() - t0:.0f}s")
    if not (store / "meta.json").exists():
        t0 = time.perf_counter()
        prepare(PrepareConfig(corpus=ccfg, workers=workers, valid_count=300), tok, store)
        print(f"prepare: {time.perf_counter() - t0:.0f}s")
    return store


def recipe(name: str, store: Path, work: Path, args, **trainer) -> PretrainConfig:
    electra = name.startswith("electra")
    t = dict(run_dir=str(work / name), log_every=50, checkpoint_every=0, precision=args.precision, resume="never",
             seed=args.seed)
    t.update(trainer)
    return PretrainConfig(
        model=ModelSpec(preset=name, max_position_embeddings=args.seq_len,
                        generator_multiplier=args.generator_multiplier if electra else None,
                        embedding_sharing=args.sharing),
        objective=(ObjectiveConfig(kind="rtd", masking=MaskingConfig(**ELECTRA_MASK),
                                   two_stage_generator_steps=args.two_stage,
                                   two_stage_init_discriminator=args.two_stage > 0,
                                   two_stage_freeze_generator=not args.no_freeze) if electra
                   else ObjectiveConfig(kind="mlm")),
        optimizer=OptimizerConfig(lr=args.lr, warmup_steps=args.warmup, weight_decay=0.01),
        data=DataConfig(kind="store", path=str(store), batch_size=args.batch_size, seq_len=args.seq_len,
                        eval_batches=args.eval_batches, short_seq_len=args.short_seq_len,
                        short_seq_steps=args.short_seq_steps),
        trainer=TrainerConfig(**t))


def curves(run_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == "eval"]


def add_run_arguments(ap: argparse.ArgumentParser) -> None:
    """The corpus, store and training options that recipe() reads (shared with bf16_curve.py)."""
    ap.add_argument("--work", default="runs/learning")
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--short-seq-len", type=int, default=None,
                    help="short-sequence warm-up: this length (same tokens per step) for --short-seq-steps steps")
    ap.add_argument("--short-seq-steps", type=int, default=0)
    ap.add_argument("--generator-multiplier", type=float, default=None,
                    help="ELECTRA generator width / discriminator width (default: the preset's, 1/4)")
    ap.add_argument("--sharing", choices=("none", "shared", "gdes"), default="shared",
                    help="ELECTRA embedding sharing between generator and discriminator")
    ap.add_argument("--two-stage", type=int, default=0,
                    help="ELECTRA: the generator alone for this many steps, then frozen while the discriminator, "
                         "initialized from it, trains (the paper's two-stage; needs --generator-multiplier 1)")
    ap.add_argument("--no-freeze", action="store_true",
                    help="with --two-stage: keep training the generator after the switch (a warm start of "
                         "the discriminator, then joint training)")
    ap.add_argument("--eval-batches", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                    help="fix it in ablations, so that runs on one machine compare alike")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; on a shared 2-core box 2 threads oversubscribe and run ~5x slower")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--flops", type=float, default=None, help="fixed budget; default: calibrated from --minutes")
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--models", default="bert-tiny,electra-tiny",
                    help="run these (separate processes may run one each, with their own results file)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    store = build_store(work, Path(args.corpus), args.vocab, args.workers)

    budget = args.flops
    if budget is None:  # FLOPs/s of bert-tiny here (after a warm-up), times the wall-clock target
        cal = pretrain(recipe("bert-tiny", store, work / "calibration", args, max_steps=60, log_every=20,
                              eval_every=0))
        rows = [json.loads(x) for x in (work / "calibration/bert-tiny/metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if r["split"] == "train"]
        rate = (train[-1]["flops"] - train[0]["flops"]) / (train[-1]["elapsed_s"] - train[0]["elapsed_s"])
        budget = rate * args.minutes * 60
        print(f"calibration: {rate / 1e9:.1f} GFLOP/s (analytic) -> budget {budget:.3e} FLOPs ({cal.step} steps)")

    results = {"budget_flops": budget, "args": vars(args), "machine": platform.processor() or platform.machine(),
               "torch": torch.__version__, "threads": torch.get_num_threads()}
    models = args.models.split(",")
    for name in models:
        probe = recipe(name, store, work / "probe", args, max_steps=2, eval_every=0, log_every=1)
        probe = probe.replace(data=probe.data.replace(eval_batches=0))
        per_step = pretrain(probe).flops / 2
        every = max(1, int(budget / per_step / args.evals))
        t0 = time.perf_counter()
        r = pretrain(recipe(name, store, work, args, max_flops=budget, eval_every=every))
        if r.status != "completed":  # SIGTERM/SIGINT stop the trainer gracefully: stop here too
            raise SystemExit(f"{name}: {r.status} at step {r.step}")
        results[name] = {"steps": r.step, "tokens": r.tokens, "flops": r.flops, "wall_s": time.perf_counter() - t0,
                         "final": r.eval, "curve": curves(work / name)}
        print(name, json.dumps(results[name]["final"]), f"{r.step} steps, {results[name]['wall_s']:.0f}s")
    base = count_baselines(recipe("bert-tiny", store, work, args, max_steps=1))
    results["unigram_accuracy"], results["bigram_accuracy"] = base["unigram"], base["bigram"]
    results["unigram_loss"] = base["unigram_loss"]
    (work / f"results-{'-'.join(models)}.json").write_text(json.dumps(results, indent=1))
    print(markdown(results))


def markdown(res: dict) -> str:
    names = [n for n in ("bert-tiny", "electra-tiny") if n in res]
    a = res["args"]
    lines = [
        f"Budget {res['budget_flops']:.3e} FLOPs each (analytic, forward + 2x backward), batch "
        f"{a['batch_size']} x {a['seq_len']}, lr {a['lr']}, {a['warmup']} warm-up steps, "
        f"precision {a.get('precision', 'auto')}, {res['threads']} threads.",
        "",
        "| model | steps | tokens | wall-clock | held-out MLM accuracy | held-out MLM loss | disc. accuracy "
        "| disc. AUC |",
        "|---|---|---|---|---|---|---|---|",
        f"| unigram baseline | - | - | - | {res['unigram_accuracy']:.4f} | {res['unigram_loss']:.3f} | - | - |",
        f"| bigram baseline (left neighbour) | - | - | - | {res['bigram_accuracy']:.4f} | - | - | - |",
    ]
    for n in names:
        r, f = res[n], res[n]["final"]
        if n == "bert-tiny":
            cells = f"{f['eval_mlm_accuracy']:.4f} | {f['eval_mlm_loss']:.3f} | - | -"
        else:
            cells = (f"{f['eval_gen_accuracy']:.4f} | {f['eval_gen_loss']:.3f} | {f['eval_disc_accuracy']:.4f} | "
                     f"{f['eval_disc_auc']:.4f}")
        label = "bert-tiny (MLM+NSP)" if n == "bert-tiny" else "electra-tiny (generator / discriminator)"
        lines.append(f"| {label} | {r['steps']} | {r['tokens'] / 1e6:.1f} M | {r['wall_s'] / 60:.1f} min | {cells} |")
    for n in names:
        lines += ["", f"{n} curve (held-out):", ""]
        if n == "bert-tiny":
            lines += ["| FLOPs | tokens | MLM acc | MLM loss |", "|---|---|---|---|"]
            lines += [f"| {r['flops']:.2e} | {r['tokens'] / 1e6:.1f} M | {r['eval_mlm_accuracy']:.4f} | "
                      f"{r['eval_mlm_loss']:.3f} |" for r in res[n]["curve"]]
        else:
            lines += ["| FLOPs | tokens | gen. MLM acc | gen. MLM loss | disc. acc | disc. AUC |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {r['flops']:.2e} | {r['tokens'] / 1e6:.1f} M | {r['eval_gen_accuracy']:.4f} | "
                      f"{r['eval_gen_loss']:.3f} | {r['eval_disc_accuracy']:.4f} | {r['eval_disc_auc']:.4f} |"
                      for r in res[n]["curve"]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
