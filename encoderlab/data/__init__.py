"""Data pipeline: text -> tokenizer -> sharded token store -> examples -> batches -> masking.

Modules, in the order data flows through them:

- :mod:`encoderlab.data.corpus`     streaming corpus readers with bad-input accounting;
- :mod:`encoderlab.data.tokenizer`  WordPiece / Unigram training and a small tokenizer wrapper;
- :mod:`encoderlab.data.prepare`    ``encoderlab prepare``: parallel, deterministic, resumable sharding;
- :mod:`encoderlab.data.store`      :class:`TokenStore`, the read-only memory-mapped view of a prepared store;
- :mod:`encoderlab.data.examples`   packed (MLM/ELECTRA) and sentence-pair (NSP/SOP) example builders;
- :mod:`encoderlab.data.loader`     seeded, resumable, rank-sharded batch loader;
- :mod:`encoderlab.data.masking`    dynamic token / whole-word / span / n-gram masking in torch.

Nothing here imports torch except ``loader`` and ``masking``, so ``prepare`` workers start quickly.
"""
