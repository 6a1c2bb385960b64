"""Count baselines for the held-out MLM evaluation: what a model that learned nothing from context
scores at exactly the positions the trainer's evaluation masks (same batches, same seeds).

- unigram: always the most frequent non-special training token. Tiny models sit on this plateau
  first, and a model that has not clearly left it has learned nothing a downstream task can use.
- bigram: the most frequent training successor of the visible left neighbour (else the unigram
  guess): one word of context, so that "beats the unigram baseline" has a scale.
- unigram_loss: the unigram model's cross-entropy (nats) at those positions, averaged as the
  evaluation averages its MLM loss (per batch, then over batches). A held-out MLM loss below it means
  some use of context, even while the top-1 guess is still the most frequent token.
"""

from __future__ import annotations

import numpy as np
import torch

from encoderlab.data.store import TokenStore
from encoderlab.objectives import mask_batch, with_defaults
from encoderlab.train.config import PretrainConfig
from encoderlab.train.data import make_source
from encoderlab.train.evaluate import EVAL_SEED, eval_config


def count_tables(store_path: str) -> tuple[int, torch.Tensor, np.ndarray]:
    """(the most frequent non-special training token, each token's most frequent training successor
    as a (V,) tensor with the unigram guess where there is none, the training token counts)."""
    store = TokenStore(store_path, "train")
    special = sorted(set(store.special_ids.values()))
    V = store.vocab_size
    counts = np.zeros(V, dtype=np.int64)
    codes = []
    for shard in store.tokens:
        a = np.asarray(shard, dtype=np.int64)
        counts += np.bincount(a, minlength=V)
        codes.append(a[:-1] * V + a[1:])  # (prev, next) pairs
    counts[special] = 0
    top = int(counts.argmax())
    pairs, n = np.unique(np.concatenate(codes), return_counts=True)
    prev, nxt = pairs // V, pairs % V
    keep = ~np.isin(nxt, special)
    prev, nxt, n = prev[keep], nxt[keep], n[keep]
    order = np.lexsort((-n, prev))  # by prev, most frequent successor first
    first = np.ones(len(order), dtype=bool)
    first[1:] = prev[order][1:] != prev[order][:-1]
    best = torch.full((V,), top, dtype=torch.long)
    best[torch.from_numpy(prev[order][first])] = torch.from_numpy(nxt[order][first])
    best[special] = top  # [MASK] or another special on the left: no context, unigram guess
    return top, best, counts


def count_hits(top: int, best: torch.Tensor, no_context: int, masked) -> tuple[int, int]:
    """(unigram hits, bigram hits) at one masked batch's positions (objectives.base.Masked); the
    left neighbour is the visible input token (``no_context`` at a sequence's first position)."""
    T = masked.input_ids.shape[1]
    flat = masked.input_ids.reshape(-1)
    left = torch.where(masked.positions % T > 0, flat[(masked.positions - 1).clamp(min=0)], no_context)  # (M,)
    return int((masked.targets == top).sum()), int((masked.targets == best[left]).sum())


def count_baselines(cfg: PretrainConfig) -> dict[str, float]:
    """Unigram and bigram accuracy and the unigram loss on cfg's held-out evaluation batches
    (cfg.data names the token store; the evaluation masks every model's batches alike)."""
    store = TokenStore(cfg.data.path, "train")
    special = sorted(set(store.special_ids.values()))
    V = store.vocab_size
    top, best, counts = count_tables(cfg.data.path)
    ocfg = eval_config(with_defaults(cfg.objective, store.special_ids["mask"], tuple(special)))
    it = iter(make_source(cfg.data, split="valid", rank=0, world_size=1, seed=cfg.trainer.seed, pairs=None))
    logp = torch.from_numpy(np.log(np.maximum(counts, 1) / counts.sum()))
    hits = {"unigram": 0, "bigram": 0}
    nll, total = 0.0, 0
    g = torch.Generator()
    for i in range(cfg.data.eval_batches):  # the evaluation's batches and masking seeds
        g.manual_seed(EVAL_SEED + i)
        m = mask_batch(next(it), ocfg, V, g)
        uni, bi = count_hits(top, best, special[0], m)
        hits["unigram"] += uni
        hits["bigram"] += bi
        nll -= float(logp[m.targets].mean())  # the evaluation's loss is the mean of its batches' means
        total += m.targets.numel()
    if total == 0:
        raise ValueError(f"{cfg.data.path}: the held-out split gave no masked positions (data.eval_batches "
                         f"{cfg.data.eval_batches})")
    return {**{k: v / total for k, v in hits.items()}, "unigram_loss": nll / cfg.data.eval_batches,
            "positions": total}
