"""Is a tiny model stuck at the unigram level a bug of ours? Train transformers' BertForMaskedLM the
same way and see (a diagnostic for docs/benchmarks.md, not a comparison of speed).

    python benchmarks/plateau_reference.py --store runs/learning/store --steps 800

bert-tiny shape (2 layers, H 128, 2 heads), packed 32 x 64 batches from the token store, BERT 80/10/10
masking from encoderlab.data.masking, AdamW lr 5e-3 (warm-up 100, linear decay), clipping 1.0, bf16
autocast; held-out accuracy with every masked token shown as [MASK] (encoderlab's evaluation setting).
"""

from __future__ import annotations

import argparse

import torch
import transformers

from encoderlab.data.loader import LoaderConfig, PretrainLoader
from encoderlab.data.masking import MaskingConfig, mask_tokens
from encoderlab.data.store import TokenStore

ALL_MASK = MaskingConfig(mask_fraction=1.0, random_fraction=0.0, keep_fraction=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="runs/learning/store")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--lr", type=float, default=5e-3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    store = TokenStore(args.store, "train")
    ids = store.special_ids
    special, V = tuple(sorted(set(ids.values()))), store.vocab_size
    cfg = transformers.BertConfig(vocab_size=V, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=512, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 100, 1) * (1 - s / args.steps))
    train = iter(PretrainLoader(store, LoaderConfig(objective="packed", batch_size=32, seq_len=64)))
    valid = PretrainLoader(TokenStore(args.store, "valid"), LoaderConfig(objective="packed", batch_size=32, seq_len=64))
    held_out = [b for _, b in zip(range(8), valid)]
    g = torch.Generator().manual_seed(0)
    for step in range(1, args.steps + 1):
        b = next(train)
        x, y = mask_tokens(b["input_ids"], None, special, V, ids["mask"], MaskingConfig(), g)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=x, attention_mask=b["attention_mask"], labels=y).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 200 == 0:
            acc = accuracy(model, held_out, special, V, ids["mask"])
            print(f"step {step}: train loss {loss.item():.3f}, held-out [MASK] accuracy {acc:.4f}")


@torch.no_grad()
def accuracy(model, batches, special, V, mask_id) -> float:
    model.eval()
    hit = total = 0
    g = torch.Generator()
    for i, b in enumerate(batches):
        g.manual_seed(12345 + i)
        x, y = mask_tokens(b["input_ids"], None, special, V, mask_id, ALL_MASK, g)
        logits = model(input_ids=x, attention_mask=b["attention_mask"]).logits
        sel = y != -100
        hit += int((logits[sel].argmax(-1) == y[sel]).sum())
        total += int(sel.sum())
    model.train()
    return hit / total


if __name__ == "__main__":
    main()
