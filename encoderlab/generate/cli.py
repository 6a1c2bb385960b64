"""CLI: ``encoderlab generate train`` (fine-tune an MLM checkpoint as a seq2seq model) and
``encoderlab generate decode`` (decode sources with a fine-tuned one). Settings are ``key=value``
overrides of GenerationConfig (encoderlab/generate/config.py). Parsing only; the work is in
encoderlab.generate.train and encoderlab.generate.decode.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from encoderlab.checkpoint import resolve_checkpoint
from encoderlab.generate import metrics as M
from encoderlab.generate.config import GenerationConfig
from encoderlab.generate.decode import generate
from encoderlab.generate.tasks import read_pairs
from encoderlab.generate.train import lengths_for, load_generator, reference_text, run_generation
from encoderlab.runtime import resolve_runtime


def register(sub) -> None:
    g = sub.add_parser("generate", help="UniLM-style generation from MLM weights: fine-tune, decode")
    gs = g.add_subparsers(dest="action", metavar="ACTION", required=True)

    t = gs.add_parser("train", help="fine-tune a checkpoint's MLM as a seq2seq model, report dev (and test) scores",
                      usage="encoderlab generate train --task TASK --out DIR [options] CHECKPOINT [key=value ...]")
    # One positional list, the checkpoint first: argparse cannot take a positional, then options, then
    # more positionals (the key=value overrides after --out would be refused).
    t.add_argument("args", nargs="+", metavar="CHECKPOINT",
                   help="checkpoint directory (BERT/ALBERT MLM, ELECTRA pair, discriminator, ...), then "
                        "GenerationConfig overrides, e.g. network=generator epochs=5 max_train_examples=2000")
    t.add_argument("--task", required=True, help="WikiExtractor file/dir (the title task), a dir with train/dev "
                                                 "(.tsv or .jsonl with source and target), or one such file")
    t.add_argument("--out", required=True, help="where the fine-tuned model(s) and results.json go")
    t.add_argument("--seeds", type=int, default=1, help="number of seeds (0..N-1); the median is reported")
    t.add_argument("--tokenizer", default=None, help="tokenizer directory (default: the checkpoint's)")
    t.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    t.set_defaults(func=_train)

    d = gs.add_parser("decode", help="decode each source of a file with a fine-tuned model",
                      usage="encoderlab generate decode --input FILE [options] MODEL [key=value ...]")
    d.add_argument("args", nargs="+", metavar="MODEL",
                   help="a directory written by `encoderlab generate train`, then GenerationConfig overrides, "
                        "e.g. length_penalty=0")
    d.add_argument("--input", required=True, help="one source per line, or a .tsv/.jsonl of pairs (then scored)")
    d.add_argument("--beam", type=int, default=None, help="beam size (1: greedy); default: the model's beam_size")
    d.add_argument("--output", default=None, help="predictions, one per line (default: standard output)")
    d.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    d.set_defaults(func=_decode)


def _train(args) -> int:

    checkpoint, *overrides = args.args
    cfg = GenerationConfig().with_overrides(overrides)  # a bad key fails before the model loads
    path, note = resolve_checkpoint(checkpoint)  # a pretraining run directory: its latest checkpoint
    if note:
        print(f"encoderlab generate: {note}", file=sys.stderr)
    checkpoint = str(path)
    if args.threads:
        torch.set_num_threads(args.threads)
    r = run_generation(checkpoint, args.task, cfg, args.seeds, tokenizer_dir=args.tokenizer, out_dir=args.out,
                       log=print)
    print(f"network {r.network} ({r.start}); precision {r.precision}")
    for key, s in r.summary.items():
        if not key.endswith("log_prob"):
            print(f"{key}: median {s['median']:.4f} over {s['n']} seed(s) (min {s['min']:.4f}, max {s['max']:.4f})")
    out = Path(args.out) / "results.json"
    out.write_text(json.dumps(r.to_dict(), indent=2, ensure_ascii=False))
    print(f"results: {out}")
    return 0


def _decode(args) -> int:

    if args.threads:
        torch.set_num_threads(args.threads)
    model_dir, *overrides = args.args
    model, tok, cfg = load_generator(model_dir)
    cfg = cfg.with_overrides(overrides)
    path = Path(args.input)
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist")
    if path.suffix.lower() in (".tsv", ".jsonl", ".json"):
        pairs = read_pairs(path)
        sources, targets = [p.source for p in pairs], [p.target for p in pairs]
    else:
        sources = [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]
        targets = None
    max_source, max_target = lengths_for(cfg, model.encoder.config.max_position_embeddings)
    runtime = resolve_runtime(cfg.precision, "cpu", model.encoder.config)
    runtime.apply(model)
    precision = runtime.precision.precision
    out = generate(model, tok, sources, beam=args.beam or cfg.beam_size, max_source_length=max_source,
                   max_length=max_target, length_penalty=cfg.length_penalty, batch_size=cfg.eval_batch_size,
                   precision=precision, decoding=cfg.decoding)
    text = "".join(d.text + "\n" for d in out)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if targets is not None:
        s = M.score([d.text for d in out], [reference_text(tok, t) for t in targets])
        print(", ".join(f"{k} {v:.4f}" for k, v in s.items()) + f" over {len(targets)} pairs", file=sys.stderr)
    return 0
