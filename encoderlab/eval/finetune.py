"""Fine-tuning a pretrained encoder on a classification or regression task, over several seeds.

Defaults follow the ELECTRA paper's fine-tuning setup (Clark et al. 2020, appendix): learning rate
by model size (3e-4 small, 1e-4 base, 5e-5 large), layer-wise learning-rate decay 0.8, 10% linear
warm-up then linear decay, 3 epochs (10 for RTE and STS-B), batch 32, max length 128, AdamW with
eps 1e-6 and weight decay 0.01 (not on biases and LayerNorms).

Layer-wise decay (the top layer at decay^1, embeddings at decay^(L+1), a shared ALBERT block at its
top user's rate) is encoderlab/tune/optim.py's; the loop is encoderlab/tune/loop.py's ``fit``, with
the classification or regression loss given here.

Speed: a task is tokenized and padded once for every seed of a call (:func:`prepare_task`; a
batch is a slice of it), batches are formed from examples of similar length (sorted in
chunks of 50 batches, then the batches shuffled) and padded to their own longest, and forward and
backward run in the resolved precision (``auto``: bf16 autocast where this machine runs bf16
products faster than fp32, encoderlab/precision.py; the loss in fp32). Where a pair's time goes
and what each option buys: docs/benchmarks.md, "Fine-tuning cost (issue 33)".

Shape letters: B batch, T longest length in the batch, C labels.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.checkpoint import load_model
from encoderlab.data.tokenizer import Encoded, Tokenizer, load_tokenizer
from encoderlab.device import resolve_device
from encoderlab.eval import metrics as M
from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.tasks import Example, TaskData, TaskSpec, get_task, load_task
from encoderlab.models.networks import SequenceClassifier
from encoderlab.models.pairs import deployed, materialize_gdes
from encoderlab.precision import autocast, machine_kind
from encoderlab.runtime import resolve_runtime
from encoderlab.tune import TuneLimits, default_learning_rate, epochs, fit, tune_param_groups
from encoderlab.tune.data import PaddedSet, check_vocab, collate, length_batches
from encoderlab.tune.results import spread, versions

# Older names, for callers outside eval/ (benchmarks/finetune_speed.py): the helpers are tune/'s.
param_groups = tune_param_groups

Init = Literal["pretrained", "random"]  # random: the same architecture, fresh weights (what pretraining adds)


# ---- models --------------------------------------------------------------------------------------
def build_classifier(pretrained: nn.Module, num_labels: int, dropout: float = 0.1,
                     unpad: bool = False, fresh: bool = False) -> SequenceClassifier:
    """A SequenceClassifier with the pretrained encoder's weights and a fresh head; ``fresh``: the
    same architecture with every weight freshly initialized (the no-pretraining control).

    Only the pooler may be absent from the pretrained encoder state (MLM-only checkpoints): it
    then keeps its fresh initialization; any other missing or unexpected weight is an error.
    """
    src = deployed(pretrained)
    cfg = src.config.with_head("sequence_classification", generator=None, num_labels=num_labels,
                               classifier_dropout=dropout)
    if cfg.family != "electra" and not cfg.encoder.pooler:  # the pooler head needs one: fresh
        cfg = dataclasses.replace(cfg, encoder=dataclasses.replace(cfg.encoder, pooler=True))
    if unpad:
        cfg = dataclasses.replace(cfg, encoder=dataclasses.replace(cfg.encoder, unpad=True))
    clf = SequenceClassifier(cfg)
    if fresh:
        return clf
    # an ELECTRA pair with gdes sharing: each table is E_G + delta
    state = materialize_gdes(src.encoder.state_dict(), src.encoder.embeddings, "embeddings.")
    missing, unexpected = clf.encoder.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("pooler.")] + list(unexpected)
    if bad:
        raise ValueError(f"pretrained encoder does not match the classifier's: missing/unexpected {bad[:8]}")
    return clf


# ---- one seed ------------------------------------------------------------------------------------
def _encode(tok: Tokenizer, examples: list[Example], max_length: int) -> list[Encoded]:
    a = [e.text_a for e in examples]
    b = [e.text_b for e in examples] if examples and examples[0].text_b is not None else None
    return tok.encode_inputs(a, b, max_length)


def subset(xs: list, n: int | None, seed: int = 0) -> list:
    if n is None or n >= len(xs):
        return xs
    idx = np.sort(np.random.default_rng(seed).choice(len(xs), n, replace=False))
    return [xs[i] for i in idx]


@torch.no_grad()
def predict(model: nn.Module, encoded: list[Encoded], pad_id: int, batch_size: int, precision: str = "fp32",
            bucket: bool = True) -> np.ndarray:
    """Logits (N, C) in the input order, computed on the model's device in a resolved precision."""
    model.eval()
    device = next(model.parameters()).device
    if not encoded:  # nothing to score (load_task refuses empty splits; a caller's own list may be one)
        return np.zeros((0, model.config.num_labels), dtype=np.float32)
    out: list[tuple[np.ndarray, torch.Tensor]] = []
    for idx in length_batches([len(e.ids) for e in encoded], batch_size, None, bucket):
        batch = {k: v.to(device) for k, v in collate([encoded[i] for i in idx], pad_id).items()}
        with autocast(precision, device):
            logits = model(**batch)  # (B, C)
        out.append((idx, logits.float()))
    result = np.zeros((len(encoded), out[0][1].shape[1]), dtype=np.float32)
    for idx, logits in out:
        result[idx] = logits.cpu().numpy()
    return result


def scores_of(spec: TaskSpec, logits: np.ndarray, examples: list[Example]) -> dict[str, float]:
    pred = logits[:, 0] if spec.kind == "regression" else logits.argmax(-1)
    return M.compute(spec.metrics, pred, [e.label for e in examples])


def eval_scores(data: TaskData, cfg: FinetuneConfig, logits_of) -> dict[str, float]:
    """Every metric on every eval split (capped at cfg.max_eval_examples), the split's name as a
    prefix when there are several; logits_of(examples) gives their (N, C) logits."""
    return split_scores(data, cfg, lambda split, exs: logits_of(exs))


def split_scores(data: TaskData, cfg: FinetuneConfig, logits_of) -> dict[str, float]:
    """:func:`eval_scores` with ``logits_of(split, examples)``: the split's name too."""
    scores = {}
    for split, exs in data.evals.items():
        exs = subset(exs, cfg.max_eval_examples)
        s = scores_of(data.spec, logits_of(split, exs), exs)
        scores.update(s if len(data.evals) == 1 else {f"{split}_{k}": v for k, v in s.items()})
    return scores


def one_class_scores(data: TaskData, cfg: FinetuneConfig) -> list[float]:
    """The task score of always predicting class c, for each class c, scored as a fine-tuned model
    is: the floor that a fine-tuning which collapsed to one class sits on (the best of them is the
    majority-class baseline). For regression, the one score of a constant prediction (0: a constant
    has no correlation)."""
    if data.spec.kind == "regression":
        return [M.task_score(eval_scores(data, cfg, lambda exs: np.zeros((len(exs), 1))))]
    return [M.task_score(eval_scores(data, cfg, lambda exs, c=c: np.eye(data.num_labels)[[c] * len(exs)]))
            for c in range(data.num_labels)]


@dataclasses.dataclass(frozen=True)
class PreparedTask:
    """A task tokenized and padded once for every seed of a :func:`finetune` call: the same for
    every seed, so tokenizing it per seed was repeated work (:func:`prepare_task`)."""

    max_length: int
    train: list[Example]  # the capped training subset, less the early-stopping share
    train_set: PaddedSet
    heldout: list[Example]  # early stopping's share of the training subset (empty when off)
    heldout_enc: list[Encoded]
    evals: dict[str, list[Encoded]]  # each eval split's capped subset, encoded


def prepare_task(tok: Tokenizer, data: TaskData, cfg: FinetuneConfig, positions: int) -> PreparedTask:
    """Tokenize (and pad) ``data`` for a model with ``positions`` positions, as every seed sees it."""
    max_length = min(cfg.max_length, positions)
    train = subset(data.train, cfg.max_train_examples)
    heldout: list[Example] = []
    if cfg.early_stopping:
        train, heldout = holdout_split(train, cfg.early_stopping_holdout)
    evals = {split: _encode(tok, subset(exs, cfg.max_eval_examples), max_length) for split, exs in data.evals.items()}
    return PreparedTask(max_length, train, PaddedSet(_encode(tok, train, max_length), tok.pad_id), heldout,
                        _encode(tok, heldout, max_length), evals)


def holdout_split(train: list[Example], share: float, seed: int = 0) -> tuple[list[Example], list[Example]]:
    """(rest, held out): a seeded share of the examples (at least one, the same for every training
    seed), both in the original order."""
    n_held = min(len(train) - 1, max(1, round(share * len(train))))
    held = set(np.random.default_rng(seed).permutation(len(train))[:n_held].tolist())
    return [e for i, e in enumerate(train) if i not in held], [e for i, e in enumerate(train) if i in held]


def train_seed(pretrained: nn.Module, tok: Tokenizer, data: TaskData, cfg: FinetuneConfig, seed: int,
               log=print, *, init: Init = "pretrained", status: Callable[[str], None] | None = None,
               prepared: PreparedTask | None = None, every_epoch: bool = False) -> dict:
    """Fine-tune one copy of the pretrained encoder with one seed and score every eval split;
    ``init="random"``: the same architecture from fresh weights. ``status`` gets a line at every
    tenth of the steps (step, share, examples/s, loss, ETA). ``prepared``: the task already
    tokenized by :func:`prepare_task` (a caller running several seeds tokenizes once). ``every_epoch``
    (without early stopping): every eval split scored at the end of each epoch too, in the result's
    ``curve`` with the number of classes predicted (1: the fine-tuning collapsed to one class)."""
    spec = data.spec
    torch.manual_seed(seed)
    device = resolve_device(cfg.device)
    model = build_classifier(pretrained, data.num_labels, cfg.classifier_dropout, cfg.unpad,
                             fresh=init == "random").to(device)
    runtime = resolve_runtime(cfg.precision, device, model.encoder.config)
    runtime.apply(model)
    precision = runtime.precision
    p = prepared or prepare_task(tok, data, cfg, model.encoder.config.max_position_embeddings)
    train, enc = p.train, p.train_set
    labels = torch.tensor([e.label for e in train], dtype=torch.float32 if spec.kind == "regression" else torch.long)
    labels = labels.to(device)
    lr = cfg.learning_rate or default_learning_rate(model.encoder.config.hidden_size)
    n_epochs = cfg.epochs if cfg.epochs is not None else spec.epochs
    limits = TuneLimits.of_epochs(n_epochs, len(train), cfg.batch_size)
    total = limits.steps
    tune = cfg.tune_config(lr=lr, limits=limits, device=device, precision=precision.precision,
                           layer_decay=cfg.layer_decay)
    rng = np.random.default_rng(seed)
    lengths = enc.lengths
    seen = 0

    def one_epoch():
        nonlocal seen
        for idx in length_batches(lengths, cfg.batch_size, rng, cfg.bucket):
            seen += len(idx)
            yield idx

    def loss_fn(model: nn.Module, idx: np.ndarray) -> torch.Tensor:
        batch = {k: v.to(device, non_blocking=True) for k, v in enc.batch(idx).items()}  # collate's batch
        logits = model(**batch).float()  # (B, C)
        y = labels[torch.as_tensor(idx, device=device)]
        return F.mse_loss(logits[:, 0], y) if spec.kind == "regression" else F.cross_entropy(logits, y)

    def on_step(step: int, losses: list[torch.Tensor]) -> None:
        if status is not None and (step % max(1, total // 10) == 0 or step == total):
            status(_status_line(init, seed, step, total, seen, time.perf_counter() - t0, losses))

    stopping = (_EarlyStopping(model, spec, p, cfg, total, tok.pad_id, precision.precision)
                if cfg.early_stopping else None)
    per_epoch = math.ceil(len(train) / cfg.batch_size)
    curve = (_Curve(model, data, p, cfg, per_epoch, total, tok.pad_id, precision.precision)
             if every_epoch and stopping is None else None)
    t0 = time.perf_counter()
    losses = fit(model, epochs(one_epoch), loss_fn, tune, on_step=on_step, stop=stopping or curve)
    if stopping is not None:
        stopping.restore_best()
    train_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    scores = split_scores(data, cfg, lambda split, exs: predict(model, p.evals[split], tok.pad_id, cfg.eval_batch_size,
                                                                precision.precision, cfg.bucket))
    eval_n = sum(len(e) for e in p.evals.values())
    eval_time = time.perf_counter() - t1
    result = {
        "seed": seed, "scores": scores, "score": M.task_score(scores), "steps": total, "learning_rate": lr,
        "epochs": n_epochs, "first_loss": losses[0], "final_loss": float(np.mean(losses[-10:])),
        "train_examples_per_s": seen / train_time, "eval_examples_per_s": eval_n / max(eval_time, 1e-9),
        "train_time_s": train_time, "device": str(device),  # CPU and GPU draw other dropout streams
        "machine": machine_kind(device),
        "precision": precision.precision, "precision_reason": precision.reason, "attention": runtime.attention,
        "attention_kernels": runtime.kernels(),
        **({"init": init} if init != "pretrained" else {}),
        **(stopping.record(len(losses)) if stopping is not None else {}),
        **({"curve": curve.points} if curve is not None else {}),
    }
    log(f"  {'random init, ' if init == 'random' else ''}seed {seed}: "
        + ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
        + f"  ({total} steps, {result['train_examples_per_s']:.0f} train ex/s, "
          f"{result['eval_examples_per_s']:.0f} eval ex/s)")
    return result


class _EarlyStopping:
    """``fit``'s stop: score the held-out share every ``cfg.early_stopping_every`` epochs (and at
    the last step), keep the best weights, stop after ``cfg.early_stopping`` scorings without a gain."""

    def __init__(self, model: nn.Module, spec: TaskSpec, p: PreparedTask, cfg: FinetuneConfig, total: int,
                 pad_id: int, precision: str):
        self.model, self.spec, self.p, self.cfg, self.total = model, spec, p, cfg, total
        self.pad_id, self.precision = pad_id, precision
        self.every = max(1, math.ceil(cfg.early_stopping_every * math.ceil(len(p.train) / cfg.batch_size)))
        self.best, self.best_step, self.best_state, self.misses = -math.inf, 0, None, 0
        self.history: list[tuple[int, float]] = []

    def __call__(self, step: int) -> bool:
        if step % self.every and step != self.total:
            return False
        logits = predict(self.model, self.p.heldout_enc, self.pad_id, self.cfg.eval_batch_size, self.precision)
        self.model.train()  # predict left it in eval mode
        score = M.task_score(scores_of(self.spec, logits, self.p.heldout))
        self.history.append((step, score))
        if score > self.best:  # a NaN score is never a gain
            self.best, self.best_step, self.misses = score, step, 0
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.misses += 1
        return self.misses >= self.cfg.early_stopping

    def restore_best(self) -> None:
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)

    def record(self, steps_run: int) -> dict:
        return {"early_stopping": {"steps_run": steps_run, "best_step": self.best_step, "heldout_score": self.best,
                                   "heldout": len(self.p.heldout), "history": self.history}}


class _Curve:
    """``fit``'s stop that never stops: every eval split scored at each epoch's end (and the last
    step), with how many classes the predictions use."""

    def __init__(self, model: nn.Module, data: TaskData, p: PreparedTask, cfg: FinetuneConfig, steps_per_epoch: int,
                 total: int, pad_id: int, precision: str):
        self.model, self.data, self.p, self.cfg, self.pad_id, self.precision = model, data, p, cfg, pad_id, precision
        self.every, self.total = max(1, steps_per_epoch), total
        self.points: list[dict] = []

    def __call__(self, step: int) -> bool:
        if step % self.every and step != self.total:
            return False
        scores, classes = {}, {}
        for split, enc in self.p.evals.items():
            exs = subset(self.data.evals[split], self.cfg.max_eval_examples)
            logits = predict(self.model, enc, self.pad_id, self.cfg.eval_batch_size, self.precision, self.cfg.bucket)
            scores[split] = M.task_score(scores_of(self.data.spec, logits, exs))
            if self.data.spec.kind != "regression":
                classes[split] = int(len(np.unique(logits.argmax(-1))))
        self.model.train()  # predict left it in eval mode
        self.points.append({"step": step, "epoch": step / self.every, "score": scores, "classes": classes})
        return False


def _status_line(init: str, seed: int, step: int, total: int, seen: int, elapsed: float, losses: list) -> str:
    recent = torch.stack(losses[-max(1, total // 10):]).float().mean().item()  # one host sync per status line
    eta = elapsed * (total - step) / step
    return (f"finetune{' (random init)' if init == 'random' else ''} seed {seed}: step {step}/{total} "
            f"({step / total:.0%}), {seen / max(elapsed, 1e-9):.0f} examples/s, loss {recent:.4f}, ETA {eta:.0f}s")


def finetune(model_dir: str | Path | nn.Module, task: str | TaskSpec, config: FinetuneConfig | None = None,
             seeds: int | list[int] = 1, *, data_dir: str | Path | None = None, tokenizer_dir=None,
             log=print, init: Init = "pretrained", random_control: bool = False,
             status: Callable[[str], None] | None = None) -> dict:
    """Fine-tune ``model_dir`` on ``task`` once per seed; return the results dict (JSON-ready).

    ``seeds``: a count N (seeds 0..N-1) or an explicit list. The summary holds the median and the
    spread (min, max, std) of every metric over the seeds. ``init="random"`` fine-tunes the same
    architecture from fresh weights instead; ``random_control`` does both, with the same seeds, and
    reports the random initialisation's scores beside the pretrained ones (``random_control``) and
    what pretraining adds (``pretraining_gain``: the difference of the medians, per metric).
    """
    cfg = config or FinetuneConfig()
    resolve_device(cfg.device)  # a device this machine lacks fails here, before anything is loaded
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if isinstance(model_dir, nn.Module) and tokenizer_dir is None:
        raise ValueError("finetune: an in-memory model needs tokenizer_dir=...")
    pretrained = load_model(model_dir) if not isinstance(model_dir, nn.Module) else model_dir
    tok = load_tokenizer(tokenizer_dir or model_dir)
    check_vocab(tok, pretrained, str(tokenizer_dir or model_dir))
    data = load_task(spec, data_dir)
    log(data.summary())
    positions = deployed(pretrained).encoder.config.max_position_embeddings
    if cfg.max_length > positions:
        log(f"  max_length {cfg.max_length} capped at the model's {positions} positions")
    if cfg.max_train_examples is not None or cfg.max_eval_examples is not None:
        log(f"  capped: {cfg.max_train_examples} train / {cfg.max_eval_examples} eval examples per split")
    prepared = prepare_task(tok, data, cfg, positions)  # once for every seed (and the random control)
    runs = [train_seed(pretrained, tok, data, cfg, s, log, init=init, status=status, prepared=prepared)
            for s in seed_list]
    log(f"  precision {runs[0]['precision']} ({runs[0]['precision_reason']})")
    metric_names = list(runs[0]["scores"])
    summary = {k: spread([r["scores"][k] for r in runs]) for k in metric_names}
    extra: dict = {"init": init} if init != "pretrained" else {}
    if data.split is not None:
        extra["split"] = data.split
    if random_control and init == "pretrained":
        control = [train_seed(pretrained, tok, data, cfg, s, log, init="random", status=status, prepared=prepared)
                   for s in seed_list]
        rsummary = {k: spread([r["scores"][k] for r in control]) for k in metric_names}
        extra["random_control"] = {"seeds": control, "summary": rsummary,
                                   "score": spread([r["score"] for r in control])}
        extra["pretraining_gain"] = {k: summary[k]["median"] - rsummary[k]["median"] for k in metric_names}
    return {**extra,
        "task": spec.name, "model": str(model_dir) if not isinstance(model_dir, nn.Module) else "<in-memory>",
        "family": deployed(pretrained).config.family,
        "config": cfg.to_dict(), "precision": runs[0]["precision"], "precision_reason": runs[0]["precision_reason"],
        "machine": runs[0]["machine"], "task_spec": spec.to_dict(), "labels": list(data.labels),
        "num_train": min(len(data.train), cfg.max_train_examples or len(data.train)),
        "num_eval": {k: min(len(v), cfg.max_eval_examples or len(v)) for k, v in data.evals.items()},
        "files": data.files, "versions": versions(), "seeds": runs, "summary": summary,
        "score": spread([r["score"] for r in runs]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def evaluate_glue(model_dir, tasks=("cola", "sst2", "mrpc", "stsb", "rte"), config: FinetuneConfig | None = None,
                  seeds: int | list[int] = 1, *, data_dir=None, tokenizer_dir=None, log=print) -> dict:
    """Fine-tune and score every task; the average is over the tasks' median scores."""
    in_memory = isinstance(model_dir, nn.Module)
    pretrained = model_dir if in_memory else load_model(model_dir)
    name = "<in-memory>" if in_memory else str(model_dir)
    per_task = {}
    for t in tasks:
        r = finetune(pretrained, t, config, seeds, data_dir=data_dir, tokenizer_dir=tokenizer_dir or model_dir, log=log)
        per_task[r["task"]] = {**r, "model": name}
    avg = float(np.mean([r["score"]["median"] for r in per_task.values()]))
    return {"model": name, "tasks": per_task, "average": avg, "versions": versions()}


def glue_table(results: dict) -> str:
    """A GLUE-style table: one column per task (its metrics, median over seeds), then the average."""
    cols, cells = [], []
    for name, r in results["tasks"].items():
        s = r["summary"]
        cols.append(name.upper() if len(name) < 6 else name)
        cells.append("/".join(f"{100 * s[k]['median']:.1f}" for k in s))
    widths = [max(len(c), len(v)) for c, v in zip(cols, cells)]
    head = " | ".join(c.ljust(w) for c, w in zip(cols, widths)) + " | Avg"
    row = " | ".join(v.ljust(w) for v, w in zip(cells, widths)) + f" | {100 * results['average']:.1f}"
    metrics = "; ".join(f"{n}: {'/'.join(r['summary'])}" for n, r in results["tasks"].items())
    n = next(iter(results["tasks"].values()))["score"]["n"] if results["tasks"] else 0
    return f"{head}\n{row}\n(median of {n} seed(s); {metrics})"
