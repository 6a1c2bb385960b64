"""Prompt-based zero- and few-shot classification (PET / LM-BFF style, and its ELECTRA variant).

A template such as ``"{a} It was [MASK] ."`` turns an example into a cloze; a verbalizer maps each
label to one label word. A label word may be several pieces of the tokenizer ("terrible" is 'ter',
'##rib', '##le' in an 8,192-piece WordPiece vocabulary): the [MASK] slot then takes as many tokens as
the word has pieces, and every piece is scored. Two scorers:

- MLM (BERT, ALBERT, an ELECTRA generator, GPT-BERT's head read at t - 1): a label's score is the mean
  log-probability of its word's pieces, each at its own [MASK] with all of the word's pieces masked
  at once (one forward per piece count). The mean, not the sum, so that a word's length does not
  decide the label; for words of one piece this is the word's MLM logit less one shared constant, so
  the prediction and the few-shot loss are those of the single-token scorer. Few-shot: fine-tune the
  whole MLM on the k-shot set with cross-entropy over the labels' scores (LM-BFF's prompt-based
  fine-tuning).
- Discriminator (ELECTRA; Xia et al. 2022, "Prompting ELECTRA"): put each label word's pieces into
  the slot and pick the word the discriminator finds least likely to be replaced, by its
  "replaced" logit averaged over the word's pieces. Few-shot: train the discriminator with binary
  cross-entropy on those averaged logits, the right word labelled original, the others replaced.

k-shot sets have k examples per class (LM-BFF's convention), sampled from the train split with
the seed; each seed draws a new set and a new training order. Accuracy is reported per seed with
the median and spread.

Shape letters: B batch, T length, C labels, V vocabulary, L a label word's pieces.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from encoderlab.checkpoint import load_model
from encoderlab.config import ConfigError
from encoderlab.data.tokenizer import Encoded, Tokenizer, load_tokenizer
from encoderlab.eval import metrics as M
from encoderlab.eval.config import PromptConfig
from encoderlab.eval.intrinsic import discriminator_network, mlm_network
from encoderlab.eval.tasks import Example, TaskSpec, get_task, load_task
from encoderlab.models.networks import Discriminator
from encoderlab.models.pairs import deployed
from encoderlab.precision import autocast
from encoderlab.runtime import resolve_runtime
from encoderlab.tune import TuneConfig, TuneLimits, TuneOptim, fit
from encoderlab.tune.data import collate
from encoderlab.tune.results import spread, versions


@dataclass
class Prompt:
    ids: list[int]  # with one [MASK] at mask_pos: the label word's slot
    mask_pos: int

    def filled(self, fill: list[int]) -> list[int]:
        """The ids with the slot's one [MASK] replaced by ``fill`` (a word's pieces, or as many [MASK])."""
        return self.ids[: self.mask_pos] + list(fill) + self.ids[self.mask_pos + 1 :]


def build_prompts(tok: Tokenizer, template: str, examples: list[Example], max_length: int,
                  slot: int = 1) -> list[Prompt]:
    """[CLS] template-with-texts [SEP]; texts (not the template) are truncated, longest first, so that
    every occurrence of {a} and {b} fits with ``slot`` tokens in the [MASK] slot (the longest label
    word's pieces). A template with no or several [MASK], or one that does not fit in max_length with
    its texts empty, is refused (ConfigError, naming the template)."""
    n_mask = template.count("[MASK]")
    if n_mask != 1:
        raise ConfigError(f"template {template!r} has {n_mask} [MASK]: a prompt needs exactly one "
                          "(its label word is scored there)" if n_mask else f"template {template!r} has no [MASK]")
    if tok.mask_id is None:
        raise ValueError(f"tokenizer {tok.source} has no mask token")
    parts = [p for p in re.split(r"(\{a\}|\{b\}|\[MASK\])", template) if p]
    literal = {p: tok.encode(p) for p in parts if p not in ("{a}", "{b}", "[MASK]")}
    a_ids = tok.encode_batch([x.text_a for x in examples])
    has_b = "{b}" in template
    b_ids = tok.encode_batch([x.text_b or "" for x in examples])
    fixed = 2 + slot + sum(len(literal[p]) for p in parts if p in literal)  # [CLS] [SEP], the slot, every literal
    n_a, n_b = parts.count("{a}"), parts.count("{b}")  # a text repeated in the template costs each time
    if fixed > max_length or (fixed == max_length and n_a + n_b):
        raise ConfigError(f"template {template!r} takes {fixed} tokens with [CLS], [SEP] and {slot} in the [MASK] "
                          f"slot (the longest label word's pieces), leaving "
                          f"no room for its texts within max_length={max_length}: shorten it or raise max_length")
    out = []
    for a, b in zip(a_ids, b_ids):
        a, b = list(a), list(b) if has_b else []
        while fixed + n_a * len(a) + n_b * len(b) > max_length:  # longest first
            (a if len(a) >= len(b) else b).pop()
        ids = [tok.cls_id]
        mask_pos = -1
        for p in parts:
            if p == "[MASK]":
                mask_pos = len(ids)
                ids.append(tok.mask_id)
            else:
                ids += a if p == "{a}" else b if p == "{b}" else literal[p]
        out.append(Prompt(ids + [tok.sep_id], mask_pos))
    return out


def _filled_batch(prompts: list[Prompt], pad_id: int, fill: list[int]):
    """Collated batch of the prompts with ``fill`` in the slot, and the (B, L) positions it took."""
    enc = [Encoded(ids, [0] * len(ids), [], []) for ids in (p.filled(fill) for p in prompts)]
    pos = torch.tensor([p.mask_pos for p in prompts])[:, None] + torch.arange(len(fill))  # (B, L)
    return collate(enc, pad_id), pos


def label_scores(net: nn.Module, method: str, prompts: list[Prompt], words: list[list[int]], pad_id: int,
                 precision: str) -> torch.Tensor:
    """(B, C) scores, higher = more likely label; ``words``: each label word's piece ids. MLM: the mean
    log-probability of a word's pieces at its [MASK]s. Discriminator: -logit(replaced), averaged over
    the pieces of each label word placed in the slot."""
    B, rows = len(prompts), torch.arange(len(prompts))[:, None]  # rows: (B, 1)
    cols: list[torch.Tensor | None] = [None] * len(words)
    if method == "mlm":
        mask_id = prompts[0].ids[prompts[0].mask_pos]
        for L in sorted({len(w) for w in words}):  # one forward per piece count, the word's pieces all masked
            batch, pos = _filled_batch(prompts, pad_id, [mask_id] * L)
            T = batch["input_ids"].shape[1]
            with autocast(precision, "cpu"):
                logits = net(**batch, positions=(rows * T + pos).reshape(-1)).logits  # (B * L, V)
            logp = logits.float().log_softmax(-1).view(B, L, -1)  # (B, L, V)
            for c, w in enumerate(words):
                if len(w) == L:
                    cols[c] = logp[:, torch.arange(L), torch.tensor(w)].mean(1)  # (B,)
        return torch.stack(cols, 1)  # (B, C)
    for c, w in enumerate(words):
        batch, pos = _filled_batch(prompts, pad_id, w)
        with autocast(precision, "cpu"):
            logits = net(**batch)  # (B, T)
        cols[c] = -logits.float().gather(1, pos).mean(1)  # (B,)
    return torch.stack(cols, 1)  # (B, C)


@torch.no_grad()
def prompt_predict(net, method, prompts, words, pad_id, precision: str, batch_size: int = 64) -> np.ndarray:
    net.eval()
    order = np.argsort([len(p.ids) for p in prompts], kind="stable")
    pred = np.zeros(len(prompts), dtype=np.int64)
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        pred[idx] = label_scores(net, method, [prompts[j] for j in idx], words, pad_id, precision).argmax(-1).numpy()
    return pred


def prompt_train(net, method, prompts, labels, words, pad_id, cfg: PromptConfig, seed: int,
                 precision: str = "fp32") -> list[float]:
    """Prompt-based fine-tuning on the k-shot set: ``cfg.steps`` AdamW steps at a constant rate
    (LM-BFF's), clipped at norm 1, weight decay 0.01 on every parameter (biases included)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    y_all = torch.tensor(labels)
    # fit's autocast stays off: label_scores autocasts each forward itself, one per label word for
    # the discriminator, and under one shared autocast those forwards would share the weights' bf16
    # casts and sum their gradients in bf16 (other bf16 losses than prediction's code path gives)
    tune = TuneConfig(optim=TuneOptim(lr=cfg.learning_rate, schedule="constant", grad_clip=1.0),
                      limits=TuneLimits(steps=cfg.steps), device="cpu", precision="fp32")

    def shots():  # passes over the k-shot set, each in a new order; a batch may span two passes
        order = np.array([], dtype=np.int64)
        while True:
            if len(order) < cfg.batch_size:
                order = np.concatenate([order, rng.permutation(len(prompts))])
            idx, order = order[: cfg.batch_size], order[cfg.batch_size :]
            yield idx

    def loss_fn(net: nn.Module, idx: np.ndarray) -> torch.Tensor:
        scores = label_scores(net, method, [prompts[j] for j in idx], words, pad_id, precision)  # (B, C)
        y = y_all[idx]
        if method == "mlm":
            return F.cross_entropy(scores, y)
        # scores are -logits: the right word is "original" (0), the others "replaced" (1)
        return F.binary_cross_entropy_with_logits(-scores, 1.0 - F.one_hot(y, len(words)).float())

    return fit(net, shots(), loss_fn, tune, groups=[{"params": list(net.parameters())}])


def sample_k_shot(examples: list[Example], k: int, num_labels: int, seed: int) -> list[Example]:
    rng = np.random.default_rng(seed)
    out = []
    for c in range(num_labels):
        pool = [e for e in examples if e.label == c]
        take = rng.choice(len(pool), min(k, len(pool)), replace=False)
        out += [pool[i] for i in take]
    return out


def prompt_classify(model_dir, task: str | TaskSpec, config: PromptConfig | None = None, *, k: int = 0,
                    seeds: int | list[int] = 1, method: str = "auto", data_dir=None, tokenizer_dir=None,
                    log=print) -> dict:
    """Zero-shot (k=0) or k-shot prompt-based classification; accuracy on the task's eval split(s)."""
    cfg = config or PromptConfig()
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if spec.kind != "classification":
        raise ValueError(f"task {spec.name} is a regression: prompting needs a classification task")
    template = cfg.template or spec.template
    verbalizer = cfg.verbalizer or spec.verbalizer
    if not template or not verbalizer:
        raise ValueError(f"task {spec.name} has no template/verbalizer; "
                         "give PromptConfig(template=..., verbalizer=...)")
    model = load_model(model_dir) if not isinstance(model_dir, nn.Module) else model_dir
    tok = load_tokenizer(tokenizer_dir or model_dir)
    if method == "auto":
        method = "discriminator" if isinstance(deployed(model), Discriminator) else "mlm"
    base = mlm_network(model) if method == "mlm" else discriminator_network(model)
    runtime = resolve_runtime(cfg.precision, "cpu", base.encoder.config)
    runtime.apply(model)
    precision = runtime.precision
    data = load_task(spec, data_dir)
    if len(verbalizer) != len(data.labels):
        raise ValueError(f"{len(verbalizer)} label words {list(verbalizer)} for labels {list(data.labels)}")
    words = [tok.word_pieces(w) for w in verbalizer]
    slot = max(len(w) for w in words)
    evals = {s: exs[: cfg.max_eval_examples] if cfg.max_eval_examples else exs for s, exs in data.evals.items()}
    eval_prompts = {s: build_prompts(tok, template, exs, cfg.max_length, slot) for s, exs in evals.items()}
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if k == 0:
        seed_list = seed_list[:1]  # zero-shot is deterministic
    runs = []
    for seed in seed_list:
        net, losses = base, []
        if k > 0:
            shots = sample_k_shot(data.train, k, len(data.labels), seed)
            net = copy.deepcopy(base)
            losses = prompt_train(net, method, build_prompts(tok, template, shots, cfg.max_length, slot),
                                  [e.label for e in shots], words, tok.pad_id, cfg, seed, precision.precision)
        scores = {}
        for s, prompts in eval_prompts.items():
            pred = prompt_predict(net, method, prompts, words, tok.pad_id, precision.precision)
            key = "acc" if len(evals) == 1 else f"{s}_acc"
            scores[key] = M.accuracy(pred, [e.label for e in evals[s]])
        runs.append({"seed": seed, "scores": scores, "first_loss": losses[0] if losses else None,
                     "final_loss": float(np.mean(losses[-10:])) if losses else None})
        log(f"  {method} k={k} seed {seed}: " + ", ".join(f"{n} {v:.4f}" for n, v in scores.items()))
    summary = {n: spread([r["scores"][n] for r in runs]) for n in runs[0]["scores"]}
    return {"task": spec.name, "model": str(model_dir) if not isinstance(model_dir, nn.Module) else "<in-memory>",
            "method": method, "k": k, "template": template, "verbalizer": list(verbalizer),
            "label_pieces": {w: [tok.id_to_token(i) for i in ids] for w, ids in zip(verbalizer, words)},
            "config": cfg.to_dict(), "precision": precision.precision, "precision_reason": precision.reason,
            "seeds": runs, "summary": summary, "versions": versions(),
            "num_eval": {s: len(v) for s, v in evals.items()},
            # the accuracy of always answering the split's most common label: what a prompt must beat
            "majority": {s: float(np.bincount([e.label for e in v]).max() / len(v)) if v else None
                         for s, v in evals.items()}}

