"""Cross-entropy over the vocabulary at the predicted positions, a block of rows at a time.

The MLM and causal losses read an (M, V) logit matrix: for a causal batch of 32 x 128 tokens and an
8,192-piece vocabulary that is 33M entries. Done as log_softmax(logits.float()) and nll_loss, the
step casts it to fp32 (a copy), writes the fp32 log-probabilities, reads them again for the argmax
of the accuracy metric, and in backward fills an (M, V) zero gradient, scatters into it, runs the
log-softmax backward and casts the result back to the logits' dtype: six or seven passes over
tensors of 66-133 MB, each bound by memory, not compute. On a 2-core Zen 4 the log-softmax forward
and backward, copies, fills and argmax were 46% of a causal step of the claims study's 4 x 128 model
(torch.profiler; the copies include the autocast weight casts; docs/benchmarks.md, "The vocabulary
cross-entropy").

Here forward and backward walk the rows in blocks small enough to stay in cache: each block is cast
to fp32 once, its log-sum-exp, target logit and maximum are taken there, and backward recomputes the
block's softmax from the saved log-sum-exp and writes the gradient in the logits' dtype. The numbers
are those of the fp32 log-softmax path (the same fp32 reductions of the same values, rounded to the
logits' dtype once at the end), with no (M, V) fp32 tensor.

Shape letters: M predicted positions, V vocabulary.
"""

from __future__ import annotations

import torch

# Rows per block: about 1 MiB of fp32 logits on a CPU (a core's L2 on the CPUs we meet), a whole
# (M, V) matrix on a GPU, where one kernel per operation beats a Python loop of small ones.
CPU_BLOCK_BYTES = 1 << 20


def block_rows(logits: torch.Tensor) -> int:
    """Rows of an (M, V) matrix to take at a time (the generator's sampler uses it too)."""
    if logits.device.type != "cpu":
        return max(1, logits.shape[0])
    return max(1, CPU_BLOCK_BYTES // (4 * max(1, logits.shape[1])))


class _TokenCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor):
        M = logits.shape[0]
        nll = torch.empty(M, dtype=torch.float32, device=logits.device)  # (M,)
        lse = torch.empty(M, dtype=torch.float32, device=logits.device)  # (M,)
        hit = torch.empty(M, dtype=torch.bool, device=logits.device)  # (M,)
        step = block_rows(logits)
        for i in range(0, M, step):
            x = logits[i : i + step].float()  # (b, V)
            t = targets[i : i + step, None]  # (b, 1)
            top = x.amax(-1, keepdim=True)  # (b, 1)
            lse_b = (x - top).exp_().sum(-1, keepdim=True).log_().add_(top)  # (b, 1)
            own = x.gather(1, t)  # (b, 1)
            lse[i : i + step] = lse_b.squeeze(1)
            nll[i : i + step] = (lse_b - own).squeeze(1)
            # a hit as argmax counts it: the target is a maximum and no earlier entry ties with it
            at_top = (own == top).squeeze(1)  # (b,)
            if at_top.any():
                rows = at_top.nonzero().squeeze(1)
                at_top[rows] = x[rows].argmax(-1) == t[rows, 0]
            hit[i : i + step] = at_top
        ctx.save_for_backward(logits, targets, lse)
        ctx.mark_non_differentiable(hit)
        return nll, hit

    @staticmethod
    def backward(ctx, grad_nll: torch.Tensor, _grad_hit):
        logits, targets, lse = ctx.saved_tensors
        grad = torch.empty_like(logits)  # (M, V) in the logits' dtype
        step = block_rows(logits)
        g_all = grad_nll.float()
        for i in range(0, logits.shape[0], step):
            x = logits[i : i + step].float()  # (b, V)
            p = (x - lse[i : i + step, None]).exp_()  # (b, V) softmax
            p.scatter_add_(1, targets[i : i + step, None], torch.full_like(p[:, :1], -1.0))  # softmax - onehot
            grad[i : i + step] = p.mul_(g_all[i : i + step, None])
        return grad, None


def token_nll(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """((M,) fp32 negative log-likelihood of each target, differentiable; (M,) bool: the target is
    the logits' argmax, first index on ties, as argmax picks). Logits (M, V) in any float dtype."""
    if logits.shape[0] == 0:
        return logits.float().sum(-1), torch.zeros(0, dtype=torch.bool, device=logits.device)
    return _TokenCE.apply(logits, targets)


def log_softmax_nll(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """token_nll as the whole-matrix fp32 log-softmax computes it: the path token_nll replaced, kept
    as the reference its tests and benchmarks/vocab_ce.py compare against."""
    logp = torch.log_softmax(logits.float(), -1)  # (M, V)
    return -logp.gather(1, targets[:, None]).squeeze(1), logp.argmax(-1) == targets
