"""What fine-tuning, prompting and intrinsic scoring share, now in encoderlab/tune/ (below both
eval/ and generate/): kept here under the names callers import (benchmarks, study, intrinsic)."""

from encoderlab.tune.data import collate, length_batches
from encoderlab.tune.optim import tune_adamw as adamw
from encoderlab.tune.results import spread, versions

__all__ = ["adamw", "collate", "length_batches", "spread", "versions"]
