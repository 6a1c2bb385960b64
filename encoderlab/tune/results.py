"""What every fine-tuning result records: the spread over seeds and the versions it ran with."""

from __future__ import annotations

import math
import platform
import statistics
import sys

import numpy as np
import torch


def spread(values: list[float]) -> dict[str, float]:
    """Median and spread over seeds (never the best of N). A non-finite value (a metric undefined
    for some seed) makes every statistic NaN, shown as such, rather than stopping a study."""
    if not all(math.isfinite(v) for v in values):
        nan = float("nan")
        return {"median": nan, "min": nan, "max": nan, "std": nan, "n": len(values)}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "platform": platform.platform()}
    for mod in ("tokenizers", "transformers", "encoderlab"):
        m = sys.modules.get(mod)
        if m is None:
            try:
                m = __import__(mod)
            except ImportError:
                continue
        out[mod] = getattr(m, "__version__", "unknown")
    return out
