"""The reference: a straightforward pretraining step built from transformers modules, as a user
would write it. Used by benchmarks/train_step.py side by side with encoderlab's step.

- ELECTRA: ElectraForMaskedLM generator + ElectraForPreTraining discriminator sharing the
  embeddings module, full generator logits, replacements sampled from the softmax, loss
  gen_mlm + 50 * disc_bce, AdamW.
- BERT / ALBERT: BertForMaskedLM / AlbertForMaskedLM with full logits and labels -100 off the
  masked positions, AdamW.
Masking is the same simple 15% scheme (80/10/10) for both sides.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from encoderlab.interop import hf
from encoderlab.models.presets import preset


def _config(cls, cfg_dict: dict):
    return cls(**{k: v for k, v in cfg_dict.items() if k not in ("architectures", "model_type")})


def mask_batch(ids: torch.Tensor, vocab: int, mask_id: int, g: torch.Generator, rate: float = 0.15):
    masked = torch.rand(ids.shape, generator=g, device=ids.device) < rate  # (B, T)
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    r = torch.rand(ids.shape, generator=g, device=ids.device)
    inputs = ids.clone()
    inputs[masked & (r < 0.8)] = mask_id
    # random tokens drawn at every position and kept at the chosen ones: no host sync on a count
    rand_pos = masked & (r >= 0.8) & (r < 0.9)
    inputs = torch.where(rand_pos, torch.randint(5, vocab, ids.shape, generator=g, device=ids.device), inputs)
    return inputs, labels, masked


def hf_step_fn(name: str, *, dtype: str, batch: int, seq: int, seed: int = 0, generator_multiplier=None,
               device: str = "cpu"):
    """Return (step(ids) -> loss tensor, model parameters count) for preset ``name`` in transformers,
    on ``device`` (ids must be there too)."""
    import transformers

    torch.manual_seed(seed)
    cfg = preset(name, generator_multiplier=generator_multiplier)
    dev_type = torch.device(device).type
    ctx = (lambda: torch.autocast(dev_type, dtype=torch.bfloat16)) if dtype == "bf16" else contextlib.nullcontext
    g = torch.Generator(device=device).manual_seed(seed)
    V = cfg.encoder.vocab_size
    if cfg.family == "electra":
        dcfg = hf.hf_config(cfg.with_head("discriminator", generator=None))
        gcfg = hf.hf_config(cfg.with_head("mlm", encoder=cfg.generator, generator=None))
        disc = transformers.ElectraForPreTraining(_config(transformers.ElectraConfig, dcfg))
        gen = transformers.ElectraForMaskedLM(_config(transformers.ElectraConfig, gcfg))
        disc.electra.embeddings = gen.electra.embeddings  # the paper's shared embeddings
        gen.to(device), disc.to(device)
        params = list({id(p): p for p in [*gen.parameters(), *disc.parameters()]}.values())
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
        gen.train(), disc.train()

        def step(ids):
            inputs, labels, masked = mask_batch(ids, V, 4, g)
            with ctx():
                out = gen(input_ids=inputs, labels=labels)  # full (B, T, V) logits
                with torch.no_grad():
                    probs = F.softmax(out.logits[masked].float(), dim=-1)
                    sampled = torch.multinomial(probs, 1, generator=g).squeeze(1)
                replaced = inputs.clone()
                replaced[masked] = sampled
                is_replaced = (replaced != ids).float()
                d = disc(input_ids=replaced).logits
                loss = out.loss + 50.0 * F.binary_cross_entropy_with_logits(d.float(), is_replaced)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        return step, sum(p.numel() for p in params)
    cls = {"bert": (transformers.BertConfig, transformers.BertForMaskedLM),
           "albert": (transformers.AlbertConfig, transformers.AlbertForMaskedLM)}[cfg.family]
    model = cls[1](_config(cls[0], hf.hf_config(cfg.with_head("mlm")))).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def step(ids):
        inputs, labels, _ = mask_batch(ids, V, 4, g)
        with ctx():
            loss = model(input_ids=inputs, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step, sum(p.numel() for p in model.parameters())
