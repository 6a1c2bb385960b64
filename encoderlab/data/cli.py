"""CLI: ``encoderlab tokenizer train`` and ``encoderlab prepare`` (parse, then call the library)."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.tokenizer import train_tokenizer


def register(sub) -> None:
    tok = sub.add_parser("tokenizer", help="train a tokenizer shared by every family in a comparison")
    tok_sub = tok.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    train = tok_sub.add_parser("train", help="train WordPiece (BERT) or Unigram (ALBERT) on a corpus")
    _corpus_args(train)
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--out", required=True, help="output directory (loads with BertTokenizerFast)")
    train.add_argument("--model", choices=["wordpiece", "unigram"], default="wordpiece")
    train.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase)")
    train.add_argument("--min-frequency", type=int, default=2)
    train.set_defaults(func=_train_tokenizer)

    prep = sub.add_parser("prepare", help="tokenize a corpus into a sharded, memory-mapped token store")
    _corpus_args(prep)
    prep.add_argument("--tokenizer", required=True, help="tokenizer directory")
    prep.add_argument("--out", required=True, help="token store directory (an existing one is resumed)")
    prep.add_argument("--workers", type=int, default=1)
    prep.add_argument("--shard-chars", type=int, default=PrepareConfig.shard_chars)
    prep.add_argument("--valid-fraction", type=float, default=PrepareConfig.valid_fraction)
    prep.add_argument("--valid-count", type=int, default=None)
    prep.add_argument("--seed", type=int, default=0)
    prep.add_argument("--word-boundaries", choices=["auto", "subword", "jieba"], default="auto")
    prep.set_defaults(func=_prepare)


def _corpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", nargs="+", required=True, help="files, directories or globs")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", "text", "wikiextractor", "jsonl", "csv", "tsv", "parquet", "hf_dataset"],
    )
    p.add_argument("--doc-split", default="blank_line", choices=["blank_line", "line", "file"])
    p.add_argument("--text-field", default="text", help="JSONL key or table column holding the text")
    p.add_argument("--encoding", default="utf-8", help="the text files' encoding (gb18030, big5, shift_jis, cp1252, "
                                                       "utf-16, ...); a file that is not in it is refused with a guess")


def _corpus_config(args) -> CorpusConfig:
    return CorpusConfig(
        paths=tuple(args.corpus), format=args.format, doc_split=args.doc_split, text_field=args.text_field,
        encoding=args.encoding,
    )


def _train_tokenizer(args) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    corpus = Corpus(_corpus_config(args))
    start = time.perf_counter()
    tok = train_tokenizer(
        corpus,
        vocab_size=args.vocab_size,
        out=args.out,
        model=args.model,
        lowercase=not args.cased,
        min_frequency=args.min_frequency,
    )
    print(f"corpus: {corpus.stats.summary()}")
    print(
        f"trained {args.model} tokenizer, vocab {tok.vocab_size}, hash {tok.hash[:12]} -> {args.out} "
        f"in {time.perf_counter() - start:.1f}s"
    )
    return 0


def _prepare(args) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = PrepareConfig(
        corpus=_corpus_config(args),
        workers=args.workers,
        shard_chars=args.shard_chars,
        valid_fraction=args.valid_fraction,
        valid_count=args.valid_count,
        seed=args.seed,
        word_boundaries=args.word_boundaries,
    )
    start = time.perf_counter()
    meta = prepare(cfg, args.tokenizer, args.out)
    c = meta["counts"]
    print(
        f"store {args.out}: train {c['train']['documents']:,} docs / {c['train']['tokens']:,} tokens, "
        f"valid {c['valid']['documents']:,} docs / {c['valid']['tokens']:,} tokens, "
        f"{len(meta['shards'])} shard(s) in {time.perf_counter() - start:.1f}s"
    )
    if c["valid"]["documents"] == 0:  # pretraining's held-out evaluation would have nothing to read
        print(f"warning: the valid split is empty: the corpus was read as {c['train']['documents']:,} document(s) "
              f"(--doc-split {args.doc_split}); a file with one document per line wants --doc-split line "
              "(or give --valid-count N)", file=sys.stderr)
    return 0
