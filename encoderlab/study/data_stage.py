"""A study's data stage: the corpus (or the embedded demo corpus) made into a WordPiece tokenizer and
a token store under OUT/data, recorded as a stage with the tokenizer's digest, so that a study whose
stage records came without the data (a fresh clone) prepares it again and checks it is the same."""

from __future__ import annotations

import hashlib
from pathlib import Path

from encoderlab.config import ConfigError
from encoderlab.data.corpus import Corpus, CorpusConfig
from encoderlab.data.prepare import PrepareConfig, prepare
from encoderlab.data.store import TokenStore
from encoderlab.data.tokenizer import train_tokenizer
from encoderlab.study.config import StudyConfig
from encoderlab.study.demo_corpus import build_cached
from encoderlab.study.progress import Progress
from encoderlab.study.stages import StageKey, Stages, fingerprint


def prepare_data(cfg: StudyConfig, out: Path, stages: Stages, progress: Progress) -> dict:
    if cfg.store:
        store = TokenStore(cfg.store)
        return {"store": cfg.store, "tokenizer": str(store.tokenizer_dir), "demo_task": None,
                "tokens": store.num_tokens}
    seed = cfg.base.trainer.seed
    key_fp = fingerprint(cfg.corpus, cfg.tokenizer, cfg.vocab_size, cfg.max_documents, seed,
                         *([cfg.doc_split] if cfg.doc_split != "blank_line" else []))  # older stages stay valid
    got = stages.cached(StageKey.data(), key_fp, lambda: _prepare(cfg, out, progress))
    if not Path(got["store"]).exists():
        # The stage records came without the data (a fresh clone of committed stages): prepare it again
        # and check it is the data the recorded runs trained on before any of them is read or continued.
        progress.stage(f"data: {got['store']} is not on this machine; preparing it again from the corpus")
        again = _prepare(cfg, out, progress)
        differs = [f"{k}: recorded {got[k]!r}, here {again[k]!r}" for k in ("tokens", TOKENIZER_DIGEST)
                   if k in got and got[k] != again[k]]
        if differs:
            raise ConfigError(f"the data prepared here is not the data the study's stages record "
                              f"({'; '.join(differs)}): the recorded runs trained on another corpus or tokenizer. "
                              "Give the study the corpus it ran on, or another out_dir")
        stages.put(StageKey.data(), key_fp, again)
        return again
    if TOKENIZER_DIGEST not in got:  # a stage written before the digest, its files here: add it
        got = {**got, TOKENIZER_DIGEST: tokenizer_digest(got["tokenizer"])}
        stages.put(StageKey.data(), key_fp, got)
    return got


TOKENIZER_DIGEST = "tokenizer_sha256"


def tokenizer_digest(tok_dir: str | Path) -> str:
    """sha256 of a tokenizer folder's files (names and bytes, in name order)."""
    h = hashlib.sha256()
    for f in sorted(p for p in Path(tok_dir).rglob("*") if p.is_file()):
        h.update(f.relative_to(tok_dir).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _prepare(cfg: StudyConfig, out: Path, progress: Progress) -> dict:
    seed = cfg.base.trainer.seed
    data_dir = out / "data"
    corpus, demo_task = list(cfg.corpus), None
    if not corpus:
        progress.stage("data: extracting the demo corpus (standard-library docstrings)")
        info = build_cached(data_dir / "demo")
        corpus, demo_task = [str(data_dir / "demo" / "corpus.txt")], str(data_dir / "demo" / "task")
        progress.stage(f"data: {info['passages']} passages, {info['words']} words; task labels {info['labels']}")
    ccfg = CorpusConfig(paths=tuple(corpus), doc_split=cfg.doc_split)
    tok_dir = cfg.tokenizer
    if tok_dir is None:
        tok_dir = str(data_dir / "tokenizer")
        progress.stage(f"data: training a WordPiece tokenizer (vocab {cfg.vocab_size})")
        train_tokenizer(_capped(Corpus(ccfg), cfg.max_documents), vocab_size=cfg.vocab_size, out=tok_dir)
    progress.stage("data: tokenizing into the token store")
    meta = prepare(PrepareConfig(corpus=ccfg, seed=seed, valid_fraction=0.05), tok_dir, data_dir / "store")
    return {"store": str(data_dir / "store"), "tokenizer": tok_dir, "demo_task": demo_task,
            "tokens": meta["counts"]["train"]["tokens"], TOKENIZER_DIGEST: tokenizer_digest(tok_dir)}


def _capped(it, n):
    for i, x in enumerate(it):
        if n is not None and i >= n:
            return
        yield x
