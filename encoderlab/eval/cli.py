"""CLI: ``encoderlab finetune``, ``encoderlab eval {glue,pppl,minimal-pairs,prompt}``, ``fill``, ``detect``.

Parsing only; the work is in encoderlab.eval.{finetune,intrinsic,prompting}.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from encoderlab.eval.tasks import get_task

MODEL_HELP = "checkpoint directory (encoderlab or transformers safetensors); default $ENCODERLAB_MODEL"


def register(sub) -> None:
    p = sub.add_parser("finetune", help="fine-tune a checkpoint on a task over N seeds (median and spread)")
    _model_args(p)
    p.add_argument("--task", required=True, help="built-in task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, "
                                                 "wnli, chnsenticorp) or a task spec .yaml")
    _finetune_args(p)
    p.set_defaults(func=_finetune)

    ev = sub.add_parser("eval", help="evaluation suites: glue, pppl, minimal-pairs, prompt")
    evs = ev.add_subparsers(dest="suite", metavar="SUITE", required=True)
    g = evs.add_parser("glue", help="fine-tune and score a set of tasks; print a GLUE-style table")
    _model_args(g)
    g.add_argument("--tasks", default="cola,sst2,mrpc,stsb,rte", help="comma-separated task names or specs")
    _finetune_args(g)
    g.set_defaults(func=_glue)

    pp = evs.add_parser("pppl", help="MLM pseudo-log-likelihood and pseudo-perplexity of a text file")
    _model_args(pp)
    pp.add_argument("--text-file", required=True, help="one sentence per line")
    pp.add_argument("--max-lines", type=int, default=None)
    _precision_args(pp)
    pp.set_defaults(func=_pppl)

    mp = evs.add_parser("minimal-pairs", help="accuracy on BLiMP-format jsonl minimal pairs")
    _model_args(mp)
    mp.add_argument("--pairs", required=True, nargs="+", help="BLiMP jsonl file(s)")
    mp.add_argument("--method", default="auto", choices=["auto", "mlm", "discriminator"])
    _precision_args(mp)
    mp.set_defaults(func=_pairs)

    pr = evs.add_parser("prompt", help="PET-style zero/few-shot classification")
    _model_args(pr)
    pr.add_argument("--task", required=True)
    pr.add_argument("--data-dir", default=None)
    pr.add_argument("--k", default="0,16,32", help="comma-separated shots per class; 0 = zero-shot")
    pr.add_argument("--seeds", type=int, default=5, help="k-shot sets / training seeds per k")
    pr.add_argument("--method", default="auto", choices=["auto", "mlm", "discriminator"])
    pr.add_argument("--template", default=None, help="e.g. '{a} It was [MASK] .'")
    pr.add_argument("--verbalizer", default=None, help="comma-separated label words, in label order")
    pr.add_argument("--steps", type=int, default=100)
    pr.add_argument("--lr", type=float, default=1e-5)
    pr.add_argument("--max-eval", type=int, default=None)
    pr.add_argument("--out", default=None)
    _precision_args(pr)
    pr.set_defaults(func=_prompt)

    f = sub.add_parser("fill", help="top-k fillers for each [MASK] (MLM checkpoints)")
    f.add_argument("text")
    _model_args(f)
    f.add_argument("--top-k", type=int, default=5)
    f.set_defaults(func=_fill)

    d = sub.add_parser("detect", help="ELECTRA discriminator: per-token probability of being replaced")
    d.add_argument("text")
    _model_args(d)
    d.add_argument("--threshold", type=float, default=0.5)
    d.set_defaults(func=_detect)


def _model_args(p) -> None:
    p.add_argument("--model", default=os.environ.get("ENCODERLAB_MODEL"), help=MODEL_HELP)
    p.add_argument("--tokenizer", default=None, help="tokenizer directory (default: the checkpoint's)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")


def _precision_args(p) -> None:
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="auto (default): bf16 autocast where this machine runs it faster than fp32")
    # The flags of earlier versions, kept as aliases.
    p.add_argument("--bf16", dest="precision", action="store_const", const="bf16", help="same as --precision bf16")
    p.add_argument("--no-bf16", dest="precision", action="store_const", const="fp32", help="same as --precision fp32")


def _resolved(model, precision: str):
    """The precision to score ``model`` in on the CPU, printed with its reason."""
    from encoderlab.models.networks import ElectraPair
    from encoderlab.precision import resolve_precision

    net = model.discriminator if isinstance(model, ElectraPair) else model
    enc = net.encoder.config
    choice = resolve_precision(precision, "cpu", hidden=enc.hidden_size, intermediate=enc.intermediate_size)
    print(f"precision {choice.precision} ({choice.reason})")
    return choice.precision


def _finetune_args(p) -> None:
    p.add_argument("--data-dir", default=None, help="GLUE-style root, the task's folder, or $ENCODERLAB_DATA_DIR")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..N-1); the median is reported")
    p.add_argument("--epochs", type=float, default=None, help="default: the task's (3; 10 for RTE, STS-B)")
    p.add_argument("--lr", type=float, default=None, help="default: by model size (ELECTRA paper)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-train", type=int, default=None, help="cap training examples (a fixed random subset)")
    p.add_argument("--max-eval", type=int, default=None, help="cap examples per eval split")
    _precision_args(p)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="FinetuneConfig overrides")
    p.add_argument("--out", default=None, help="results JSON (default results/<kind>-<task>-<time>.json)")


def _setup(args):
    from encoderlab.checkpoint import load_model
    from encoderlab.eval.tokenization import load_tokenizer

    if not args.model:
        raise ValueError("no model: pass --model CKPT or set ENCODERLAB_MODEL")
    if args.threads:
        torch.set_num_threads(args.threads)
    return load_model(args.model), load_tokenizer(args.tokenizer or args.model)


def _config(args):
    from encoderlab.eval.finetune import FinetuneConfig

    cfg = FinetuneConfig(learning_rate=args.lr, epochs=args.epochs, batch_size=args.batch_size,
                         max_length=args.max_length, max_train_examples=args.max_train,
                         max_eval_examples=args.max_eval, precision=args.precision)
    return cfg.with_overrides(args.set) if args.set else cfg


def _write(results: dict, out: str | None, kind: str, name: str) -> None:
    path = Path(out or f"results/{kind}-{name}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"results: {path}")


def _finetune(args) -> int:
    from encoderlab.eval.finetune import finetune

    model, _ = _setup(args)
    r = finetune(model, args.task, _config(args), args.seeds, data_dir=args.data_dir,
                 tokenizer_dir=args.tokenizer or args.model)
    r["model"] = str(args.model)
    for k, s in r["summary"].items():
        print(f"{r['task']} {k}: median {s['median']:.4f} over {s['n']} seed(s) (min {s['min']:.4f}, "
              f"max {s['max']:.4f}, std {s['std']:.4f})")
    _write(r, args.out, "finetune", r["task"])
    return 0


def _glue(args) -> int:
    from encoderlab.eval.finetune import evaluate_glue, glue_table

    model, _ = _setup(args)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for t in tasks:
        get_task(t)  # fail on a typo before any training
    r = evaluate_glue(model, tasks, _config(args), args.seeds, data_dir=args.data_dir,
                      tokenizer_dir=args.tokenizer or args.model)
    r["model"] = str(args.model)
    for t in r["tasks"].values():
        t["model"] = str(args.model)
    print(glue_table(r))
    _write(r, args.out, "glue", "-".join(r["tasks"]))
    return 0


def _pppl(args) -> int:
    from encoderlab.eval.intrinsic import pseudo_perplexity

    model, tok = _setup(args)
    lines = [s.strip() for s in Path(args.text_file).read_text(encoding="utf-8").splitlines() if s.strip()]
    lines = lines[: args.max_lines] if args.max_lines else lines
    t0 = time.perf_counter()
    r = pseudo_perplexity(model, tok, lines, precision=_resolved(model, args.precision))
    dt = time.perf_counter() - t0
    print(f"pseudo-perplexity {r['pseudo_perplexity']:.3f}  (PLL {r['pll']:.1f} over {r['tokens']} tokens, "
          f"{r['sentences']} sentences, {r['sentences'] / dt:.1f} sentences/s)")
    return 0


def _pairs(args) -> int:
    from encoderlab.eval.intrinsic import minimal_pairs_accuracy

    model, tok = _setup(args)
    precision = _resolved(model, args.precision)
    for path in args.pairs:
        r = minimal_pairs_accuracy(model, tok, path, method=args.method, precision=precision)
        print(f"{path}: accuracy {r['accuracy']:.4f} over {r['n']} pairs ({r['method']})")
        for uid, s in r["by_uid"].items():
            print(f"  {uid:<40} {s['accuracy']:.4f}  (n={s['n']})")
    return 0


def _prompt(args) -> int:
    from encoderlab.eval.prompting import PromptConfig, prompt_classify

    model, _ = _setup(args)
    cfg = PromptConfig(template=args.template, steps=args.steps, learning_rate=args.lr, max_eval_examples=args.max_eval,
                       precision=args.precision,
                       verbalizer=tuple(w.strip() for w in args.verbalizer.split(",")) if args.verbalizer else ())
    out = {}
    for k in [int(x) for x in args.k.split(",")]:
        r = prompt_classify(model, args.task, cfg, k=k, seeds=args.seeds, method=args.method,
                            data_dir=args.data_dir, tokenizer_dir=args.tokenizer or args.model)
        for n, s in r["summary"].items():
            print(f"k={k} {r['method']} {n}: median {s['median']:.4f} over {s['n']} (min {s['min']:.4f}, "
                  f"max {s['max']:.4f})")
        out[f"k{k}"] = r
    _write(out, args.out, "prompt", get_task(args.task).name)
    return 0


def _fill(args) -> int:
    from encoderlab.eval.intrinsic import fill_mask

    model, tok = _setup(args)
    for i, cands in enumerate(fill_mask(model, tok, args.text, args.top_k)):
        print(f"mask {i + 1}: " + "  ".join(f"{t} {p:.4g}" for t, p in cands))
    return 0


def _detect(args) -> int:
    from encoderlab.eval.intrinsic import detect_replaced, format_detection

    model, tok = _setup(args)
    print(format_detection(detect_replaced(model, tok, args.text), args.threshold))
    return 0
