"""The fine-tuning loop: one function owns a step (schedule, forward under autocast, backward,
clipping, the optimizer), as nanoGPT's train.py does; a caller brings its batches and its loss.

    losses = fit(model, epochs(lambda: batches_of_one_epoch()), loss_fn, cfg)

``loss_fn(model, batch)`` returns a scalar loss; it runs under the configured precision's
autocast, so a loss computed from ``logits.float()`` is computed in fp32. Batches are drawn lazily,
one per step, so a caller's random stream (shuffling, masking) is drawn in the order it would be in
a hand-written loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import torch
from torch import nn

from encoderlab.precision import autocast
from encoderlab.tune.config import TuneConfig
from encoderlab.tune.optim import tune_adamw, tune_lr_scale, tune_param_groups, warmup_steps

B = TypeVar("B")


def fit(model: nn.Module, batches: Iterable[B], loss_fn: Callable[[nn.Module, B], torch.Tensor], cfg: TuneConfig,
        *, groups: list[dict] | None = None,
        on_step: Callable[[int, list[torch.Tensor]], None] | None = None,
        stop: Callable[[int], bool] | None = None) -> list[float]:
    """Train ``model`` in place for ``cfg.limits.steps`` steps, one batch each; the loss of every step.

    ``groups``: AdamW parameter groups (default :func:`tune_param_groups`: layer-wise decay, no
    weight decay on vectors); a group without ``lr`` takes ``cfg.optim.lr`` and one without
    ``weight_decay`` takes ``cfg.optim.weight_decay``. ``on_step(step, losses)`` is called after
    every step (1-based) with the detached losses so far: reading them syncs the device. ``stop(step)``,
    called after ``on_step``, ends training early when it returns True (early stopping): the
    schedule stays the one of ``cfg.limits.steps`` steps, and the losses returned are the steps run.
    """
    o = cfg.optim
    total = cfg.limits.steps
    if groups is None:
        groups = tune_param_groups(model, o.lr, o.layer_decay, o.weight_decay)
    opt = tune_adamw(groups, o.lr, o.eps, o.weight_decay)
    for g in opt.param_groups:
        g.setdefault("base_lr", g["lr"])
    warm = warmup_steps(o.warmup, total)
    model.train()
    losses: list[torch.Tensor] = []
    it = iter(batches)
    for step in range(total):
        try:
            batch = next(it)
        except StopIteration:
            raise ValueError(f"fit: the batches ran out after {step} of {cfg.limits.steps} steps "
                             "(wrap one epoch's batches in tune.epochs)") from None
        scale = tune_lr_scale(step, total, warm, o.schedule)
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * scale
        with autocast(cfg.precision, cfg.device):
            loss = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if o.grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        losses.append(loss.detach())  # no host sync per step (it would stall a GPU)
        if on_step is not None:
            on_step(step + 1, losses)
        if stop is not None and stop(step + 1):
            break
    return torch.stack(losses).float().cpu().tolist()


def epochs(one_epoch: Callable[[], Iterable[B]]) -> Iterator[B]:
    """Batches without end, one epoch after another: ``one_epoch()`` is called when the previous
    epoch's batches are used up (not before, so its shuffle is drawn when a loop would draw it)."""
    while True:
        empty = True
        for batch in one_epoch():
            empty = False
            yield batch
        if empty:  # no data: end, and fit says so, rather than loop forever
            return
