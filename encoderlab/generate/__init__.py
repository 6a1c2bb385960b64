"""UniLM-style generation from MLM weights: one encoder as a seq2seq model (source bidirectional,
target left-to-right over itself and the whole source), fine-tuned by masking target tokens and
decoded by appending [MASK], greedily or with beam search.

Modules, in the order data flows through them:

- :mod:`encoderlab.generate.tasks`    (source, target) pairs: the Wikipedia title task, TSV/JSONL;
- :mod:`encoderlab.generate.model`    the seq2seq attention mask, the MLM a checkpoint gives, batches;
- :mod:`encoderlab.generate.decode`   greedy and beam search;
- :mod:`encoderlab.generate.metrics`  exact match, token F1, ROUGE-L;
- :mod:`encoderlab.generate.train`    fine-tuning, scoring, :func:`run_generation` over seeds;
- :mod:`encoderlab.generate.cli`      ``encoderlab generate train`` and ``decode``.
"""
