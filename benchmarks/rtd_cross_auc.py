"""Discriminators scored on the same replacements: the race between an ELECTRA's generator and its
discriminator, taken apart.

An ELECTRA's held-out AUC (train/evaluate.py) is measured on its own generator's samples, so a run
whose generator got better has harder fakes to find: its AUC can stay flat while its discriminator
improves. This scores every given checkpoint's discriminator on one fixed set of corrupted inputs,
the same for all: the held-out batches of --reference's run, masked as the held-out evaluation masks
(15%, fixed seed), with the masked tokens replaced by samples of --reference's generator, and again
by samples of the training set's unigram distribution (fakes that need no model to make).

    python benchmarks/rtd_cross_auc.py --reference runs/learning/rope-all-s0/electra-tiny \\
        runs/learning/*/electra-tiny/checkpoints/step-003000

Prints one row per checkpoint: AUC on its own generator's fakes, on the reference's, on unigram
fakes. The checkpoints must share the reference's tokenizer.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from encoderlab.checkpoint import load_model
from encoderlab.data.store import TokenStore
from encoderlab.objectives import mask_batch, with_defaults
from encoderlab.objectives.rtd import sample_replacements
from encoderlab.train.config import PretrainConfig
from encoderlab.train.data import make_source
from encoderlab.train.evaluate import EVAL_SEED, eval_config, roc_auc


def corrupted_batches(ref_run: Path, ref_model, n: int | None) -> tuple[list[dict], list[dict], list[dict]]:
    """(clean batches, generator-corrupted, unigram-corrupted): each corrupted batch carries
    ``replaced`` (B, T) ids and ``is_replaced`` (B, T)."""
    cfg = PretrainConfig.from_yaml(ref_run / "config.yaml")
    src = make_source(cfg.data, split="valid", rank=0, world_size=1, seed=cfg.trainer.seed, pairs=None)
    it = iter(src)
    clean = [next(it) for _ in range(n or cfg.data.eval_batches)]
    store = TokenStore(cfg.data.path, "train")
    special = sorted(set(store.special_ids.values()))
    ocfg = eval_config(with_defaults(cfg.objective, store.special_ids["mask"], tuple(special)))
    counts = np.zeros(store.vocab_size, dtype=np.int64)
    for shard in store.tokens:
        counts += np.bincount(np.asarray(shard, dtype=np.int64), minlength=store.vocab_size)
    counts[special] = 0  # fakes are words, never [MASK] or [SEP]
    unigram_logp = torch.from_numpy(counts / counts.sum()).clamp(min=1e-12).log().float()  # (V,)
    by_gen, by_unigram = [], []
    g = torch.Generator()
    for i, batch in enumerate(clean):
        ids, am, tt = batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
        g.manual_seed(EVAL_SEED + i)
        m = mask_batch(batch, ocfg, len(unigram_logp), g)
        with torch.no_grad():
            logits = ref_model.generator(m.input_ids, am, tt, positions=m.positions).logits  # (M, V)
        for scores, out in ((logits, by_gen), (unigram_logp.expand(len(m.positions), -1), by_unigram)):
            replaced = ids.clone()
            replaced.view(-1)[m.positions] = sample_replacements(scores, 1.0, g)
            out.append({"replaced": replaced, "is_replaced": replaced != ids, "attention_mask": am,
                        "token_type_ids": tt})
    return clean, by_gen, by_unigram


@torch.no_grad()
def auc_on(model, batches: list[dict]) -> float:
    scores, labels = [], []
    for b in batches:
        logits = model.discriminator(b["replaced"], b["attention_mask"], b["token_type_ids"]).float()  # (B, T)
        where = b["attention_mask"].bool()
        scores.append(logits[where])
        labels.append(b["is_replaced"][where])
    return roc_auc(torch.cat(scores), torch.cat(labels))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, type=Path, help="a pretraining run directory (config.yaml)")
    ap.add_argument("--reference-checkpoint", type=Path, default=None, help="default: the run's last checkpoint")
    ap.add_argument("--batches", type=int, default=None, help="held-out batches (default: the run's eval_batches)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("checkpoints", nargs="+", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ref_ck = args.reference_checkpoint or sorted((args.reference / "checkpoints").glob("step-*"))[-1]
    ref = load_model(ref_ck).eval()
    _, by_gen, by_unigram = corrupted_batches(args.reference, ref, args.batches)
    print(f"reference generator: {ref_ck}")
    print("| checkpoint | AUC, reference generator's fakes | AUC, unigram fakes |")
    print("|---|---|---|")
    for ck in args.checkpoints:
        model = load_model(ck).eval()
        print(f"| {ck} | {auc_on(model, by_gen):.4f} | {auc_on(model, by_unigram):.4f} |")


if __name__ == "__main__":
    main()
