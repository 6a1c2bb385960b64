"""Fine-tuning, below evaluation and generation: the one loop they share and what it needs.

Sequence classification (:mod:`encoderlab.eval.finetune`), UniLM-style generation
(:mod:`encoderlab.generate.train`) and few-shot prompting (:mod:`encoderlab.eval.prompting`) each
bring a loss function and their batches; everything else about a step is :func:`fit`'s.

- :mod:`encoderlab.tune.config`   TuneConfig (optimizer, limits, device, precision) for fit, and
  TuneSettings, the flat ``key=value`` settings the fine-tuning commands share;
- :mod:`encoderlab.tune.optim`    AdamW, its groups (layer-wise decay) and the schedule, under
  names apart from pretraining's (encoderlab/train/optim.py);
- :mod:`encoderlab.tune.loop`     :func:`fit` and :func:`epochs`;
- :mod:`encoderlab.tune.data`     batching by length, padding, the tokenizer check;
- :mod:`encoderlab.tune.files`    reading task files, with errors naming file and line;
- :mod:`encoderlab.tune.results`  the spread over seeds and the versions saved with every result.
"""

from encoderlab.tune.config import TuneConfig, TuneLimits, TuneOptim, TuneSettings
from encoderlab.tune.loop import epochs, fit
from encoderlab.tune.optim import default_learning_rate, tune_adamw, tune_lr_scale, tune_param_groups

__all__ = ["TuneConfig", "TuneLimits", "TuneOptim", "TuneSettings", "default_learning_rate", "epochs", "fit",
           "tune_adamw", "tune_lr_scale", "tune_param_groups"]
