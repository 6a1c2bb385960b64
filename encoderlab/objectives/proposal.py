"""A mask proposal for MLM: choose harder tokens more often, weigh them so the loss stays unbiased.

Chen et al. (2020), "Variance-reduced Language Pretraining via a Mask Proposal Network", answer
"MLM with random masking is too easy" by making MLM harder rather than replacing it: positions are
masked with probabilities pi_i from a learned proposal, and each masked token's loss is weighted by
1 / pi_i (Horvitz-Thompson), so that the expected loss is the one of uniform masking while its
variance falls when pi_i follows the per-token loss. Here:

- the proposal is a small separate network (own 32-wide token table, a width-3 convolution over
  the neighbours, a linear read-out): it predicts each position's log MLM loss from the unmasked
  input, and is trained by regression on the losses the MLM actually incurs at the positions it
  masked (detached: the MLM's gradients never reach it, nor its gradients the MLM);
- its scores exp(prediction) become inclusion probabilities in encoderlab.data.masking
  (scheme "proposal"), mixed with the uniform rate so the weights stay bounded;
- its weights and its Adam state live in the objective and travel in the trainer's checkpoint
  (``state_dict``), so a resumed run continues exactly.

Its FLOPs (scoring every position, and the regression step) are counted in train/flops.py; at
width 32 they are well under 1% of a tiny model's step. Under DDP each rank trains its own
proposal on its own losses (they are not averaged): the masking stays unbiased on every rank.

Shape letters: B batch, T length, M masked positions, P the proposal's width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

WIDTH = 32
LR = 1e-3


class ProposalNetwork(nn.Module):
    def __init__(self, vocab_size: int, width: int = WIDTH):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        self.conv = nn.Conv1d(width, width, kernel_size=3, padding=1)  # a token and its two neighbours
        self.out = nn.Linear(width, 1)
        g = torch.Generator().manual_seed(0)  # its own draw: the run's RNG streams are not touched
        for p in (self.embed.weight, self.conv.weight):
            p.data.normal_(0.0, 0.02, generator=g)
        nn.init.zeros_(self.conv.bias)
        nn.init.zeros_(self.out.weight)  # predicts 0 everywhere at first: uniform masking
        nn.init.zeros_(self.out.bias)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(input_ids).transpose(1, 2)  # (B, P, T)
        h = F.gelu(self.conv(h)).transpose(1, 2)  # (B, T, P)
        return self.out(h).squeeze(-1)  # (B, T) predicted log loss


class MaskProposal:
    """The proposal network, its optimizer, and what the MLM objective asks of them."""

    def __init__(self):
        self.net: ProposalNetwork | None = None
        self.opt: torch.optim.Adam | None = None

    def _ensure(self, vocab_size: int, device: torch.device) -> ProposalNetwork:
        if self.net is None:
            self.net = ProposalNetwork(vocab_size).to(device)
            self.opt = torch.optim.Adam(self.net.parameters(), lr=LR)
        return self.net

    @torch.no_grad()
    def scores(self, input_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(B, T) positive scores: the predicted MLM loss of each position."""
        net = self._ensure(vocab_size, input_ids.device)
        with torch.autocast(input_ids.device.type, enabled=False):
            return net(input_ids).float().clamp(-10, 10).exp()

    def update(self, input_ids: torch.Tensor, positions: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
        """One regression step towards log(loss) at the flat masked ``positions`` (M,); returns the
        squared error (detached). Runs in fp32, outside the MLM's graph."""
        if self.net is None:
            raise RuntimeError("MaskProposal.update before scores: nothing was proposed")
        net = self.net
        with torch.enable_grad(), torch.autocast(input_ids.device.type, enabled=False):
            pred = net(input_ids).reshape(-1).index_select(0, positions)  # (M,)
            err = F.mse_loss(pred, losses.detach().float().clamp(min=1e-4).log())
            self.opt.zero_grad(set_to_none=True)
            err.backward()
            self.opt.step()
        return err.detach()

    # ---- checkpoint state: weights, Adam moments and step counts, as flat tensors -----------------
    def state_dict(self) -> dict[str, torch.Tensor]:
        if self.net is None:
            return {}
        out = {f"net.{k}": v for k, v in self.net.state_dict().items()}
        for i, p in enumerate(self.net.parameters()):
            for k, v in self.opt.state.get(p, {}).items():
                out[f"adam.{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
        return out

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
        if not tensors:
            return
        net = self._ensure(tensors["net.embed.weight"].shape[0], device)
        net.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net.")})
        for i, p in enumerate(net.parameters()):
            state = {k.split(".", 2)[2]: v if k.endswith(".step") else v.to(device)  # Adam keeps steps on the CPU
                     for k, v in tensors.items() if k.startswith(f"adam.{i}.")}
            if state:
                self.opt.state[p] = state
