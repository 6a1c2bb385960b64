"""Data parallelism with torch.distributed, launched by torchrun (gloo on CPU, NCCL on CUDA).

Every rank holds a full replica and its own share of each global batch; after the micro-batches
of a step, gradients are averaged with one all-reduce over a flat buffer, so every rank applies
the same update. The result equals a one-process run with grad_accum = world_size x grad_accum
and the same per-rank micro-batch (tested). We reduce explicitly instead of wrapping the module in
DistributedDataParallel because objectives call sub-networks (generator, discriminator) directly
and switch them on and off (two-stage training), which DDP's forward hooks do not follow; the cost
is that communication does not overlap the backward pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init(device_type: str) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    return Dist(rank=dist.get_rank(), world_size=dist.get_world_size(),
                local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def average_gradients(params: list[torch.nn.Parameter], world_size: int) -> None:
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat.div_(world_size)
    for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
        g.copy_(synced)


def all_reduce_(t: torch.Tensor, op=None) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return t


def all_gather_object(obj) -> list:
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def shutdown(*, clean: bool = True) -> None:
    """Tear the process group down. After a clean finish every rank first waits at a barrier: the
    main rank is still writing the last checkpoint when the others are done, and a rank that tears
    gloo down (and exits) while a peer is still live in the group was seen to abort, rarely, with
    "terminate called without an active exception". After a failure there is no barrier: the
    failed rank's peers may never arrive, and torchrun stops them anyway."""
    if dist.is_available() and dist.is_initialized():
        try:
            if clean:
                dist.barrier()
        finally:
            dist.destroy_process_group()
