"""The steps a run's budget allows, and the recipe's step-counted settings laid out on them.

A recipe counts its warm-up (``optimizer.warmup_steps``) and its short-sequence phase
(``data.short_seq_steps``) in optimizer steps, written for its own length, ``trainer.max_steps``.
A run stops on whichever budget it reaches first; when that is a time, FLOPs or token budget
allowing fewer steps than ``max_steps``, both are scaled by (steps allowed / max_steps), as a study
lays them out as fractions of the steps its FLOPs budget buys (study/plan.py). The learning-rate
decay needs no scaling: it follows the share of the budget used (train/optim.py). Without a
``max_steps`` the step counts are the user's own and are kept. Either way a step-counted setting
that exceeds the steps allowed gets a warning naming its key, and a budget smaller than one step
is refused.

How many steps a budget allows:

- ``max_steps``: that many;
- ``max_flops``: the budget over one full-length step's FLOPs, counted as the trainer counts them
  (train/flops.py, ``planned_step_flops``: the objective's masking rate of the T - 2 tokens, T - 1
  next tokens per causal row, clm_then_mlm's two phases in their shares of the steps);
- ``max_tokens``: the budget over batch x length x grad_accum x processes (packed sequences);
- ``max_time_s``: the budget over the seconds of one full-length step, timed before the run on the
  run's own model, objective and data (one warm-up step, then the fastest of three; the weights,
  optimizer and random state are put back, and the time is not counted in the budget).

Short-sequence steps cost less than full-length ones, so a run with that phase takes a few more
steps than the estimate: its scaled phases then end slightly earlier in its budget than planned.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from encoderlab.config import ConfigError
from encoderlab.train.flops import planned_step_flops

# The step-counted settings checked against the steps allowed, and what exceeding each means.
STEP_KEYS = {
    "optimizer.warmup_steps": "the learning rate never reaches optimizer.lr",
    "data.short_seq_steps": "every step is at data.short_seq_len",
    "trainer.eval_every": "held-out evaluation only at the end",
    "trainer.checkpoint_every": "a checkpoint only at the end (or when stopped)",
    "trainer.log_every": "no status line or metrics record before the end",
    "objective.causal_steps": "every step is causal (clm_then_mlm never reaches its MLM phase)",
}
SCALED = ("optimizer.warmup_steps", "data.short_seq_steps")


@dataclass(frozen=True)
class BudgetPlan:
    steps: int  # optimizer steps the binding budget allows (an estimate for time budgets)
    binding: str  # the budget key that binds, e.g. "trainer.max_time_s"
    allowed: dict[str, float]  # steps each budget that is set allows
    scale: float | None = None  # steps / max_steps, where the recipe's step counts were scaled
    changes: dict[str, list[int]] = field(default_factory=dict)  # key -> [recipe's value, scaled value]
    warnings: list[str] = field(default_factory=list)
    seconds_per_step: float | None = None  # measured, for a time budget
    budgets: dict[str, float | None] = field(default_factory=dict)  # the trainer's four, as planned for

    def apply(self, cfg):
        """The recipe with its step counts scaled (unchanged when nothing was)."""
        opt, data = cfg.optimizer, cfg.data
        if "optimizer.warmup_steps" in self.changes:
            opt = opt.replace(warmup_steps=self.changes["optimizer.warmup_steps"][1])
        if "data.short_seq_steps" in self.changes:
            data = data.replace(short_seq_steps=self.changes["data.short_seq_steps"][1])
        obj = cfg.objective
        if obj.kind == "clm_then_mlm" and obj.causal_steps is None:  # the switch, in the steps allowed
            obj = obj.replace(causal_steps=round(obj.causal_share * self.steps))
        return cfg.replace(optimizer=opt, data=data, objective=obj)

    def describe(self) -> str:
        """The run's first log line: the binding budget, its steps, what was scaled."""
        est = "~" if self.binding != "trainer.max_steps" else ""
        timed = f" ({self.seconds_per_step:.3g} s a step, timed before the run)" if self.seconds_per_step else ""
        line = f"budget: {self.binding} binds at {est}{self.steps:,} step(s){timed}"
        if self.scale is not None:
            line += (f"; the recipe's step counts, written for trainer.max_steps, scaled x{self.scale:.3g}: "
                     + ", ".join(f"{k} {a:,} -> {b:,}" for k, (a, b) in self.changes.items()))
        return line + "; the learning rate decays over the budget's share used"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> BudgetPlan:
        return cls(**d)


def plan_budget(cfg, model_cfg, ocfg, *, world_size: int = 1,
                seconds_per_step: Callable[[], float] | None = None) -> BudgetPlan:
    """The steps ``cfg``'s budgets allow (model_cfg and ocfg resolved), the settings scaled to them
    and the warnings; a budget smaller than one step raises ConfigError."""
    t, d = cfg.trainer, cfg.data
    per_step = t.grad_accum * world_size  # micro-batches
    allowed: dict[str, float] = {}
    measured = None
    if t.max_steps is not None:
        allowed["trainer.max_steps"] = t.max_steps
    if t.max_flops is not None:
        full = planned_step_flops(model_cfg, ocfg, d.batch_size, d.seq_len) * per_step
        first = planned_step_flops(model_cfg, ocfg, d.short().batch_size, d.short_seq_len) * per_step \
            if d.short_seq_steps > 0 else full
        if t.max_flops < min(first, full):
            raise ConfigError(f"trainer.max_flops={t.max_flops:.3g} is less than one step ({min(first, full):.3g} "
                              "FLOPs at this model, batch and length): the run could not take a single step; "
                              f"raise it (1,000 steps: {1000 * full:.3g})")
        allowed["trainer.max_flops"] = t.max_flops / full
    if t.max_tokens is not None:
        tokens = d.batch_size * d.seq_len * per_step
        if t.max_tokens < tokens:
            raise ConfigError(f"trainer.max_tokens={t.max_tokens:,} is less than one step ({tokens:,} tokens: "
                              f"{d.batch_size} x {d.seq_len} x {per_step} micro-batch(es)); raise it")
        allowed["trainer.max_tokens"] = t.max_tokens / tokens
    if t.max_time_s is not None:
        measured = seconds_per_step() if seconds_per_step is not None else None
        if measured is not None:
            if t.max_time_s < measured:
                raise ConfigError(f"trainer.max_time_s={t.max_time_s:g} is less than one step ({measured:.3g} s, "
                                  "timed on this machine): the run could not take a single step; raise it")
            allowed["trainer.max_time_s"] = t.max_time_s / measured
    if not allowed:  # a time budget with nothing to time it by: nothing to lay out
        return BudgetPlan(steps=0, binding="trainer.max_time_s", allowed={}, budgets=budgets_of(cfg))
    binding = min(allowed, key=allowed.get)
    steps = max(1, math.floor(allowed[binding]))
    scale, changes = None, {}
    if t.max_steps is not None and steps < t.max_steps:
        scale = steps / t.max_steps
        for key in SCALED:
            value = _get(cfg, key)
            if value:
                changes[key] = [value, max(1, round(value * scale)) if key == "optimizer.warmup_steps"
                                else round(value * scale)]
    plan = BudgetPlan(steps=steps, binding=binding, allowed=allowed, scale=scale, changes=changes,
                      seconds_per_step=measured, budgets=budgets_of(cfg))
    scaled = plan.apply(cfg)
    warnings = [f"{key}={_get(scaled, key):,} exceeds the ~{steps:,} steps {binding} allows: {why}"
                for key, why in STEP_KEYS.items() if (_get(scaled, key) or 0) > steps]
    return BudgetPlan(**{**asdict(plan), "warnings": warnings})


def budgets_of(cfg) -> dict[str, float | None]:
    """The trainer's budgets: a resumed run reuses its saved plan only when these are unchanged."""
    t = cfg.trainer
    return {"max_steps": t.max_steps, "max_tokens": t.max_tokens, "max_flops": t.max_flops, "max_time_s": t.max_time_s}


def _get(cfg, key: str):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)
