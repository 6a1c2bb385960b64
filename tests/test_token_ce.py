"""The blockwise vocabulary cross-entropy (objectives/token_ce.py) against the fp32 log-softmax path
it replaces: the same per-position losses, the same gradient under any per-position weights, argmax's
hits (ties included), in fp32 and from bf16 logits, with blocks that split the rows unevenly."""

import pytest
import torch

import encoderlab.objectives.token_ce as token_ce
from encoderlab.objectives.token_ce import log_softmax_nll as reference
from encoderlab.objectives.token_ce import token_nll


@pytest.fixture(params=[None, 3 * 50 * 4], ids=["one-block", "blocks-of-3-rows"])
def blocks(request, monkeypatch):
    if request.param:  # 3 rows of 50 fp32 logits a block: 17 rows end in a partial block
        monkeypatch.setattr(token_ce, "CPU_BLOCK_BYTES", request.param)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_losses_gradients_and_hits_are_the_log_softmax_paths(blocks, dtype):
    torch.manual_seed(0)
    M, V = 17, 50
    base = (torch.randn(M, V) * 3).to(dtype)
    targets = torch.randint(0, V, (M,))
    targets[:4] = base[:4].float().argmax(-1)  # some hits to count
    weights = torch.rand(M)  # any per-position weighting: a mean, a split mean, 1 / inclusion probability
    got_x, want_x = base.clone().requires_grad_(), base.clone().requires_grad_()
    nll, hit = token_nll(got_x, targets)
    ref_nll, ref_hit = reference(want_x, targets)
    (nll * weights).sum().backward()
    (ref_nll * weights).sum().backward()
    assert nll.dtype == torch.float32 and got_x.grad.dtype == dtype
    torch.testing.assert_close(nll, ref_nll, rtol=1e-6, atol=1e-6)
    assert torch.equal(hit, ref_hit) and hit[:4].all()
    # fp32: the same reductions up to their order; bf16: the fp32 gradient rounded once, as the
    # cast's backward rounds it, so at most one bf16 step apart
    tol = {"rtol": 1e-5, "atol": 1e-7} if dtype == torch.float32 else {"rtol": 2**-7, "atol": 1e-6}
    torch.testing.assert_close(got_x.grad.float(), want_x.grad.float(), **tol)


def test_a_tie_is_a_hit_only_where_argmax_would_pick_the_target(blocks):
    logits = torch.zeros(3, 6)
    logits[0, [1, 4]] = 2.0  # tie: argmax picks 1
    logits[1, [1, 4]] = 2.0
    logits[2, 5] = 1.0
    nll, hit = token_nll(logits, torch.tensor([1, 4, 5]))
    assert hit.tolist() == [True, False, True]
    assert torch.equal(hit, logits.argmax(-1) == torch.tensor([1, 4, 5]))


def test_no_positions_give_an_empty_loss_that_backpropagates():
    x = torch.randn(0, 8, requires_grad=True)
    nll, hit = token_nll(x, torch.zeros(0, dtype=torch.long))
    loss = nll.sum() / max(nll.numel(), 1)
    loss.backward()
    assert loss.item() == 0.0 and hit.numel() == 0 and x.grad.shape == (0, 8)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_the_generators_sampler_draws_the_same_tokens_in_blocks_as_whole(monkeypatch, temperature):
    """One uniform per row, drawn up front: the samples do not depend on how the rows are blocked."""
    from encoderlab.objectives.rtd import sample_replacements

    logits = torch.randn(17, 50).bfloat16()

    def draw(block_bytes):
        monkeypatch.setattr(token_ce, "CPU_BLOCK_BYTES", block_bytes)
        return sample_replacements(logits, temperature, torch.Generator().manual_seed(3))

    whole, blocked = draw(1 << 20), draw(3 * 50 * 4)
    assert torch.equal(whole, blocked) and whole.unique().numel() > 5
