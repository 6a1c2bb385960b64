"""UniLM-style generation from MLM weights on the Wikipedia title task (claim 12's measurement).

Each ``--model LABEL=CHECKPOINT:NETWORK`` is fine-tuned as a seq2seq model (encoderlab.generate)
to generate an article's title from its first paragraph, ../shared/data/enwiki_extract held out
by article, and scored on dev and test with exact match, token F1 and ROUGE-L, greedy and beam.
NETWORK is mlm (BERT/ALBERT), generator or discriminator (an ELECTRA pair), or random (the same
shape, no pretraining: the control that says whether pretraining helped at all). A lead baseline
(the paragraph up to its first " (", ",", " is ", " was ", ...) is scored beside them: most of a
title is copied from the paragraph's opening, and a model below this baseline has not learned to.

    python benchmarks/generation.py \\
        --model gen=CKPT:generator --model disc=CKPT:discriminator --model rand=CKPT:random \\
        --train 4000 --eval 300 --seeds 0,1,2 --json runs/bench/generation.json \\
        --figure docs/generation/title_task.png epochs=3

Trailing ``key=value`` items override GenerationConfig (encoderlab/generate/config.py); precision
is fp32 for every model unless set (auto decides per width, so it could differ between models). Claim 12
compares BERT, an ELECTRA generator and an ELECTRA discriminator pretrained at equal FLOPs: give
the checkpoints of such a study (``encoderlab study``); any checkpoints run. Without the data the
script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from encoderlab.data.tokenizer import load_tokenizer  # noqa: E402
from encoderlab.generate import metrics as M  # noqa: E402
from encoderlab.generate.config import GenerationConfig  # noqa: E402
from encoderlab.generate.tasks import load_task  # noqa: E402
from encoderlab.generate.train import reference_text, run_generation  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "enwiki_extract"
NETWORKS = ("auto", "mlm", "generator", "discriminator", "random")
_LEAD_END = re.compile(r" \(| is | was | are | were | has | had |, |; | - ")


def lead(paragraph: str, max_words: int = 12) -> str:
    """The paragraph up to the first place a title usually ends (at most max_words words)."""
    m = _LEAD_END.search(paragraph)
    head = paragraph[: m.start()] if m else paragraph
    return " ".join(head.split()[:max_words])


def parse_model(spec: str) -> tuple[str, str, str]:
    label, eq, rest = spec.partition("=")
    path, colon, network = rest.rpartition(":")
    if not eq or not colon or network not in NETWORKS:
        raise SystemExit(f"--model {spec!r}: expected LABEL=CHECKPOINT:NETWORK, NETWORK one of {NETWORKS}")
    return label, path, network


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", required=True, metavar="LABEL=CHECKPOINT:NETWORK")
    ap.add_argument("--data", default=str(DATA), help="WikiExtractor files (default ../shared/data/enwiki_extract)")
    ap.add_argument("--train", type=int, default=4000, help="training pairs (the first N of the train split)")
    ap.add_argument("--eval", type=int, default=300, help="dev and test pairs each")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write every result here")
    ap.add_argument("--figure", default=None, help="bar chart of test scores (needs matplotlib)")
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args()
    models = [parse_model(s) for s in args.model]
    if not Path(args.data).exists():
        print(f"skipped: the title task needs WikiExtractor files at {args.data} (not present)")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    # One precision for every model (fp32 unless overridden): auto is decided per width, and would
    # fine-tune an ELECTRA generator in fp32 beside its wider discriminator in bf16.
    cfg = GenerationConfig(max_train_examples=args.train, max_eval_examples=args.eval, precision="fp32")
    cfg = cfg.with_overrides(args.overrides)
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    task = load_task(args.data, limits={"train": args.train, "dev": args.eval, "test": args.eval})
    print(f"{task.summary()} ({time.perf_counter() - t0:.1f} s)")
    rows, results = [], {}
    for label, path, network in models:
        print(f"== {label}: {path} ({network})")
        t = time.perf_counter()
        r = run_generation(path, task, cfg, seeds, network=network)
        results[label] = {**r.to_dict(), "wall_s": time.perf_counter() - t}
        rows.append((label, r.network + (" (fresh head)" if r.fresh_head else ""), r.summary,
                     statistics.median(s.steps for s in r.seeds), statistics.median(s.train_time_s for s in r.seeds)))
    tok = load_tokenizer(models[0][1])
    baseline = {f"{split}/lead/{k}": v for split in ("dev", "test") if task.splits.get(split)
                for k, v in M.score([reference_text(tok, lead(p.source)) for p in task.splits[split]],
                                    [reference_text(tok, p.target) for p in task.splits[split]]).items()}
    results["lead_baseline"] = baseline
    print_table(rows, baseline, cfg.beam_size, len(seeds))
    info = {"machine": machine(), "config": cfg.to_dict(), "task": task.to_dict(), "seeds": seeds,
            "wall_s": time.perf_counter() - t0}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"info": info, "results": results}, indent=2, ensure_ascii=False))
        print(f"results: {args.json}")
    if args.figure:
        plot(rows, baseline, cfg.beam_size, args.figure)
    print(f"total {info['wall_s']:.0f} s on {info['machine']['cpu']}, {torch.get_num_threads()} thread(s)")


def print_table(rows, baseline: dict, beam: int, n_seeds: int) -> None:
    decoders = ["greedy"] + ([f"beam{beam}"] if beam > 1 else [])
    head = "| model | network | steps | train s | " + " | ".join(
        f"{split} {d} EM / F1 / RL" for split in ("dev", "test") for d in decoders) + " |"
    print(f"\n(median of {n_seeds} seed(s); EM exact match, F1 token F1, RL ROUGE-L, all x100)\n")
    print(head)
    print("|" + "---|" * (4 + 2 * len(decoders)))

    def cells(get, split, d):
        vals = [get(f"{split}/{d}/{m}") for m in ("exact_match", "f1", "rouge_l")]
        return " / ".join("-" if v is None else f"{100 * v:.1f}" for v in vals)

    for label, network, summary, steps, secs in rows:
        get = lambda k, s=summary: s[k]["median"] if k in s else None  # noqa: E731
        print(f"| {label} | {network} | {steps:.0f} | {secs:.0f} | "
              + " | ".join(cells(get, split, d) for split in ("dev", "test") for d in decoders) + " |")
    lead_get = lambda k: baseline.get(re.sub(r"/(greedy|beam\d+)/", "/lead/", k))  # noqa: E731
    lead_cells = [cells(lead_get, split, d) for split in ("dev", "test") for d in decoders]
    print("| lead baseline | - | - | - | " + " | ".join(lead_cells) + " |")


def plot(rows, baseline: dict, beam: int, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no figure: matplotlib is not installed")
        return
    decoders = ["greedy"] + ([f"beam{beam}"] if beam > 1 else [])
    split = "test" if any(k.startswith("test/") for k in baseline) else "dev"
    labels = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(labels), 3.2))
    width = 0.8 / len(decoders)
    for j, d in enumerate(decoders):
        vals = [100 * r[2][f"{split}/{d}/f1"]["median"] for r in rows]
        lows = [100 * r[2][f"{split}/{d}/f1"]["min"] for r in rows]
        highs = [100 * r[2][f"{split}/{d}/f1"]["max"] for r in rows]
        xs = [i + (j - (len(decoders) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, vals, width, label=d, yerr=[[v - lo for v, lo in zip(vals, lows)],
                                               [hi - v for v, hi in zip(vals, highs)]], capsize=3)
    ax.axhline(100 * baseline[f"{split}/lead/f1"], color="gray", linestyle="--", label="lead baseline")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel(f"{split} token F1 (x100)")
    ax.set_title("Wikipedia title from first paragraph (median, min-max over seeds)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
