"""What the guard needs from torch.distributed: who am I, barriers, small broadcasts, gradient averaging.

Everything degrades to a single process when no process group is initialised, so the same guard code runs
with ``python train.py`` and under ``torchrun``; but a Guard created under torchrun before the process group
is refused (``require_process_group``): its rank would be guessed wrong.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gpuwise.guard.errors import GuardError


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_writer(self) -> bool:
        """Rank 0 writes replicated state (DDP): one copy on disk, no two ranks racing for a file."""
        return self.rank == 0


def dist_info() -> DistInfo:
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size())
    return DistInfo()


def require_process_group() -> None:
    """GuardError, the same line on every rank, when torchrun started this process (``WORLD_SIZE`` > 1 in the
    environment) and no process group exists yet: every rank would take itself for rank 0 (the checkpoint
    directory's lock, the saves), and rank 0 would then wait in ``init_process_group`` for the ranks that failed."""
    world = os.environ.get("WORLD_SIZE", "").strip()
    if world.isdigit() and int(world) > 1 and not (dist.is_available() and dist.is_initialized()):
        raise GuardError(f"create the Guard after torch.distributed.init_process_group (WORLD_SIZE={world} in the "
                         "environment, no process group)")


def barrier() -> None:
    if dist_info().is_distributed:
        dist.barrier()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    if not dist_info().is_distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_object(obj: Any) -> list[Any]:
    info = dist_info()
    if not info.is_distributed:
        return [obj]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def sum_if_even(here: int, fewest: int, most: int) -> int | None:
    """This rank's count ``here`` summed over all ranks where every rank's is the same (``fewest`` == ``most``, the
    smallest and largest of them, from the step's agreement): the world size times it, with no collective; None
    where they differ (a loop of the user's own whose ranks got different batches)."""
    return here * dist_info().world_size if fewest == most else None


def sums_over_ranks(here: Sequence[int], known: Sequence[int | None]) -> list[int]:
    """Each of this rank's counts ``here`` summed over all ranks: ``known[i]`` where it is given (``sum_if_even``,
    or an earlier step's sum), the others from one gather of this rank's counts. Whether a sum is known must be
    the same on every rank (agreed): every rank enters the gather alike, or none does."""
    if all(k is not None for k in known):
        return [int(k) for k in known]
    columns = zip(*all_gather_object(list(here)))
    return [k if k is not None else sum(column) for k, column in zip(known, columns)]


def is_ddp(model: torch.nn.Module) -> bool:
    return isinstance(model, torch.nn.parallel.DistributedDataParallel)


def is_fsdp(model: torch.nn.Module) -> bool:
    """FSDP1 (the wrapper class) or FSDP2 (``fully_shard``, which swaps the module's class)."""
    if "torch.distributed.fsdp" not in sys.modules:
        return False  # nobody imported FSDP, so this model cannot be one (and importing it costs seconds)
    from torch.distributed.fsdp import FullyShardedDataParallel

    if isinstance(model, FullyShardedDataParallel):
        return True
    return any(type(m).__name__.startswith("FSDP") for m in model.modules())


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose state_dict has no ``module.`` prefix, so a checkpoint loads with or without DDP."""
    return model.module if is_ddp(model) else model


def average_gradients(params: list[torch.nn.Parameter], bucket_bytes: int = 25 << 20) -> None:
    """All-reduce and average gradients in flat buckets, as DDP's reducer would have done.

    The guard runs every micro-batch under ``no_sync`` and averages once, after all ranks agreed the step
    succeeded: a gradient all-reduce inside the last backward would hang if another rank ran out of memory.
    A parameter without a gradient on this rank gets zeros, so every rank reduces the same tensors.
    """
    info = dist_info()
    if not info.is_distributed:
        return
    grads = []
    for p in params:
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
    bucket: list[torch.Tensor] = []
    size = 0
    for g in grads + [None]:  # None flushes the last bucket
        if g is not None and (not bucket or (g.dtype == bucket[0].dtype and g.device == bucket[0].device
                                             and size + g.numel() * g.element_size() <= bucket_bytes)):
            bucket.append(g)
            size += g.numel() * g.element_size()
            continue
        if bucket:
            flat = torch._utils._flatten_dense_tensors(bucket)
            dist.all_reduce(flat)
            flat.div_(info.world_size)
            for dst, src in zip(bucket, torch._utils._unflatten_dense_tensors(flat, bucket)):
                dst.copy_(src)
        bucket, size = ([g], g.numel() * g.element_size()) if g is not None else ([], 0)
