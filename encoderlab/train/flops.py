"""Analytic FLOPs of a pretraining step, for equal-compute comparisons.

Convention (as the ELECTRA repository's flops_computation.py for the backward pass): a multiply-add
is 2 FLOPs, and the backward pass of anything that is trained costs twice its forward. We count the
matrix products (embedding projection, QKV, attention scores and values, output, FFN, pooler, the
sparse MLM head at its M positions, the RTD and sentence heads): they are >98% of the work of these
models, and they are exactly what ``torch.utils.flop_counter.FlopCounterMode`` counts, which the
tests compare against on tiny configs. Elementwise work (softmax, LayerNorm, GELU) is not counted.

Letters: B batch, T padded length, H hidden, E embedding size, I intermediate size, V vocabulary,
M masked positions, N real tokens (All-Tokens-MLM predicts all of them).

The causal kinds (clm, gptbert, clm_then_mlm) run the MLM network once per step with a (B, T, T)
mask, which costs what a padding mask does; their head runs at every predicted position (the next
tokens of the causal rows, the masked ones of the others), which the objective reports as M. A
clm_then_mlm step costs a clm step's FLOPs before the switch and an MLM step's after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from encoderlab.models.config import ModelConfig
from encoderlab.nn.config import EncoderConfig
from encoderlab.objectives.proposal import WIDTH as PROPOSAL_WIDTH


def encoder_flops(cfg: EncoderConfig, B: int, T: int, *, pooler: bool | None = None) -> int:
    """Forward FLOPs of the encoder over a (B, T) batch; pooler defaults to the config's."""
    H, E, I = cfg.hidden_size, cfg.emb_size, cfg.intermediate_size
    tokens = B * T
    f = 2 * tokens * E * H if E != H else 0  # factorized embedding projection
    per_layer = (
        2 * tokens * H * 3 * H  # fused QKV
        + 2 * 2 * B * T * T * H  # scores Q K^T and the weighted sum of V, over all heads
        + 2 * tokens * H * H  # attention output
        + (3 if cfg.gated_ffn else 2) * 2 * tokens * H * I  # FFN up (doubled when gated) and down
    )
    f += cfg.num_layers * per_layer  # shared layers still run num_layers times
    if cfg.pooler if pooler is None else pooler:
        f += 2 * B * H * H
    return f


def mlm_head_flops(cfg: EncoderConfig, M: int) -> int:
    """The sparse MLM head at M positions: transform H -> E, then the tied decoder E -> V."""
    return 2 * M * cfg.hidden_size * cfg.emb_size + 2 * M * cfg.emb_size * cfg.vocab_size


def rtd_head_flops(cfg: EncoderConfig, B: int, T: int) -> int:
    H = cfg.hidden_size
    return 2 * B * T * H * H + 2 * B * T * H


@dataclass(frozen=True)
class StepFlops:
    forward: int
    backward: int

    @property
    def total(self) -> int:
        return self.forward + self.backward


def _pooler(cfg: EncoderConfig, B: int) -> int:
    return 2 * B * cfg.hidden_size * cfg.hidden_size if cfg.pooler else 0


def steps_for_budget(model: ModelConfig, objective, B: int, T: int, budget: float) -> int:
    """Optimizer steps of batches of (B, T) that a FLOPs budget buys at the objective's masking rate
    (M positions of the T - 2 that are not [CLS]/[SEP]); the trainer stops on the FLOPs it actually
    counts, this is the plan that schedules are laid out on (warm-up, checkpoints)."""
    return max(1, math.ceil(budget / planned_step_flops(model, objective, B, T)))


def planned_step_flops(model: ModelConfig, objective, B: int, T: int) -> float:
    """A full-length step's FLOPs as budgets are planned: M at the masking rate of the T - 2 tokens
    that are not [CLS]/[SEP]; a causal row predicts T - 1 next tokens (packed rows, all real);
    clm_then_mlm: the mean over the run's steps, causal_fraction of them causal."""
    return sum(share * flops for share, flops in phase_step_flops(model, objective, B, T))


def phase_step_flops(model: ModelConfig, objective, B: int, T: int) -> list[tuple[float, float]]:
    """(share of the run's steps, a full-length step's FLOPs) of each phase of a run: one phase, but
    clm_then_mlm's causal steps and then its masked ones (a cost estimate times each at its own rate)."""
    masked = objective.masking.rate * (T - 2)  # per row
    if objective.kind == "clm_then_mlm":
        f = objective.causal_share
        return [(f, float(step_flops(model, objective, B, T, B * (T - 1)).total)),
                (1 - f, float(step_flops(model, objective, B, T, round(masked * B)).total))]
    if objective.kind == "clm":
        M = B * (T - 1)
    elif objective.kind == "gptbert":
        causal = round(objective.causal_share * B)
        M = round(causal * (T - 1) + (B - causal) * masked)
    else:
        M = round(masked * B)
    return [(1.0, float(step_flops(model, objective, B, T, M).total))]


def step_flops(model: ModelConfig, objective, B: int, T: int, M: int, N: int | None = None,
               step: int = 0, sentence_labels: bool = True) -> StepFlops:
    """FLOPs of one micro-batch step (forward + backward) of ``objective`` (an ObjectiveConfig) on
    a (B, T) batch with M masked positions; N real tokens (default B*T) for All-Tokens-MLM;
    sentence_labels: whether the batch carries NSP/SOP labels (pair examples)."""
    N = B * T if N is None else N
    if objective.kind != "rtd":  # mlm and the causal kinds: one MaskedLM pass, its head at M positions
        enc = model.encoder
        fwd = encoder_flops(enc, B, T) + mlm_head_flops(enc, M)
        sentence = model.head == "pretraining"
        if sentence:
            fwd += 2 * B * enc.hidden_size * 2
        # The pooler runs whenever the encoder has one, but only a sentence loss trains it.
        trained = fwd - (0 if sentence and objective.sentence_loss and sentence_labels else _pooler(enc, B) + (
            2 * B * enc.hidden_size * 2 if sentence else 0))
        if objective.masking.scheme == "proposal":  # the mask proposal: scoring, then its regression
            p = 2 * B * T * (3 * PROPOSAL_WIDTH**2 + PROPOSAL_WIDTH)  # conv over 3 neighbours + read-out
            return StepFlops(forward=fwd + 2 * p, backward=2 * trained + 2 * p)
        return StepFlops(forward=fwd, backward=2 * trained)
    g, d = model.generator, model.encoder
    gen = encoder_flops(g, B, T) + mlm_head_flops(g, M)
    gen_trained = gen - _pooler(g, B)
    stage = objective.rtd_stage(step)
    if stage == "generator":
        return StepFlops(forward=gen, backward=2 * gen_trained)
    if objective.variant == "electra":
        main = encoder_flops(d, B, T) + rtd_head_flops(d, B, T)
    else:
        main = encoder_flops(d, B, T) + mlm_head_flops(d, M if objective.variant == "replace_mlm" else N)
        if objective.copy_mechanism:  # All-Tokens-MLM's copy gate: H -> 1 at every predicted token
            main += 2 * N * d.hidden_size
    main_trained = main - _pooler(d, B)
    if stage == "discriminator":
        return StepFlops(forward=gen + main, backward=2 * main_trained)
    return StepFlops(forward=gen + main, backward=2 * (gen_trained + main_trained))
