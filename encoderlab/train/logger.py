"""Metrics out: JSONL every N steps, TensorBoard when installed, and for a person a progress bar on a
terminal or, when stderr is a file or a pipe (nohup, ``> log``, ``| tee``), a status line at every
log step: step, share of the budget, tokens/s, loss and the time left."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


class MetricsLogger:
    def __init__(self, run_dir: Path, *, enabled: bool, progress: bool):
        self.enabled = enabled
        self.file = None
        self.tb = None
        self.bar = None
        self.status = enabled and progress and not sys.stderr.isatty()
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self.file = open(run_dir / "metrics.jsonl", "a")  # appended to on resume
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(run_dir / "tensorboard"))
        except ImportError:
            self.tb = None
        if progress and sys.stderr.isatty():
            from tqdm import tqdm

            # In percent of the budget, so the ETA works for step, token, FLOPs and time budgets alike.
            self.bar = tqdm(total=100.0, unit="%", dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n:.1f}/100% [{elapsed}<{remaining}{postfix}]")

    def log(self, split: str, record: dict) -> None:
        if not self.enabled:
            return
        rec = {"split": split, **{k: _clean(v) for k, v in record.items()}}
        self.file.write(json.dumps(rec) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in record.items():
                if isinstance(v, int | float) and k != "step":
                    self.tb.add_scalar(f"{split}/{k}", v, record["step"])
        if self.bar is not None and split == "train":
            self.bar.n = min(100.0, 100.0 * record.get("progress", 0.0))
            self.bar.set_postfix(step=record["step"], loss=f"{record.get('loss', float('nan')):.4f}")
            self.bar.refresh()
        if self.status and split == "train":
            self.message(status_line(record))

    def message(self, text: str) -> None:
        print(f"encoderlab pretrain: {text}", file=sys.stderr)

    def close(self) -> None:
        for x in (self.bar, self.tb, self.file):
            if x is not None:
                x.close()


def status_line(rec: dict) -> str:
    """One train record as a person reads it: step, share of the budget, tokens/s, loss, time left."""
    p = float(rec.get("progress", 0.0))
    elapsed = float(rec.get("elapsed_s", 0.0))
    eta = _duration(elapsed * (1 - p) / p) if p > 0 else "?"
    loss = rec.get("loss", rec.get("mlm_loss", float("nan")))
    return (f"step {rec['step']:,} | {100 * min(p, 1.0):.1f}% of the budget | {rec.get('tokens_per_s', 0.0):,.0f} "
            f"tokens/s | loss {loss:.4f} | ETA {eta}")


def _duration(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v
