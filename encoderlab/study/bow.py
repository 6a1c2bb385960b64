"""A bag-of-words baseline per task: what a linear model of the words alone scores, with no encoder.

Features: binary presence of the training set's most frequent lowercase words (for a sentence pair,
one block per sentence and one for the words they share). Classification: multinomial logistic
regression; regression (STS-B): ridge regression. Both in numpy, full-batch, L2-regularised, fitted
on the same training examples the fine-tunings see (FinetuneConfig.max_train_examples' subset), and
scored as the fine-tunings are (eval/finetune.eval_scores). A task whose fine-tuned encoders do not
beat this is one the study's encoders add nothing to.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from encoderlab.eval import metrics as M
from encoderlab.eval.finetune import eval_scores, subset

VOCAB = 1000
L2 = 1e-2
STEPS = 200
LR = 0.5
_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str | None) -> set[str]:
    return set(_WORD.findall(text.lower())) if text else set()


def features(examples, vocab: dict[str, int], pairs: bool) -> np.ndarray:
    """(N, F) binary features: words of a [, words of b, words in both]."""
    V = len(vocab)
    X = np.zeros((len(examples), V * (3 if pairs else 1)), dtype=np.float32)
    for i, e in enumerate(examples):
        a = _words(e.text_a)
        for w in a:
            if w in vocab:
                X[i, vocab[w]] = 1
        if pairs:
            b = _words(e.text_b)
            for w in b:
                if w in vocab:
                    X[i, V + vocab[w]] = 1
            for w in a & b:
                if w in vocab:
                    X[i, 2 * V + vocab[w]] = 1
    return X


def fit_predict(train, evals, *, kind: str, num_labels: int, vocab_size: int = VOCAB):
    """Fit on ``train`` (Examples) and return logits_of(examples) -> (N, C) for eval_scores."""
    counts = Counter(w for e in train for w in _words(e.text_a) | _words(e.text_b))
    vocab = {w: i for i, (w, _) in enumerate(counts.most_common(vocab_size))}
    pairs = bool(train) and train[0].text_b is not None
    X = features(train, vocab, pairs)
    X = np.hstack([X, np.ones((len(X), 1), np.float32)])  # bias
    if kind == "regression":
        y = np.array([e.label for e in train], dtype=np.float64)
        A = X.T.astype(np.float64) @ X + L2 * len(X) * np.eye(X.shape[1])
        w = np.linalg.solve(A, X.T.astype(np.float64) @ y)

        def logits_of(exs):
            Z = np.hstack([features(exs, vocab, pairs), np.ones((len(exs), 1), np.float32)])
            return (Z @ w)[:, None]

        return logits_of
    y = np.eye(num_labels, dtype=np.float32)[[e.label for e in train]]  # (N, C)
    W = np.zeros((X.shape[1], num_labels), dtype=np.float32)
    for _ in range(STEPS):  # full-batch gradient descent on the mean cross-entropy
        z = X @ W
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        W -= LR * (X.T @ (p - y) / len(X) + L2 * W)

    def logits_of(exs):
        return np.hstack([features(exs, vocab, pairs), np.ones((len(exs), 1), np.float32)]) @ W

    return logits_of


def bow_score(data, cfg) -> float:
    """The task score of the bag-of-words baseline on the task's eval split(s)."""
    train = subset(data.train, cfg.max_train_examples)
    logits_of = fit_predict(train, data.evals, kind=data.spec.kind, num_labels=data.num_labels)
    return M.task_score(eval_scores(data, cfg, logits_of))
