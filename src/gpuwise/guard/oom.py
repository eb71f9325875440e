"""Out-of-memory recovery: the same batch, in smaller micro-batches, with the same effective batch.

Halving the batch on "CUDA out of memory" (the usual advice) changes the training: a different batch
size, a different learning-rate fit, a different number of steps per epoch. Splitting the *same* batch into
micro-batches and accumulating gradients, each micro-batch's mean loss weighted by its share of the
batch, gives the gradient of the batch's mean loss: no sample is skipped or repeated, only the memory held
at once shrinks, and where the step draws no random numbers the update is the one of the unsplit step (to
float rounding). With dropout the micro-batches draw their own masks; ``Guard.step`` restarts each retry
from the random state the step began with, so the run depends on the seed and where the OOMs hit only.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from gpuwise.guard.errors import GuardError

# Items named in the one line that refuses to split a batch whose items disagree on its size.
SHOWN_ITEMS = 6


def batch_size_of(batch: Any) -> int:
    """Samples in a batch: dim 0 of the first tensor found (tensor, dict, list/tuple, nested), else len()."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        for v in batch.values():
            n = _maybe_size(v)
            if n is not None:
                return n
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        for v in batch:
            n = _maybe_size(v)
            if n is not None:
                return n
        return len(batch)
    raise TypeError(f"cannot tell the batch size of a {type(batch).__name__}")


def _maybe_size(v: Any) -> int | None:
    if isinstance(v, torch.Tensor) and not v.dim():
        return None     # a 0-dim tensor is one value for the whole batch, not a size
    try:
        return batch_size_of(v)
    except TypeError:
        return None


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Samples ``start:stop`` of every tensor (and list) in the batch, keeping its structure."""
    if isinstance(batch, torch.Tensor):
        return batch[start:stop] if batch.dim() else batch  # a 0-dim tensor is one value for the whole batch
    if isinstance(batch, Mapping):
        return type(batch)({k: slice_batch(v, start, stop) for k, v in batch.items()}) if type(batch) is not dict \
            else {k: slice_batch(v, start, stop) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(slice_batch(v, start, stop) for v in batch))
    if isinstance(batch, (list, tuple)):
        if _is_structure(batch):     # its tensors and lists sliced, any other item shared
            return type(batch)(slice_batch(v, start, stop) for v in batch)
        return batch[start:stop]  # a list of samples (strings, ids): slice the list itself
    return batch  # scalars and other per-batch values are shared by every micro-batch


def _is_structure(items: Sequence) -> bool:
    """A list or tuple that is the batch's structure, not a list of samples: every item a tensor, mapping, list or
    tuple, or one tensor or mapping among items such as None or a tag (``(x, y, None)``, ``(x, y, "train")``),
    which are then one value for the whole batch."""
    return bool(items) and (all(isinstance(v, (torch.Tensor, Mapping, list, tuple)) for v in items)
                            or any(isinstance(v, (torch.Tensor, Mapping)) for v in items))


def sample_counts(batch: Any, name: str = "batch") -> list[tuple[str, int]]:
    """(item, samples) for every part of ``batch`` that ``slice_batch`` slices, in order: a tensor's dim 0, a
    list of samples' length; ``batch[0]``, ``batch['labels']``, ``batch.x`` name them."""
    if isinstance(batch, torch.Tensor):
        return [(name, int(batch.shape[0]))] if batch.dim() else []
    if isinstance(batch, Mapping):
        return [c for k, v in batch.items() for c in sample_counts(v, f"{name}[{k!r}]")]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return [c for field, v in zip(batch._fields, batch) for c in sample_counts(v, f"{name}.{field}")]
    if isinstance(batch, (list, tuple)):
        if _is_structure(batch):
            return [c for i, v in enumerate(batch) for c in sample_counts(v, f"{name}[{i}]")]
        return [(name, len(batch))]
    return []


def check_splittable(batch: Any, micro_batch_size: int) -> None:
    """GuardError, one line naming the items and their sizes, when the items of ``batch`` hold different numbers of
    samples: split, their micro-batches would pair the wrong samples (or fail deep inside torch)."""
    counts = sample_counts(batch)
    if len({n for _, n in counts}) > 1:
        shown = ", ".join(f"{item}: {n}" for item, n in counts[:SHOWN_ITEMS])
        more = f", … {len(counts) - SHOWN_ITEMS} more" if len(counts) > SHOWN_ITEMS else ""
        raise GuardError(f"cannot split the batch into micro-batches of {micro_batch_size}: its items hold different "
                         f"numbers of samples ({shown}{more}); every tensor and list in a batch needs one entry per "
                         "sample along dim 0")


def split_batch(batch: Any, micro_batch_size: int) -> list[tuple[Any, int]]:
    """[(micro_batch, n_samples)] covering the batch once, in order (GuardError when its items disagree on the
    number of samples, ``check_splittable``)."""
    total = batch_size_of(batch)
    if micro_batch_size >= total:
        return [(batch, total)]
    check_splittable(batch, micro_batch_size)
    return [(slice_batch(batch, s, min(s + micro_batch_size, total)), min(s + micro_batch_size, total) - s)
            for s in range(0, total, micro_batch_size)]


def is_oom(exc: BaseException) -> bool:
    """CUDA's allocator OOM, or the OOMs cuBLAS/cuDNN report as plain RuntimeErrors."""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "ALLOC_FAILED" in text)


def smaller_micro_batch(micro_batch_size: int) -> int:
    """The next size to try: half, rounded up (5 -> 3: micro-batches 3+2 rather than 2+2+1); 0: give up."""
    return (micro_batch_size + 1) // 2 if micro_batch_size > 1 else 0


def uneven_split_refusal(fewest: int, most: int, micro_batch_size: int) -> str | None:
    """Why ranks whose batches hold ``fewest`` to ``most`` samples cannot step with micro-batches of
    ``micro_batch_size``: they would run different numbers of micro-batches, and DDP's forwards (buffers
    broadcast) and the per-micro-batch agreement are collectives every rank must enter alike. None where every
    rank runs as many (the same batch size, or batches that all fit one micro-batch)."""
    runs = (math.ceil(fewest / micro_batch_size), math.ceil(most / micro_batch_size))
    if runs[0] == runs[1]:
        return None
    return (f"the ranks' batches hold {fewest} to {most} samples while micro-batches of {micro_batch_size} are in "
            f"force: they would run {runs[0]} and {runs[1]} micro-batches, which the ranks' collectives cannot; give "
            "every rank the same batch size (guard.loader pads an epoch's end to it)")


def free_failed_step(*optimizers: torch.optim.Optimizer | None, model: torch.nn.Module | None = None) -> None:
    """Release what a failed step held: its gradients, its activations (kept alive by reference cycles
    through the exception's frames until collected), and the blocks PyTorch's caching allocator kept."""
    for opt in optimizers:
        if opt is not None:
            opt.zero_grad(set_to_none=True)
    if model is not None:
        model.zero_grad(set_to_none=True)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def inject_oom_above(loss_fn: Callable[[Any], torch.Tensor], max_micro_batch: int, *,
                     after_loss: bool = False) -> Callable[[Any], torch.Tensor]:
    """A test hook: ``loss_fn`` that raises ``torch.cuda.OutOfMemoryError`` for micro-batches larger than
    ``max_micro_batch`` samples, as a GPU with too little memory would (works on a CPU-only machine).

    By default it raises before ``loss_fn`` runs. ``after_loss=True`` runs ``loss_fn`` first and then raises,
    as a real OOM in the backward (or late in the forward) does: the failed attempt has drawn random numbers
    (dropout) and run ``loss_fn``'s side effects by then."""

    def wrapped(micro_batch: Any) -> torch.Tensor:
        n = batch_size_of(micro_batch)
        loss = loss_fn(micro_batch) if after_loss or n <= max_micro_batch else None
        if n > max_micro_batch:
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory (injected: micro-batch of {n} > {max_micro_batch} samples)")
        return loss

    return wrapped


def agree_on_micro_batch(proposals: list[int], group: Any = None) -> list[int]:
    """Element-wise minimum of small integers over all ranks (identity without a process group).

    One ``all_reduce(MIN)`` per step, entered by every rank at the same point (after its micro-batches,
    before any gradient is exchanged), whether or not it ran out of memory: so no collective can hang."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return list(proposals)
    device = torch.device("cpu")
    if dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    t = torch.tensor(proposals, dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    return [int(x) for x in t.tolist()]
