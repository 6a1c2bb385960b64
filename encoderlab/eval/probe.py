"""Two seed-free lenses on a task beside fine-tuning: a frozen-feature linear probe of an encoder, and
a strong n-gram baseline that needs no encoder at all.

- **Linear probe.** The encoder's last hidden states, mean-pooled over the real tokens, computed once
  per checkpoint (no gradient, no dropout); a logistic regression (classification) or a ridge
  regression (regression) from scikit-learn on the standardized features. What pretraining put into
  the representation, with no fine-tuning noise: the same probe on the architecture's fresh weights
  is its control (random features are a known, non-trivial baseline).
- **N-gram baseline.** TF-IDF of word 1-2-grams and character 2-5-grams within word boundaries, or of
  character 1-2-grams for Chinese and Japanese (a Chinese clause is not one "word", as study/bow.py's
  ``\\w+`` tokens made it), with the same linear models.
  For a sentence pair: the features of each side and their elementwise product (the n-grams both
  share, weighted), plus the two sides' cosine similarity: the lexical-overlap signal STS-B and MRPC
  reward.

Both choose their regularisation on a held-out part of the training examples (never on dev) from a
fixed grid, fit on the rest, and are scored as the fine-tunings are (eval/finetune.split_scores).
"""

from __future__ import annotations

import re

import numpy as np
import torch
from torch import nn

from encoderlab.data.tokenizer import Tokenizer
from encoderlab.eval import metrics as M
from encoderlab.eval.finetune import _encode, build_classifier, subset
from encoderlab.eval.split import heldout_split
from encoderlab.eval.tasks import Example, TaskData, TaskSpec
from encoderlab.precision import autocast
from encoderlab.tune.data import collate, length_batches

C_GRID = (0.01, 0.1, 1.0, 10.0)  # logistic regression's inverse L2 strength
ALPHA_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)  # ridge's L2 strength


def _sklearn():
    try:
        import sklearn  # noqa: F401
    except ImportError as e:
        raise ImportError("the linear probe and the n-gram baseline need scikit-learn: "
                          "pip install 'encoderlab[study]'") from e


# ---- features -------------------------------------------------------------------------------------
@torch.no_grad()
def encoder_features(pretrained: nn.Module, tok: Tokenizer, examples: list[Example], *, fresh: bool = False,
                     seed: int = 0, max_length: int = 128, batch_size: int = 64, precision: str = "fp32") -> np.ndarray:
    """(N, H) mean-pooled last hidden states of the deployed encoder (an ELECTRA's discriminator);
    ``fresh``: of the same architecture from fresh weights (torch seed ``seed``)."""
    torch.manual_seed(seed)
    clf = build_classifier(pretrained, num_labels=2, fresh=fresh).eval()
    positions = clf.encoder.config.max_position_embeddings
    encoded = _encode(tok, examples, min(max_length, positions))
    out = np.zeros((len(encoded), clf.encoder.config.hidden_size), dtype=np.float32)
    for idx in length_batches([len(e.ids) for e in encoded], batch_size, None, True):
        batch = collate([encoded[i] for i in idx], tok.pad_id)
        with autocast(precision, torch.device("cpu")):
            hidden = clf.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).hidden
        mask = batch["attention_mask"].unsqueeze(-1).float()  # (B, T, 1)
        pooled = (hidden.float() * mask).sum(1) / mask.sum(1).clamp(min=1)  # (B, H)
        out[idx] = pooled.numpy()
    return out


CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def is_cjk(texts: list[str], share: float = 0.3) -> bool:
    """Whether the texts are mostly Chinese or Japanese (at least ``share`` of their non-space characters
    are CJK ideographs or kana): they have no spaces between words, so "words" are whole clauses."""
    chars = "".join(texts[:2000]).replace(" ", "")
    return bool(chars) and len(CJK.findall(chars)) >= share * len(chars)


class NgramFeatures:
    """TF-IDF n-grams fitted on training text, chosen by the language: character 1-2-grams for Chinese
    and Japanese (no word boundaries to split on), word 1-2-grams plus character 2-5-grams within word
    boundaries elsewhere; for pairs [a, b, a * b, cos(a, b)]."""

    def __init__(self, train: list[Example], max_features: int = 50_000):
        _sklearn()
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.pipeline import FeatureUnion

        self.pairs = bool(train) and train[0].text_b is not None
        texts = [e.text_a for e in train] + ([e.text_b or "" for e in train] if self.pairs else [])
        self.cjk = is_cjk(texts)
        parts = [("char", TfidfVectorizer(analyzer="char", ngram_range=(1, 2), min_df=2, max_features=max_features,
                                          sublinear_tf=True))] if self.cjk else [
            ("word", TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=max_features, sublinear_tf=True)),
            ("char", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, max_features=max_features,
                                     sublinear_tf=True))]
        self.union = FeatureUnion(parts)
        self.union.fit(texts)

    def __call__(self, examples: list[Example]):
        import scipy.sparse as sp
        from sklearn.preprocessing import normalize

        a = normalize(self.union.transform([e.text_a for e in examples]))
        if not self.pairs:
            return a.tocsr()
        b = normalize(self.union.transform([e.text_b or "" for e in examples]))
        both = a.multiply(b)  # the n-grams the two sides share, weighted
        cos = sp.csr_matrix(np.asarray(both.sum(1)))  # (N, 1)
        return sp.hstack([a, b, both, cos]).tocsr()


# ---- the linear models ----------------------------------------------------------------------------
def fit_select(spec: TaskSpec, X_rest, y_rest, X_held, y_held, *, standardize: bool) -> tuple[object, dict]:
    """The linear model whose regularisation scores best on the held-out examples, fitted on the rest;
    and {"chosen": value, "heldout": {value: score}}."""
    _sklearn()
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    regression = spec.kind == "regression"
    if not regression and len(np.unique(y_rest)) < 2:
        raise ValueError(f"task {spec.name}: the training examples the probe fits on hold one class only "
                         f"({len(y_rest)} examples); a classifier needs two")
    grid = ALPHA_GRID if regression else C_GRID
    scores, models = {}, {}
    for v in grid:
        model = Ridge(alpha=v) if regression else LogisticRegression(C=v, max_iter=3000)
        if standardize:
            model = make_pipeline(StandardScaler(), model)
        model.fit(X_rest, y_rest)
        scores[f"{v:g}"] = M.task_score(_scores(spec, as_logits(model, X_held, spec), y_held))
        models[v] = model
    best = max(grid, key=lambda v: (np.nan_to_num(scores[f"{v:g}"], nan=-np.inf), -grid.index(v)))
    return models[best], {"chosen": best, "heldout": scores}


def _scores(spec: TaskSpec, logits: np.ndarray, y) -> dict[str, float]:
    """Every metric of the task, as eval/finetune.scores_of computes them, from labels ``y``."""
    pred = logits[:, 0] if spec.kind == "regression" else logits.argmax(-1)
    return M.compute(spec.metrics, pred, np.asarray(y).tolist())


def as_logits(model, X, spec: TaskSpec) -> np.ndarray:
    """(N, C) logits as eval/finetune.scores_of reads them (regression: (N, 1))."""
    if spec.kind == "regression":
        return model.predict(X)[:, None]
    logits = model.decision_function(X).reshape(X.shape[0], -1)
    if logits.shape[1] == 1:  # binary: sklearn gives one margin, for the second class
        logits = np.hstack([-logits, logits]) / 2
    return logits


def labels_of(examples: list[Example], spec: TaskSpec) -> np.ndarray:
    return np.array([e.label for e in examples], dtype=np.float64 if spec.kind == "regression" else np.int64)


def linear_scores(spec: TaskSpec, featurize, rest: list[Example], held: list[Example],
                  evals: dict[str, list[Example]], *, standardize: bool) -> dict:
    """Fit on ``rest``, choose on ``held``, score every eval split: {"scores": {split: {metric: v}},
    "score": {split: task score}, "regularisation": {...}}. ``featurize(examples)`` gives X."""
    model, chosen = fit_select(spec, featurize(rest), labels_of(rest, spec), featurize(held), labels_of(held, spec),
                               standardize=standardize)
    scores = {split: _scores(spec, as_logits(model, featurize(exs), spec), labels_of(exs, spec))
              for split, exs in evals.items()}
    return {"scores": scores, "score": {s: M.task_score(v) for s, v in scores.items()}, "regularisation": chosen}


def ngram_baseline(spec: TaskSpec, rest: list[Example], held: list[Example], evals: dict[str, list[Example]]) -> dict:
    """The n-gram baseline's :func:`linear_scores` (its vocabulary from ``rest`` alone), with the
    analyzers it chose."""
    feats = NgramFeatures(rest)
    return {**linear_scores(spec, feats, rest, held, evals, standardize=False),
            "analyzers": "character 1-2-grams" if feats.cjk else "word 1-2-grams + character 2-5-grams"}


def ngram_on_task(data: TaskData, max_train: int | None, max_eval: int | None) -> dict:
    """:func:`ngram_baseline` on a loaded task as a fine-tuning sees it: the capped training subset,
    a held-out fifth of it for the regularisation (eval/split.heldout_split), every eval split capped;
    "score" is the task score over every eval split's metrics (one split: its own)."""
    rest, held = heldout_split(subset(data.train, max_train))
    evals = {k: subset(v, max_eval) for k, v in data.evals.items()}
    got = ngram_baseline(data.spec, rest, held, evals)
    scores = (next(iter(got["scores"].values())) if len(evals) == 1 else
              {f"{k}_{m}": v for k, ms in got["scores"].items() for m, v in ms.items()})
    return {**got, "task_scores": scores, "task_score": M.task_score(scores)}


def linear_probe(pretrained: nn.Module, tok: Tokenizer, spec: TaskSpec, rest: list[Example], held: list[Example],
                 evals: dict[str, list[Example]], *, fresh: bool = False, precision: str = "fp32") -> dict:
    """The frozen-feature probe's :func:`linear_scores` (each split's features computed once)."""

    def featurize(examples: list[Example]) -> np.ndarray:
        return encoder_features(pretrained, tok, examples, fresh=fresh, precision=precision)

    return linear_scores(spec, featurize, rest, held, evals, standardize=True)
