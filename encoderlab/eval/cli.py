"""CLI: ``encoderlab finetune``, ``encoderlab eval {glue,pppl,minimal-pairs,prompt,robustness}``, ``fill``,
``detect``.

Settings are ``key=value`` overrides of the command's config, as for ``pretrain`` and ``study``:
FinetuneConfig (finetune, eval glue), PromptConfig (eval prompt), ScoringConfig (eval pppl,
minimal-pairs), all in encoderlab/eval/config.py; eval robustness takes FinetuneConfig's keys and
RobustnessConfig's (encoderlab/eval/robustness.py), each key going to the config that has it. E.g.
``encoderlab finetune --model CKPT --task sst2 epochs=3 learning_rate=1e-4``. The flags of earlier
versions (``--lr``, ``--epochs``, ``--precision``, ``--set KEY=VALUE`` ...) stay as aliases; a
``key=value`` given as well wins. Parsing only; the work is in encoderlab.eval.{finetune,intrinsic,prompting,
robustness}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch

from encoderlab.checkpoint import load_model, resolve_checkpoint
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.config import FinetuneConfig, PromptConfig, ScoringConfig
from encoderlab.eval.finetune import evaluate_glue, finetune, glue_table
from encoderlab.eval.intrinsic import (
    detect_replaced,
    fill_mask,
    format_detection,
    minimal_pairs_accuracy,
    pseudo_perplexity,
)
from encoderlab.eval.prompting import prompt_classify
from encoderlab.eval.robustness import RobustnessConfig, evaluate_robustness, robustness_table, split_overrides
from encoderlab.eval.split import write_split
from encoderlab.eval.tasks import get_task, load_task
from encoderlab.models.pairs import deployed
from encoderlab.runtime import resolve_runtime

MODEL_HELP = ("checkpoint directory (encoderlab or transformers safetensors), or a pretraining run directory (its "
              "latest checkpoint); default $ENCODERLAB_MODEL")
OVERRIDES_HELP = "{} overrides, e.g. {}"


def register(sub) -> None:
    p = sub.add_parser("finetune", help="fine-tune a checkpoint on a task over N seeds (median and spread)")
    _model_args(p)
    p.add_argument("--task", required=True, help="built-in task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, "
                                                 "wnli, chnsenticorp) or a task spec .yaml (README: 'Your own task')")
    p.add_argument("--control", choices=["random"], default=None,
                   help="also fine-tune the same architecture from fresh weights with the same seeds, and report "
                        "its scores beside the pretrained ones (what pretraining adds); --model random:CKPT runs "
                        "only that")
    _finetune_args(p)
    p.set_defaults(func=_finetune)

    ev = sub.add_parser("eval", help="evaluation suites: glue, pppl, minimal-pairs, prompt, robustness")
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
    _scoring_args(pp)
    pp.set_defaults(func=_pppl)

    mp = evs.add_parser("minimal-pairs", help="accuracy on BLiMP-format jsonl minimal pairs")
    _model_args(mp)
    mp.add_argument("--pairs", required=True, nargs="+", help="BLiMP jsonl file(s)")
    mp.add_argument("--method", default="auto", choices=["auto", "mlm", "discriminator", "causal"],
                    help="causal: log-likelihood left to right, for a network pretrained with objective kind clm")
    _scoring_args(mp)
    mp.set_defaults(func=_pairs)

    pr = evs.add_parser("prompt", help="PET-style zero/few-shot classification")
    _model_args(pr)
    pr.add_argument("--task", required=True)
    pr.add_argument("--data-dir", default=None)
    pr.add_argument("--k", default="0,16,32", help="comma-separated shots per class; 0 = zero-shot")
    pr.add_argument("--seeds", type=int, default=5, help="k-shot sets / training seeds per k")
    pr.add_argument("--method", default="auto", choices=["auto", "mlm", "discriminator"])
    pr.add_argument("--out", default=None)
    _alias(pr, "--template", "template", help="e.g. '{a} It was [MASK] .'")
    _alias(pr, "--verbalizer", "verbalizer", type=lambda v: tuple(w.strip() for w in v.split(",")),
           help="comma-separated label words, in label order")
    _alias(pr, "--steps", "steps", type=int)
    _alias(pr, "--lr", "learning_rate", type=float)
    _alias(pr, "--max-eval", "max_eval_examples", type=int)
    _precision_aliases(pr)
    pr.add_argument("overrides", nargs="*", metavar="key=value",
                    help=OVERRIDES_HELP.format("PromptConfig", "steps=50 verbalizer=[bad,good]"))
    pr.set_defaults(func=_prompt)

    rb = evs.add_parser("robustness", help="fine-tune, then accuracy on synonym-substituted and negated copies "
                                           "of the eval split (clean, perturbed, drop)",
                        description="key=value settings: FinetuneConfig's keys and RobustnessConfig's (kinds, "
                                    "perturb_seed, synonym_rate, max_substitutions, negation, split, samples); "
                                    "see encoderlab/eval/robustness.py")
    _model_args(rb)
    rb.add_argument("--task", required=True, help="a classification task: built-in (sst2, rte, mnli have negation "
                                                  "constructions) or a task spec .yaml")
    _finetune_args(rb)
    rb.set_defaults(func=_robustness)

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


def _finetune_args(p) -> None:
    p.add_argument("--data-dir", default=None, help="GLUE-style root, the task's folder, or $ENCODERLAB_DATA_DIR")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..N-1); the median is reported")
    p.add_argument("--out", default=None, help="results JSON (default results/<kind>-<task>-<time>.json)")
    _alias(p, "--epochs", "epochs", type=float, help="default: the task's (3; 10 for RTE, STS-B)")
    _alias(p, "--lr", "learning_rate", type=float, help="default: by model size (ELECTRA paper)")
    _alias(p, "--batch-size", "batch_size", type=int)
    _alias(p, "--max-length", "max_length", type=int)
    _alias(p, "--max-train", "max_train_examples", type=int, help="a fixed random subset of the training examples")
    _alias(p, "--max-eval", "max_eval_examples", type=int, help="cap examples per eval split")
    _precision_aliases(p)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="same as key=value (an alias)")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help=OVERRIDES_HELP.format("FinetuneConfig", "epochs=3 learning_rate=1e-4 device=cpu"))


def _scoring_args(p) -> None:
    _precision_aliases(p)
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help=OVERRIDES_HELP.format("ScoringConfig", "precision=fp32 max_length=64"))


def _alias(p, flag: str, key: str, *, type=str, help: str = "") -> None:
    """A flag that sets one config key (kept from earlier versions); key=value does the same."""
    p.add_argument(flag, dest=f"alias.{key}", metavar=key.upper(), type=type, default=argparse.SUPPRESS,
                   help=f"alias of {key}=" + (f"; {help}" if help else ""))


def _precision_aliases(p) -> None:
    p.add_argument("--precision", dest="alias.precision", choices=["auto", "fp32", "bf16"], default=argparse.SUPPRESS,
                   help="alias of precision= (auto, the default: bf16 autocast where this machine runs it faster)")
    for flag, value in (("--bf16", "bf16"), ("--no-bf16", "fp32")):
        p.add_argument(flag, dest="alias.precision", action="store_const", const=value, default=argparse.SUPPRESS,
                       help=f"alias of precision={value}")


def _config(cls, args, overrides: list[str] | None = None):
    """``cls`` with the alias flags given, then the key=value overrides (--set first, then positional)."""
    given = {k.removeprefix("alias."): v for k, v in vars(args).items() if k.startswith("alias.")}
    items = [*getattr(args, "set", []), *(args.overrides if overrides is None else overrides)]
    return cls().replace(**given).with_overrides(items)


def _setup(args):

    _resolve_model(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    return load_model(args.model), load_tokenizer(args.tokenizer or args.model)


def _resolve_model(args) -> None:
    """args.model as a checkpoint: a run directory's latest (said on stderr); ``random:CKPT`` sets
    args.init to random (fine-tuning only). Idempotent."""

    if not args.model:
        raise ValueError("no model: pass --model CKPT or set ENCODERLAB_MODEL")
    if str(args.model).startswith("random:"):
        if not hasattr(args, "control"):
            raise ValueError(f"--model {args.model}: random: (fresh weights) is for finetune only")
        args.model, args.init = str(args.model).removeprefix("random:"), "random"
    path, note = resolve_checkpoint(args.model)
    if note:
        print(f"encoderlab {args.command}: {note}", file=sys.stderr)
    args.model = str(path)


def _status(line: str) -> None:
    print(f"encoderlab finetune: {line}", file=sys.stderr, flush=True)


def _resolved(model, precision: str):
    """The precision to score ``model`` in on the CPU, printed with its reason."""

    runtime = resolve_runtime(precision, "cpu", deployed(model).encoder.config)
    runtime.apply(model)
    choice = runtime.precision
    print(f"precision {choice.precision} ({choice.reason}); attention {runtime.attention} ({runtime.kernels()})")
    return choice.precision


def _write(results: dict, out: str | None, kind: str, name: str) -> Path:
    path = Path(out or f"results/{kind}-{name}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"results: {path}")
    return path


def _finetune(args) -> int:

    cfg = _config(FinetuneConfig, args)  # a bad key fails before the model is loaded
    get_task(args.task)
    model, _ = _setup(args)
    init = getattr(args, "init", "pretrained")
    r = finetune(model, args.task, cfg, args.seeds, data_dir=args.data_dir, tokenizer_dir=args.tokenizer or args.model,
                 init=init, random_control=args.control == "random", status=_status)
    r["model"] = str(args.model)
    what = "random init (same architecture, fresh weights)" if init == "random" else r["task"]
    for k, s in r["summary"].items():
        print(f"{what} {k}: median {s['median']:.4f} over {s['n']} seed(s) (min {s['min']:.4f}, "
              f"max {s['max']:.4f}, std {s['std']:.4f})")
    if "random_control" in r:
        for k, s in r["random_control"]["summary"].items():
            print(f"random init {k}: median {s['median']:.4f} over {s['n']} seed(s) (min {s['min']:.4f}, "
                  f"max {s['max']:.4f}, std {s['std']:.4f})")
        print("pretraining adds: " + ", ".join(f"{k} {d:+.4f}" for k, d in r["pretraining_gain"].items())
              + " (median pretrained - median random init; compare with the seeds' std)")
        r["ngram_baseline"] = _ngram(args, cfg)
        if r["ngram_baseline"] is not None:
            print("n-gram baseline (scikit-learn TF-IDF n-grams and a linear model, no encoder; its regularisation "
                  "chosen on a held-out fifth of the same training examples): "
                  + ", ".join(f"{k} {v:.4f}" for k, v in r["ngram_baseline"]["scores"].items()))
    path = _write(r, args.out, "finetune", r["task"])
    if "split" in r:

        data = load_task(get_task(args.task), args.data_dir)  # the same split again: seeded
        split = write_split(r["split"], data.evals["dev"], data.labels, path.with_suffix(".split.json"))
        print(f"dev split: {split}")
    return 0


def _ngram(args, cfg: FinetuneConfig) -> dict | None:
    """The n-gram baseline on the examples the fine-tunings saw (eval/probe.py); None, said so, without
    scikit-learn (it comes with the study extra)."""
    from encoderlab.eval.probe import _sklearn, ngram_on_task

    try:
        _sklearn()
    except ImportError:
        print("n-gram baseline: needs scikit-learn (pip install 'encoderlab[study]')")
        return None
    try:
        got = ngram_on_task(load_task(get_task(args.task), args.data_dir), cfg.max_train_examples,
                            cfg.max_eval_examples)
    except ValueError as e:  # too few examples for a vocabulary, or one class: the fine-tunings' scores stand
        print(f"n-gram baseline: not computed ({e})")
        return None
    dev = next(iter(got["scores"]))
    return {"scores": got["scores"][dev], "score": got["score"][dev], "analyzers": got["analyzers"], "split": dev}


def _glue(args) -> int:

    cfg = _config(FinetuneConfig, args)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for t in tasks:
        get_task(t)  # fail on a typo before any training
    model, _ = _setup(args)
    r = evaluate_glue(model, tasks, cfg, args.seeds, data_dir=args.data_dir,
                      tokenizer_dir=args.tokenizer or args.model)
    r["model"] = str(args.model)
    for t in r["tasks"].values():
        t["model"] = str(args.model)
    print(glue_table(r))
    _write(r, args.out, "glue", "-".join(r["tasks"]))
    return 0


def _robustness(args) -> int:

    tune, probe = split_overrides([*args.set, *args.overrides])  # a bad key fails before the model is loaded
    args.set, args.overrides = [], tune
    cfg = _config(FinetuneConfig, args)
    rcfg = RobustnessConfig().with_overrides(probe)
    get_task(args.task)
    model, _ = _setup(args)
    r = evaluate_robustness(model, args.task, cfg, rcfg, args.seeds, data_dir=args.data_dir,
                            tokenizer_dir=args.tokenizer or args.model)
    r = dataclasses.replace(r, model=str(args.model))
    print(robustness_table(r))
    _write(r.to_dict(), args.out, "robustness", r.task)
    return 0


def _pppl(args) -> int:

    cfg = _config(ScoringConfig, args)
    model, tok = _setup(args)
    lines = [s.strip() for s in Path(args.text_file).read_text(encoding="utf-8").splitlines() if s.strip()]
    lines = lines[: args.max_lines] if args.max_lines else lines
    t0 = time.perf_counter()
    r = pseudo_perplexity(model, tok, lines, max_length=cfg.max_length, precision=_resolved(model, cfg.precision))
    dt = time.perf_counter() - t0
    print(f"pseudo-perplexity {r['pseudo_perplexity']:.3f}  (PLL {r['pll']:.1f} over {r['tokens']} tokens, "
          f"{r['sentences']} sentences, {r['sentences'] / dt:.1f} sentences/s)")
    return 0


def _pairs(args) -> int:

    # --pairs takes every word after it, so key=value written after the files lands there
    keys = {f.name for f in dataclasses.fields(ScoringConfig)}
    moved = [a for a in args.pairs if "=" in a and a.split("=", 1)[0] in keys]
    paths = [a for a in args.pairs if a not in moved]
    cfg = _config(ScoringConfig, args, [*args.overrides, *moved])
    model, tok = _setup(args)
    precision = _resolved(model, cfg.precision)
    for path in paths:
        r = minimal_pairs_accuracy(model, tok, path, method=args.method, max_length=cfg.max_length,
                                   precision=precision)
        print(f"{path}: accuracy {r['accuracy']:.4f} over {r['n']} pairs ({r['method']})")
        for uid, s in r["by_uid"].items():
            print(f"  {uid:<40} {s['accuracy']:.4f}  (n={s['n']})")
    return 0


def _prompt(args) -> int:

    cfg = _config(PromptConfig, args)
    model, _ = _setup(args)
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

    model, tok = _setup(args)
    for i, cands in enumerate(fill_mask(model, tok, args.text, args.top_k)):
        print(f"mask {i + 1}: " + "  ".join(f"{t} {p:.4g}" for t, p in cands))
    return 0


def _detect(args) -> int:

    model, tok = _setup(args)
    print(format_detection(detect_replaced(model, tok, args.text), args.threshold))
    return 0
