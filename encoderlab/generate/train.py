"""Fine-tuning an MLM as a UniLM-style seq2seq model, scoring its decodes, and the runs over seeds.

:func:`run_generation` is the entry point for the command line and for studies (claim 12: an ELECTRA
discriminator is a poor starting point for MLM-based generation): a checkpoint, which of its
networks, a task, settings and seeds in; a :class:`GenerationResult` out, with every seed's scores
and their median and spread. Each seed starts from a fresh copy of the pretrained weights.

Training (model.py has the mask and the batches): fine-tuning's loop (encoderlab/tune/loop.py's
``fit``: AdamW, linear warm-up and decay; no layer-wise decay: UniLM used none) with a
label-smoothed cross-entropy at the masked target positions only, computed through the sparse MLM
head. Scores (metrics.py) compare each
decode with its reference after the tokenizer's round trip (its lowercasing, accent stripping and
punctuation spacing), so that a prediction with exactly the reference's tokens scores 1.

Shape letters: B batch, T length, H hidden, M masked positions, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from encoderlab.checkpoint import load_model, save_model
from encoderlab.data.tokenizer import Tokenizer, load_tokenizer
from encoderlab.device import resolve_device
from encoderlab.errors import EncoderlabError
from encoderlab.generate import metrics as M
from encoderlab.generate.config import GenerationConfig
from encoderlab.generate.decode import generate, special_ids
from encoderlab.generate.model import (
    IGNORE,
    Seq2SeqStart,
    hidden_states,
    next_token_batch,
    seq2seq_start,
    training_batch,
)
from encoderlab.generate.tasks import GenerationTask, Pair, load_task
from encoderlab.models.networks import MaskedLM
from encoderlab.runtime import resolve_runtime
from encoderlab.tune import TuneLimits, default_learning_rate, epochs, fit
from encoderlab.tune.data import check_vocab, length_batches
from encoderlab.tune.results import spread, versions

SETTINGS_FILE = "generation.yaml"  # beside a fine-tuned model: its GenerationConfig and origin


@dataclass
class SeedResult:
    seed: int
    steps: int
    learning_rate: float
    first_loss: float
    final_loss: float  # mean of the last 10 steps
    train_time_s: float
    decode_time_s: float
    scores: dict[str, float]  # "dev/greedy/f1", "test/beam4/rouge_l", ...
    examples: list[dict] = field(default_factory=list)  # a few dev decodes, for reading


@dataclass
class GenerationResult:
    checkpoint: str
    network: str  # resolved: mlm | generator | discriminator | encoder | random
    fresh_head: bool
    start: str  # where the MLM came from, in words
    task: dict
    config: dict
    precision: str
    precision_reason: str
    seeds: list[SeedResult]
    summary: dict[str, dict]  # score key -> median, min, max, std, n over the seeds
    versions: dict = field(default_factory=dict)
    date: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def median(self, key: str) -> float:
        return self.summary[key]["median"]


def run_generation(checkpoint: str | Path | nn.Module, task: str | Path | GenerationTask,
                   config: GenerationConfig | None = None, seeds: int | list[int] = 1, *,
                   network: str | None = None, tokenizer_dir: str | Path | None = None,
                   out_dir: str | Path | None = None, log=print) -> GenerationResult:
    """Fine-tune ``checkpoint``'s chosen network on ``task`` once per seed and score dev (and test).

    ``seeds``: a count N (seeds 0..N-1) or a list. ``network`` overrides ``config.network``.
    ``out_dir``: where the fine-tuned models are saved (``out_dir/seed-S`` when there are several).
    """
    cfg = config or GenerationConfig()
    if network is not None:
        cfg = cfg.replace(network=network)
    device = resolve_device(cfg.device)  # a device this machine lacks fails before anything loads
    if isinstance(checkpoint, nn.Module) and tokenizer_dir is None:
        raise ValueError("run_generation: an in-memory model needs tokenizer_dir=...")
    pretrained = checkpoint if isinstance(checkpoint, nn.Module) else load_model(checkpoint)
    tok = load_tokenizer(tokenizer_dir or checkpoint)
    check_vocab(tok, pretrained, str(tokenizer_dir or checkpoint))
    special_ids(tok)  # no [MASK]: fail before training
    limits = {"train": cfg.max_train_examples, "dev": cfg.max_eval_examples, "test": cfg.max_eval_examples}
    limits = {k: v for k, v in limits.items() if v is not None}
    if isinstance(task, GenerationTask):  # the first N of each split, as load_task keeps them
        task = dataclasses.replace(task, splits={k: v[: limits.get(k)] for k, v in task.splits.items()})
    else:
        task = load_task(task, limits=limits)
    log(task.summary())
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    runs, start = [], None
    for seed in seed_list:
        torch.manual_seed(seed)  # a fresh head (or a random model) differs by seed
        start = seq2seq_start(pretrained, cfg.network)
        seed_cfg = cfg.replace(seed=seed)
        model, run = fine_tune(start, tok, task, seed_cfg, log=log)
        runs.append(run)
        if out_dir is not None:
            dest = Path(out_dir) if len(seed_list) == 1 else Path(out_dir) / f"seed-{seed}"
            save_generator(model, dest, tok, seed_cfg, start, checkpoint)
            log(f"  saved {dest}")
    precision = resolve_runtime(cfg.precision, device, start.model.encoder.config).precision  # cached: no new probe
    return GenerationResult(
        checkpoint=str(checkpoint) if not isinstance(checkpoint, nn.Module) else "<in-memory>",
        network=start.network, fresh_head=start.fresh_head, start=start.note, task=task.to_dict(),
        config=cfg.to_dict(), precision=precision.precision, precision_reason=precision.reason, seeds=runs,
        summary={k: spread([r.scores[k] for r in runs]) for k in runs[0].scores},
        versions=versions(), date=time.strftime("%Y-%m-%dT%H:%M:%S%z"))


# ---- one seed ------------------------------------------------------------------------------------
def lengths_for(cfg: GenerationConfig, positions: int) -> tuple[int, int]:
    """(source, target) token limits that fit the model's positions: [CLS] source [SEP] target."""
    if cfg.max_target_length + 3 > positions:
        raise EncoderlabError(f"max_target_length {cfg.max_target_length} leaves no room for a source in the "
                              f"model's {positions} positions")
    return min(cfg.max_source_length, positions - cfg.max_target_length - 2), cfg.max_target_length


def encode_pairs(tok: Tokenizer, pairs: list[Pair], max_source: int, max_target: int) -> list[tuple[list, list]]:
    """(source ids, target ids ending in [SEP]) for each pair, truncated to the limits."""
    sources = tok.encode_batch([p.source for p in pairs])
    targets = tok.encode_batch([p.target for p in pairs])
    return [(s[:max_source], [*t[: max_target - 1], tok.sep_id]) for s, t in zip(sources, targets)]


def fine_tune(start: Seq2SeqStart, tok: Tokenizer, task: GenerationTask, cfg: GenerationConfig,
              log=print) -> tuple[MaskedLM, SeedResult]:
    """Train ``start.model`` in place with seed ``cfg.seed``; score every eval split."""
    rng = np.random.default_rng(cfg.seed)
    device = resolve_device(cfg.device)
    model = start.model.to(device)
    enc_cfg = model.encoder.config
    runtime = resolve_runtime(cfg.precision, device, enc_cfg)
    runtime.apply(model)
    precision = runtime.precision.precision
    max_source, max_target = lengths_for(cfg, enc_cfg.max_position_embeddings)
    data = encode_pairs(tok, task.splits["train"], max_source, max_target)
    if not data:
        raise EncoderlabError(f"task {task.name}: no training pairs")
    lr = cfg.learning_rate or default_learning_rate(enc_cfg.hidden_size)
    limits = TuneLimits.of_epochs(cfg.epochs, len(data), cfg.batch_size, cfg.max_steps)
    total = limits.steps
    tune = cfg.tune_config(lr=lr, limits=limits, device=device, precision=precision)
    ids = special_ids(tok)
    lengths = [len(s) + len(t) for s, t in data]

    make_batch = next_token_batch if cfg.decoding == "next" else training_batch

    def one_epoch():  # the masks are drawn from the same rng as the order, batch by batch
        for idx in length_batches(lengths, cfg.batch_size, rng):
            yield make_batch([data[i] for i in idx], mask_prob=cfg.mask_prob, rng=rng, **ids).to(device)

    def loss_fn(model: MaskedLM, batch) -> torch.Tensor:
        predicted = batch.labels != IGNORE  # (B, T)
        hidden = hidden_states(model.encoder, batch.input_ids, batch.segment_ids, batch.attention_mask)
        logits = model.mlm_head(hidden, predicted)  # (M, V), row-major like labels[predicted]
        return F.cross_entropy(logits.float(), batch.labels[predicted], label_smoothing=cfg.label_smoothing)

    t0 = time.perf_counter()
    losses = fit(model, epochs(one_epoch), loss_fn, tune)
    train_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    scores, examples = {}, []
    for split in ("dev", "test"):
        if task.splits.get(split):
            s, ex = evaluate(model, tok, task.splits[split], cfg, precision)
            scores.update({f"{split}/{k}": v for k, v in s.items()})
            examples = examples or ex
    decode_time = time.perf_counter() - t1
    run = SeedResult(seed=cfg.seed, steps=total, learning_rate=lr, first_loss=losses[0],
                     final_loss=float(np.mean(losses[-10:])), train_time_s=train_time, decode_time_s=decode_time,
                     scores=scores, examples=examples)
    log(f"  seed {cfg.seed}: {total} steps, loss {run.first_loss:.3f} -> {run.final_loss:.3f} "
        f"({train_time:.0f} s); " + ", ".join(f"{k} {v:.3f}" for k, v in scores.items() if k.endswith("/f1")))
    return model, run


def evaluate(model: MaskedLM, tok: Tokenizer, pairs: list[Pair], cfg: GenerationConfig,
             precision: str = "fp32") -> tuple[dict[str, float], list[dict]]:
    """Greedy (and, when beam_size > 1, beam) scores on ``pairs``, and the first few decodes."""
    max_source, max_target = lengths_for(cfg, model.encoder.config.max_position_embeddings)
    references = [reference_text(tok, p.target) for p in pairs]
    scores, examples = {}, []
    for beam in sorted({1, cfg.beam_size}):
        name = "greedy" if beam == 1 else f"beam{beam}"
        out = generate(model, tok, [p.source for p in pairs], beam=beam, max_source_length=max_source,
                       max_length=max_target, length_penalty=cfg.length_penalty, batch_size=cfg.eval_batch_size,
                       precision=precision, decoding=cfg.decoding)
        preds = [d.text for d in out]
        scores.update({f"{name}/{k}": v for k, v in M.score(preds, references).items()})
        scores[f"{name}/log_prob"] = float(np.mean([d.hypothesis.score for d in out]))
        if beam == cfg.beam_size:
            examples = [{"source": p.source[:200], "reference": r, "prediction": t}
                        for p, r, t in zip(pairs[:5], references, preds)]
    return scores, examples


def reference_text(tok: Tokenizer, text: str) -> str:
    """A reference as the tokenizer gives it back: what a perfect prediction decodes to."""
    return tok.decode(tok.encode(text))


# ---- fine-tuned models on disk -------------------------------------------------------------------
def save_generator(model: MaskedLM, dest: str | Path, tok: Tokenizer, cfg: GenerationConfig,
                   start: Seq2SeqStart, checkpoint) -> Path:
    """An ordinary MLM checkpoint (transformers loads it as a masked LM) plus generation.yaml."""
    settings = {"generation": cfg.to_dict(), "pretrained": str(checkpoint) if not isinstance(checkpoint, nn.Module)
                else "<in-memory>", "network": start.network, "fresh_head": start.fresh_head}
    out = save_model(model.cpu(), dest, extra_files={SETTINGS_FILE: yaml.safe_dump(settings, sort_keys=False).encode()})
    tok.save(out)
    return out


def load_generator(path: str | Path) -> tuple[MaskedLM, Tokenizer, GenerationConfig]:
    """A model saved by save_generator, its tokenizer, and the settings it was trained with (the
    defaults, for another MLM checkpoint)."""
    path = Path(path)
    model = load_model(path)
    if not isinstance(model, MaskedLM):
        raise EncoderlabError(f"{path}: holds a {type(model).__name__}, not an MLM; fine-tune it first with "
                              "`encoderlab generate train`")
    cfg = GenerationConfig()
    if (path / SETTINGS_FILE).exists():
        try:
            settings = yaml.safe_load((path / SETTINGS_FILE).read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise EncoderlabError(f"{path / SETTINGS_FILE}: invalid YAML: {e}") from None
        if not isinstance(settings, dict):
            raise EncoderlabError(f"{path / SETTINGS_FILE}: expected a mapping with a 'generation' key")
        cfg = GenerationConfig.from_dict(settings.get("generation"), where=f"{path / SETTINGS_FILE}: generation")
    return model, load_tokenizer(path), cfg
