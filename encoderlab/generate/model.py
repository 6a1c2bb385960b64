"""UniLM's sequence-to-sequence use of one bidirectional encoder, and the MLM it starts from.

One sequence holds both sides, ``[CLS] source [SEP] target [SEP]``, segment 0 for the source part
and 1 for the target part, and one self-attention mask makes it a seq2seq model (Dong et al. 2019):

- a source token sees every source token (bidirectional, as in pretraining);
- a target token sees the whole source and the target tokens at or before itself;
- no query sees a padding key.

Padding may sit anywhere (decoding pads each source to the batch's longest, then appends the
target columns), so position ids count real tokens only: the same example gets the same positions
alone or in any batch. A padded query still sees the real source keys, so no row of the mask is
all False and attention never produces NaN there; its output is never read.

The encoder core's forward builds a key-padding mask itself; :func:`hidden_states` runs the same
submodules (embeddings, the layers in the encoder's sharing order, the final LayerNorm) with the
per-query mask instead. A test checks that it equals ``Encoder.forward`` when every query may see
every real key, so a change to the core that this function misses fails there.

Shape letters: B batch, T length, H hidden, V vocabulary, M masked positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from encoderlab.errors import EncoderlabError
from encoderlab.models.networks import Discriminator, MaskedLM
from encoderlab.models.pairs import ElectraPair, Pair, materialize_gdes

SOURCE, TARGET = 0, 1  # segment ids
IGNORE = -100  # label of positions that are not predicted


# ---- the mask and the forward pass ---------------------------------------------------------------
def seq2seq_mask(segment_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool, True where query q may attend to key k (see the module doc).

    segment_ids (B, T): SOURCE or TARGET; attention_mask (B, T): 1 at real tokens, 0 at padding.
    """
    T = segment_ids.shape[1]
    real = attention_mask.bool()  # (B, T)
    source_key = (real & (segment_ids == SOURCE))[:, None, :]  # (B, 1, T): seen by every query
    target_query = (segment_ids == TARGET)[:, :, None]  # (B, T, 1)
    at_or_before = torch.ones(T, T, dtype=torch.bool, device=real.device).tril()  # (T, T): k <= q
    # A target query also sees real target keys at or before it; a source query sees no target key.
    visible = source_key | (target_query & at_or_before & real[:, None, :])  # (B, T, T)
    return visible[:, None]  # (B, 1, T, T): broadcast over heads


def position_ids_of(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) positions counting real tokens only (padding gets its left neighbour's, never read)."""
    return (attention_mask.long().cumsum(1) - 1).clamp(min=0)


def hidden_states(encoder: nn.Module, input_ids: torch.Tensor, segment_ids: torch.Tensor,
                  attention_mask: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden states (B, T, H) under the seq2seq mask."""
    visible = seq2seq_mask(segment_ids, attention_mask)[:, 0]  # (B, T, T)
    types = encoder.embeddings.token_type_embeddings
    # Segments go through the token-type table as in UniLM, where the model has two types or more.
    type_ids = segment_ids if types is not None and types.num_embeddings > TARGET else None
    return encoder(input_ids, visible, type_ids, position_ids_of(attention_mask)).hidden


# ---- the MLM a checkpoint gives ------------------------------------------------------------------
class GenerationSetupError(EncoderlabError):
    """The checkpoint cannot give the network asked for; the message lists what it can give."""


@dataclass
class Seq2SeqStart:
    """The MLM that fine-tuning starts from, and where it came from."""

    model: MaskedLM
    network: str  # mlm | generator | discriminator | encoder (a body of another kind) | random
    fresh_head: bool  # the MLM head was initialised here, not loaded
    note: str


def seq2seq_start(pretrained: nn.Module, network: str = "auto") -> Seq2SeqStart:
    """A fresh MaskedLM holding a copy of the chosen network's weights (``pretrained`` is unchanged).

    - a BERT/ALBERT MLM (head mlm or pretraining): its encoder and MLM head; the NSP/SOP head dropped;
    - an ELECTRA pair, network=generator: the generator, MLM head included;
    - an ELECTRA pair, network=discriminator, or any checkpoint without an MLM head (a bare
      discriminator, an encoder): the body, with a freshly initialised MLM head whose decoder is
      tied to the body's word embeddings (as every MLM head here);
    - network=random: the shape the same choice would give, all weights fresh.
    """
    if isinstance(pretrained, Pair):
        if not isinstance(pretrained, ElectraPair):
            raise GenerationSetupError(f"{type(pretrained).__name__} is not a checkpoint kind generation reads")
        halves = {"generator": pretrained.generator, "discriminator": pretrained.discriminator}
        if network in ("auto", "mlm"):
            raise GenerationSetupError(
                "an ELECTRA checkpoint holds two networks: choose network=generator (its MLM, head included) "
                "or network=discriminator (its body, given a fresh MLM head); network=random for neither")
        source = halves["discriminator" if network == "random" else network]
    elif network in ("generator", "discriminator"):
        raise GenerationSetupError(f"network={network} needs an ELECTRA generator/discriminator checkpoint; "
                                   f"this one is a {type(pretrained).__name__} (use network=auto)")
    else:
        source = pretrained
    if not hasattr(source, "encoder"):
        raise GenerationSetupError(f"a {type(source).__name__} has no encoder body to generate with")
    has_head = isinstance(source, MaskedLM)
    if network == "mlm" and not has_head:
        raise GenerationSetupError(f"network=mlm: a {type(source).__name__} has no MLM head (use network=auto "
                                   "for a fresh one)")
    # The encoder's own config: a pair's generator is described by the pair's config otherwise.
    cfg = source.config.with_head("mlm", generator=None, encoder=source.encoder.config)
    model = MaskedLM(cfg)  # fresh weights, head tied
    kind = type(source).__name__
    if network == "random":
        return Seq2SeqStart(model, "random", True, f"random initialisation in the shape of a {kind}")
    if has_head:
        state = {k: v for k, v in source.state_dict().items() if not k.startswith("sentence_head.")}
        model.load_state_dict(state)
        return Seq2SeqStart(model, "generator" if network == "generator" else "mlm", False, f"{kind} with its MLM head")
    # gdes sharing: each table is E_G + delta; the copy gets that sum as a plain table.
    state = materialize_gdes(source.encoder.state_dict(), source.encoder.embeddings, "embeddings.")
    model.encoder.load_state_dict(state)
    resolved = "discriminator" if isinstance(source, Discriminator) else "encoder"
    return Seq2SeqStart(model, resolved, True, f"{kind} body with a fresh MLM head")


# ---- training batches: UniLM's masking of the target ---------------------------------------------
@dataclass
class Seq2SeqBatch:
    input_ids: torch.Tensor  # (B, T) [CLS] source [SEP] target [SEP], some target tokens [MASK]ed
    segment_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T)
    labels: torch.Tensor  # (B, T) the original token where masked, IGNORE elsewhere

    def to(self, device) -> Seq2SeqBatch:
        return Seq2SeqBatch(*(t.to(device, non_blocking=True) for t in
                              (self.input_ids, self.segment_ids, self.attention_mask, self.labels)))


def _unlabelled(pairs: list[tuple[list[int], list[int]]], cls_id: int, sep_id: int,
                pad_id: int) -> tuple[Seq2SeqBatch, list[tuple[int, int]]]:
    """``[CLS] source [SEP] target`` rows padded at the end, no label yet; each target's (start, end)."""
    T = max(len(s) + len(t) + 2 for s, t in pairs)
    ids = torch.full((len(pairs), T), pad_id, dtype=torch.long)  # (B, T)
    segments, real = torch.zeros_like(ids), torch.zeros_like(ids)
    spans = []
    for i, (src, tgt) in enumerate(pairs):
        start, end = len(src) + 2, len(src) + 2 + len(tgt)
        ids[i, :end] = torch.tensor([cls_id, *src, sep_id, *tgt])
        segments[i, start:end] = TARGET
        real[i, :end] = 1
        spans.append((start, end))
    return Seq2SeqBatch(ids, segments, real, torch.full_like(ids, IGNORE)), spans


def training_batch(pairs: list[tuple[list[int], list[int]]], *, cls_id: int, sep_id: int, mask_id: int,
                   pad_id: int, mask_prob: float, rng: np.random.Generator) -> Seq2SeqBatch:
    """Pairs of (source ids, target ids ending in [SEP]) -> a batch with round(mask_prob * n) (at
    least one) of each target's n tokens replaced by [MASK] and labelled.

    Always [MASK], never UniLM-pretraining's 10% random / 10% kept tokens: decoding predicts only at
    an appended [MASK], and the kept and random tokens served pretraining's later fine-tuning.
    The final [SEP] is maskable like any target token, which teaches the model when to stop."""
    b, spans = _unlabelled(pairs, cls_id, sep_id, pad_id)
    for i, (start, end) in enumerate(spans):
        chosen = start + rng.choice(end - start, size=max(1, round(mask_prob * (end - start))), replace=False)
        b.labels[i, chosen] = b.input_ids[i, chosen]
        b.input_ids[i, chosen] = mask_id
    return b


def next_token_batch(pairs: list[tuple[list[int], list[int]]], *, cls_id: int, sep_id: int, pad_id: int,
                     **_) -> Seq2SeqBatch:
    """decoding=next's batch: nothing masked; the label at a position is the target token after it,
    from the source's [SEP] (which predicts the first target token) to the target's last-but-one
    token (which predicts the final [SEP]). Under the seq2seq mask a target query sees the source and
    the target up to itself, so no label is visible to the position that predicts it."""
    b, spans = _unlabelled(pairs, cls_id, sep_id, pad_id)
    for i, (start, end) in enumerate(spans):
        b.labels[i, start - 1:end - 1] = b.input_ids[i, start:end]
    return b
