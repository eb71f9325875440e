"""One optimizer step as micro-batches: accumulate the batch's gradient, then update.

Each micro-batch's mean loss is weighted by its share of the batch (n_micro / n_batch) before backward, so
the accumulated gradient is the gradient of the batch's mean loss whatever the split, uneven last piece
included. (The user's ``loss_fn`` must return the mean over the samples it was given.)
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from gpuwise.guard import distributed as gdist
from gpuwise.guard.errors import GuardError
from gpuwise.guard.gradnoise import MicroGradTracker
from gpuwise.guard.oom import agree_on_micro_batch, batch_size_of, is_oom, split_batch

LossFn = Callable[[Any], torch.Tensor]


def scaler_enabled(scaler: Any) -> bool:
    return scaler is not None and scaler.is_enabled()


def accumulate_gradients(model: torch.nn.Module, batch: Any, micro_batch_size: int, loss_fn: LossFn, *,
                         scaler: Any = None, tracker: MicroGradTracker | None = None,
                         sharded: bool = False) -> tuple[float, bool, bool]:
    """Forward+backward over the micro-batches of ``batch``. Returns (mean loss, ok, ran_out_here): ok is
    False when a micro-batch ran out of memory, on this rank or (under DDP, after a micro-batch that was not
    the last) on another (the gradients are then partial: the caller discards them); ``ran_out_here`` says
    whether this rank's own micro-batch did.

    Under DDP every micro-batch runs under ``no_sync`` (gradients are averaged later, once all ranks agreed
    the step succeeded), and after each micro-batch the ranks agree whether to go on: every rank runs the
    same forwards (which may broadcast buffers), so one rank's OOM never leaves another inside a collective.
    Under FSDP the forward itself holds collectives that one rank cannot abandon: an OOM is raised."""
    total = batch_size_of(batch)
    distributed = gdist.dist_info().is_distributed
    loss_sum = torch.zeros(())
    ok = True
    ran_out_here = False
    sync = model.no_sync if gdist.is_ddp(model) else nullcontext
    use_scaler = scaler_enabled(scaler)
    scale = float(scaler.get_scale()) if use_scaler else 1.0
    pieces = split_batch(batch, micro_batch_size)
    with sync():
        for i, (mb, n) in enumerate(pieces):
            last = i == len(pieces) - 1
            try:
                loss = loss_fn(mb)
                weight = n / total
                scaled = loss * weight
                (scaler.scale(scaled) if use_scaler else scaled).backward()
                loss_sum = loss_sum + loss.detach().float().cpu() * weight
                del loss, scaled  # the graph is gone after backward; drop the last references too
                if tracker is not None:
                    tracker.after_backward(weight, n, scale, last)
            except Exception as exc:
                if not is_oom(exc):
                    raise
                if sharded and distributed:
                    raise GuardError(f"out of memory under FSDP with micro-batches of {micro_batch_size}: set "
                                     "Guard(micro_batch_size=...) lower (a sharded forward's collectives cannot "
                                     "be abandoned by one rank)") from None
                ok = False
                ran_out_here = True
            if not last and distributed:
                ok = agree_on_micro_batch([int(ok)])[0] == 1
            if not ok:
                break
    return float(loss_sum), ok, ran_out_here


def apply_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, *, scheduler: Any = None,
                 scaler: Any = None, clip_grad_norm: float | None = None) -> tuple[float | None, float | None]:
    """Average gradients across DDP ranks, unscale, clip, step optimizer / scaler / scheduler, zero grads.

    Returns (gradient norm of the batch after unscaling, learning rate this step used)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if gdist.is_ddp(model):
        gdist.average_gradients(params)
    if optimizer is None:
        return None, None
    lr_used = float(optimizer.param_groups[0]["lr"])  # before the scheduler moves it
    use_scaler = scaler_enabled(scaler)
    if use_scaler:
        scaler.unscale_(optimizer)
    max_norm = clip_grad_norm if clip_grad_norm is not None else float("inf")
    grads = [p for p in params if p.grad is not None]
    grad_norm = float(torch.nn.utils.clip_grad_norm_(grads, max_norm)) if grads else 0.0
    if use_scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm, lr_used
