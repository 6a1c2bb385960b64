"""``encoderlab prepare``: corpus -> sharded, memory-mapped token store. Deterministic and resumable.

Layout of a store directory::

    meta.json            written last: tokenizer hash, vocab size, dtype, sources, counts, config
    manifest.json        finished shards (rewritten atomically after each one); resume reads it
    tokenizer/           the tokenizer the store was built with
    train/00000/         tokens.npy (N,) uint16|uint32, word_start.npy (N,) bool,
    valid/00000/         sent_offsets.npy (S+1,) int64 into tokens,
                         doc_offsets.npy (D+1,) int64 into sentences

The main process reads the corpus in order and cuts it into chunks of about ``shard_chars``
characters; chunk k becomes shard k of each split, tokenized by a worker process. A shard depends
only on its chunk, so any number of workers gives byte-identical files. Each shard is written to a
temporary directory and renamed; the manifest lists finished shards, so an interrupted run skips
them when restarted with the same settings. Validation documents are chosen by a seeded hash of the
document's index in the corpus (whole documents, never lines).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import multiprocessing as mp
import os
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Literal

import numpy as np

from encoderlab.config import Config, ConfigError
from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.text import has_cjk, jieba_word_starts, mostly_cjk, split_sentences
from encoderlab.data.tokenizer import Tokenizer, load_tokenizer
from encoderlab.errors import DataError

log = logging.getLogger("encoderlab.data")
SPLITS = ("train", "valid")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrepareConfig(Config):
    corpus: CorpusConfig = CorpusConfig()
    workers: int = 1
    shard_chars: int = 8_000_000
    valid_fraction: float = 0.01
    valid_count: int | None = None  # hold out exactly this many documents instead of a fraction
    seed: int = 0
    # auto: jieba word starts for sentences that are >= 30% CJK characters, WordPiece/▁ ones elsewhere
    word_boundaries: Literal["auto", "subword", "jieba"] = "auto"

    def validate(self) -> None:
        if not 0.0 <= self.valid_fraction < 1.0:
            raise ConfigError(f"valid_fraction must be in [0, 1), got {self.valid_fraction}")
        if self.workers < 1 or self.shard_chars < 1:
            raise ConfigError("workers and shard_chars must be >= 1")


def prepare(cfg: PrepareConfig, tokenizer_dir: str | Path, out: str | Path) -> dict:
    """Build (or resume) a token store in ``out``; returns the metadata written to meta.json."""
    out = Path(out)
    tokenizer = load_tokenizer(tokenizer_dir)
    tokenizer.require_all_roles()  # the store records each special id; masking needs [MASK]
    corpus = Corpus(cfg.corpus)  # resolves paths now: a missing one fails before any work
    manifest = _open_manifest(out, cfg, tokenizer)
    done = manifest["shards"]
    started = time.perf_counter()

    pending: deque = deque()
    pool = None
    if cfg.workers > 1:
        # fork is fast; each child loads the tokenizer and runs it single-threaded
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        pool = ctx.Pool(cfg.workers, initializer=_init_worker, initargs=(str(out / "tokenizer"), cfg))
    else:
        _init_worker(str(out / "tokenizer"), cfg)

    def finish(shard_id: str, stats: dict) -> None:
        done[shard_id] = stats
        _write_json(out / "manifest.json", manifest)

    try:
        for shard_id, docs, valid in _chunks(corpus, cfg):
            if shard_id in done:
                continue
            if pool is None:
                finish(shard_id, _process_chunk(str(out), shard_id, docs, valid))
                continue
            pending.append((shard_id, pool.apply_async(_process_chunk, (str(out), shard_id, docs, valid))))
            while len(pending) >= 2 * cfg.workers:  # back-pressure: never read far ahead of the workers
                sid, res = pending.popleft()
                finish(sid, res.get())
        while pending:
            sid, res = pending.popleft()
            finish(sid, res.get())
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()

    if corpus.stats.documents == 0:  # a store of nothing would train on nothing, silently
        raise DataError(f"no text found to prepare: looked in {corpus.describe()}")
    meta = _metadata(cfg, tokenizer, corpus, manifest)
    _write_json(out / "meta.json", meta)
    log.info("prepare: %s in %.1fs", corpus.stats.summary(), time.perf_counter() - started)
    return meta


# ---- the main process: chunks and bookkeeping ---------------------------------------------------
def _chunks(corpus: Corpus, cfg: PrepareConfig):
    """Yield ``(shard_id, documents, is_valid flags)`` in corpus order, ~shard_chars per chunk."""
    threshold = cfg.valid_fraction
    if cfg.valid_count is not None:  # exactly N: the N smallest hashes, which needs the document count
        n_docs = sum(1 for _ in corpus)
        if cfg.valid_count >= n_docs:
            raise ValueError(f"valid_count {cfg.valid_count} leaves no training documents (of {n_docs})")
        hashes = _unit_hashes(cfg.seed, np.arange(n_docs))
        threshold = float(np.partition(hashes, cfg.valid_count)[cfg.valid_count]) if cfg.valid_count else 0.0

    def held_out(lo: int, hi: int) -> np.ndarray:
        return _unit_hashes(cfg.seed, np.arange(lo, hi)) < threshold

    docs: list[str] = []
    size, index, shard = 0, 0, 0
    for doc in corpus:
        docs.append(doc)
        size += len(doc)
        index += 1
        if size >= cfg.shard_chars:
            yield f"{shard:05d}", docs, held_out(index - len(docs), index)
            docs, size, shard = [], 0, shard + 1
    if docs:
        yield f"{shard:05d}", docs, held_out(index - len(docs), index)


def _unit_hashes(seed: int, index: np.ndarray) -> np.ndarray:
    """A seeded splitmix64 of document indices, mapped to [0, 1): which documents are held out."""
    with np.errstate(over="ignore"):
        x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + index.astype(np.uint64) + np.uint64(1)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / 2.0**53


def _settings(cfg: PrepareConfig) -> dict:
    """What the shard contents depend on (workers does not): a resume must match it exactly."""
    d = cfg.to_dict()
    d.pop("workers")
    for key, default in (("encoding", "utf-8"), ("max_invalid_share", 0.01)):  # added later: at their
        if d["corpus"].get(key) == default:  # defaults, a store begun before them still resumes
            d["corpus"].pop(key)
    return d


def _open_manifest(out: Path, cfg: PrepareConfig, tokenizer: Tokenizer) -> dict:
    settings = _settings(cfg)
    path = out / "manifest.json"
    if path.exists():
        manifest = json.loads(path.read_text())
        if manifest["tokenizer_hash"] != tokenizer.hash:
            raise ValueError(
                f"{out} was prepared with tokenizer {manifest['tokenizer_hash'][:12]}, not "
                f"{tokenizer.hash[:12]}; use the same tokenizer or a new --out directory"
            )
        if manifest["settings"] != settings:
            changed = sorted(k for k in settings if settings[k] != manifest["settings"].get(k))
            raise ValueError(f"{out} was prepared with other settings ({changed}); use a new --out directory")
        if manifest["shards"]:
            log.info("resuming %s: %d shard(s) already done", out, len(manifest["shards"]))
    else:
        out.mkdir(parents=True, exist_ok=True)
        manifest = {"tokenizer_hash": tokenizer.hash, "settings": settings, "shards": {}}
        tmp = out / "tokenizer.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer.save(tmp)
        shutil.rmtree(out / "tokenizer", ignore_errors=True)
        os.replace(tmp, out / "tokenizer")
        _write_json(path, manifest)
    (out / "meta.json").unlink(missing_ok=True)  # the store is incomplete until prepare ends
    return manifest


def _metadata(cfg: PrepareConfig, tokenizer: Tokenizer, corpus: Corpus, manifest: dict) -> dict:
    shards = manifest["shards"]
    counts = {
        split: {k: sum(s[split][k] for s in shards.values()) for k in ("documents", "sentences", "tokens")}
        for split in SPLITS
    }
    return {
        "format": 1,
        "tokenizer_hash": tokenizer.hash,
        "vocab_size": tokenizer.vocab_size,
        "dtype": _dtype(tokenizer.vocab_size).__name__,
        "special_ids": {r: getattr(tokenizer, f"{r}_id") for r in ("pad", "unk", "cls", "sep", "mask")},
        "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in corpus.files],
        "corpus_stats": dataclasses.asdict(corpus.stats),
        "counts": counts,
        "shards": sorted(shards),
        "config": _settings(cfg),
    }


def _dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


# ---- the workers: tokenize a chunk and write its shards -----------------------------------------
_worker: dict = {}


def _init_worker(tokenizer_dir: str, cfg: PrepareConfig) -> None:
    if cfg.workers > 1:  # one thread per worker process: the processes are the parallelism
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    tok = load_tokenizer(tokenizer_dir)
    _worker.update(tok=tok, cfg=cfg, table=tok.word_start_table(), dtype=_dtype(tok.vocab_size))


def _process_chunk(out: str, shard_id: str, docs: list[str], valid: list[bool]) -> dict:
    stats: dict = {"characters": sum(map(len, docs))}
    for split in SPLITS:
        part = [d for d, v in zip(docs, valid) if bool(v) == (split == "valid")]
        arrays, stats[split] = _tokenize_documents(part)
        _write_shard(Path(out) / split / shard_id, arrays)
    return stats


def _tokenize_documents(docs: list[str]) -> tuple[dict[str, np.ndarray], dict]:
    tok: Tokenizer = _worker["tok"]
    mode = _worker["cfg"].word_boundaries
    sentences: list[str] = []
    doc_sizes: list[int] = []
    zh: list[int] = []  # sentences that take jieba word starts
    for doc in docs:
        sents = split_sentences(doc)
        if mode == "jieba" or (mode == "auto" and has_cjk(doc)):  # one check per English document
            first = len(sentences)
            zh.extend(first + j for j, s in enumerate(sents) if mode == "jieba" or mostly_cjk(s))
        sentences.extend(sents)
        doc_sizes.append(len(sents))
    tokens, lengths = _encode_sentences(tok, docs, sentences, doc_sizes)
    word_start = _worker["table"][tokens]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for i in range(0, len(zh), 8192):  # a token starts a word if it is no "##" piece and jieba agrees
        batch = [sentences[k] for k in zh[i : i + 8192]]
        for k, text, enc in zip(
            zh[i : i + 8192], batch, tok.tok.encode_batch(batch, add_special_tokens=False)
        ):
            word_starts = jieba_word_starts(text)
            jieba_ws = np.array([o[0] in word_starts for o in enc.offsets], dtype=bool)
            word_start[offsets[k] : offsets[k + 1]] &= jieba_ws
    # empty sentences (all whitespace or dropped characters) and then empty documents are removed
    keep = lengths > 0
    sent_doc = np.repeat(np.arange(len(doc_sizes)), doc_sizes)
    doc_sent_counts = np.bincount(sent_doc[keep], minlength=len(doc_sizes))
    doc_sent_counts = doc_sent_counts[doc_sent_counts > 0]
    arrays = {
        "tokens": tokens,
        "word_start": word_start.astype(bool),
        "sent_offsets": np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64),
        "doc_offsets": np.concatenate([[0], np.cumsum(doc_sent_counts)]).astype(np.int64),
    }
    stats = {"documents": len(doc_sent_counts), "sentences": int(keep.sum()), "tokens": len(tokens)}
    return arrays, stats


def _encode_sentences(tok: Tokenizer, docs, sentences, doc_sizes) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of all sentences, concatenated (N,), and tokens per sentence (S,).

    Encoding 100k short sentences one by one costs ~20% more than encoding their documents, so each
    document is encoded once as its sentences joined by the [SEP] token text: the tokenizer splits
    added tokens out before normalizing, so the pieces between [SEP]s are exactly the sentences'
    own encodings (tested). A document whose text holds "[SEP]" itself takes the slow path.
    """
    dtype = _worker["dtype"]
    sep = tok.id_to_token(tok.sep_id)
    if any(sep in d for d in docs):
        ids: list[list[int]] = []
        for i in range(0, len(sentences), 8192):  # bounded batches keep worker memory flat
            ids.extend(
                e.ids for e in tok.tok.encode_batch_fast(sentences[i : i + 8192], add_special_tokens=False)
            )
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        return np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum())), lengths
    sizes = np.array(doc_sizes, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    joined = [f" {sep} ".join(sentences[bounds[d] : bounds[d + 1]]) for d in range(len(docs))]
    ids = []
    for i in range(0, len(joined), 1024):  # encode_batch_fast: no character offsets needed here
        ids.extend(e.ids for e in tok.tok.encode_batch_fast(joined[i : i + 1024], add_special_tokens=False))
    doc_tokens = np.array([len(x) for x in ids], dtype=np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(doc_tokens.sum()))
    is_sep = flat == tok.sep_id
    # sentence of each token: the document's first sentence + the [SEP]s before it in the document
    doc_of = np.repeat(np.arange(len(docs)), doc_tokens)  # (N_all,)
    seps_before = np.cumsum(is_sep) - is_sep  # exclusive count over the whole chunk
    seps_at_doc_start = np.concatenate([[0], np.cumsum(np.maximum(sizes - 1, 0))])[:-1]
    sentence = bounds[:-1][doc_of] + seps_before - seps_at_doc_start[doc_of]
    lengths = np.bincount(sentence[~is_sep], minlength=len(sentences)).astype(np.int64)
    return flat[~is_sep], lengths


def _write_shard(final: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, arr in arrays.items():
        np.save(tmp / f"{name}.npy", arr)
    shutil.rmtree(final, ignore_errors=True)  # a leftover from a run killed after rename, before manifest
    os.replace(tmp, final)
