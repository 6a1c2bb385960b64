"""Data pipeline throughput on the English Wikipedia shards, ours beside raw `tokenizers`, same run.

    python benchmarks/data_pipeline.py --shards 16

Measures, on the first N shards of ../shared/data/enwiki_extract:

1. tokenizer training time (WordPiece, --vocab-size);
2. raw `tokenizers` batch encoding of the same documents (``encode_batch`` and ``encode_batch_fast``,
   ids collected, reading excluded) against ``prepare`` end to end (read, split sentences, tokenize,
   word starts, write shards) with 1 and 2 worker processes: MB/s of text, tokens/s, overhead;
3. loader batches/s (32 x 128) for packed + token masking, packed + whole-word masking and SOP pairs,
   beside the steps/s of a tiny 2-layer encoder training step, so one can see which is the bottleneck.

Prints a markdown table to paste into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.loader import LoaderConfig, PretrainLoader
from encoderlab.data.masking import MaskingConfig, mask_tokens
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import train_tokenizer

WIKI = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "enwiki_extract"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=16, help="how many of the 64 ~1 MB shards to use")
    p.add_argument("--vocab-size", type=int, default=16000)
    p.add_argument("--shard-chars", type=int, default=1_000_000, help="prepare's chunk size")
    p.add_argument("--repeats", type=int, default=2, help="timed repeats; the best is kept for all")
    args = p.parse_args()
    if not WIKI.exists():
        raise SystemExit(f"{WIKI} is absent")
    files = tuple(str(f) for f in sorted(WIKI.iterdir())[: args.shards])
    corpus_cfg = CorpusConfig(paths=files)
    tmp = Path(tempfile.mkdtemp(prefix="encoderlab-bench-"))
    rows = []

    docs = list(Corpus(corpus_cfg))
    mb = sum(len(d.encode()) for d in docs) / 1e6
    t = time.perf_counter()
    tok = train_tokenizer(docs, vocab_size=args.vocab_size, out=tmp / "tok")
    t_train = time.perf_counter() - t

    def best(fn):
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), out

    def raw(method):
        def run():
            n = 0
            encode = getattr(tok.tok, method)
            for i in range(0, len(docs), 1000):  # batches of documents, about a prepare chunk each
                n += sum(len(e.ids) for e in encode(docs[i : i + 1000], add_special_tokens=False))
            return n

        return run

    t_raw, n_tokens = best(raw("encode_batch"))
    rows.append(("raw tokenizers encode_batch (ids only, no I/O)", t_raw, n_tokens, None))
    t_fast, n_fast = best(raw("encode_batch_fast"))
    rows.append(("raw tokenizers encode_batch_fast", t_fast, n_fast, None))
    for workers in (1, 2):
        def run(workers=workers):
            out = tmp / f"store{workers}"
            subprocess.run(["rm", "-rf", str(out)], check=True)
            cfg = PrepareConfig(corpus=corpus_cfg, workers=workers, shard_chars=args.shard_chars)
            return prepare(cfg, tmp / "tok", out)

        t_ours, meta = best(run)
        n = sum(c["tokens"] for c in meta["counts"].values())
        rows.append((f"encoderlab prepare, {workers} worker(s)", t_ours, n, t_ours / t_raw - 1))

    machine = f"{cpu_model()}, torch threads {torch.get_num_threads()}"
    print(f"\n### Data pipeline ({datetime.date.today()}, {machine})\n")
    print(f"Text: {len(files)} enwiki_extract shards, {len(docs):,} documents, {mb:.1f} MB UTF-8. "
          f"WordPiece vocab {args.vocab_size}: trained in {t_train:.1f}s. Best of {args.repeats}.\n")
    print("| what | seconds | MB/s | tokens/s | overhead vs encode_batch |")
    print("|---|---|---|---|---|")
    for name, secs, n, over in rows:
        o = f"{over * 100:+.0f}%" if over is not None else ""
        print(f"| {name} | {secs:.2f} | {mb / secs:.2f} | {n / secs:,.0f} | {o} |")

    store = TokenStore(tmp / "store1", tokenizer=tok)
    print("\n| loader, batch 32 x 128 | batches/s |")
    print("|---|---|")
    for name, objective, scheme in (
        ("packed + token masking", "packed", "token"),
        ("packed + whole-word masking", "packed", "whole_word"),
        ("packed + span masking", "packed", "span"),
        ("SOP pairs + n-gram masking", "sop", "ngram"),
    ):
        rate = loader_rate(store, LoaderConfig(objective=objective), MaskingConfig(scheme=scheme))
        print(f"| {name} | {rate:.0f} |")
    tiny = tiny_step_rate(tok.vocab_size)
    print(f"| tiny encoder train step (2 layers, hidden 128, vocab {tok.vocab_size}) | {tiny:.1f} |")
    subprocess.run(["rm", "-rf", str(tmp)], check=True)


def loader_rate(store, cfg, mcfg, n=100) -> float:
    loader = PretrainLoader(store, cfg)
    g = torch.Generator().manual_seed(0)
    it = iter(loader)
    next(it)
    t = time.perf_counter()
    for _ in range(n):
        b = next(it)
        ids, ws = b["input_ids"], b["word_start"]
        mask_tokens(ids, ws, loader.special_ids, loader.vocab_size, loader.mask_id, mcfg, g)
    return n / (time.perf_counter() - t)


def tiny_step_rate(vocab: int, n=10) -> float:
    """A stand-in for the smallest model we train: embeddings, 2 encoder layers, tied output."""
    emb = torch.nn.Embedding(vocab, 128)
    layer = torch.nn.TransformerEncoderLayer(128, 2, 512, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    params = list(emb.parameters()) + list(enc.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    x = torch.randint(5, vocab, (32, 128))

    picked = torch.rand(32, 128) < 0.15  # a sparse MLM head: logits only at the masked 15%

    def step():
        hidden = enc(emb(x))[picked]  # (M, H)
        loss = torch.nn.functional.cross_entropy(hidden @ emb.weight.T, x[picked])
        loss.backward()
        opt.step()
        opt.zero_grad()

    step()
    t = time.perf_counter()
    for _ in range(n):
        step()
    return n / (time.perf_counter() - t)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next(line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line)
    except (OSError, StopIteration):
        name = platform.processor() or "unknown CPU"
    import os

    return f"{name}, {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
