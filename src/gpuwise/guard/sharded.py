"""Checkpoints of sharded models (FSDP) through ``torch.distributed.checkpoint`` (DCP).

Each rank writes its own shards of the model and optimizer state in parallel into one shared temporary
directory; rank 0 adds the small replicated state (step, scheduler, RNG of every rank, data position) as a
``torch.save`` file, then hashes everything into the manifest and renames the directory into place, as
for unsharded checkpoints. The directory must be on a file system every rank can see (as DCP requires).
A resume may run on a different number of ranks: DCP reshards on load.

Loading never unpickles untrusted bytes: DCP's ``.metadata`` is a pickle, read here by an unpickler that
refuses every global outside DCP's own metadata classes, ``torch.Size``, dtypes and layouts (a crafted
file that names ``os.system`` is a corrupt checkpoint, not code that runs); every shard file the metadata
names must be listed, and so verified, in the manifest; non-tensor values load with
``torch.load(weights_only=True)`` instead of DCP's default ``weights_only=False``.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any

import torch

from gpuwise.guard.checkpoint import DCP_EXTRA_FILE, Checkpoint, CheckpointStore
from gpuwise.guard.distributed import barrier, broadcast_object, dist_info
from gpuwise.guard.dcp_safe import safe_load_planner, safe_reader
from gpuwise.guard.errors import GuardError

EXTRA_FILE = DCP_EXTRA_FILE
FORMAT = "torch.distributed.checkpoint"


def save_sharded(store: CheckpointStore, step: int, epoch: int, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None, extra: dict[str, Any],
                 meta: dict[str, Any] | None = None) -> Checkpoint | None:
    """Collective: every rank calls it. Returns the checkpoint on rank 0, None elsewhere."""
    import torch.distributed.checkpoint as dcp

    info = dist_info()
    tmp = store.directory / f".tmp-step-{step:09d}-shared"
    error: str | None = None
    if info.is_writer:
        try:
            store.begin(step, shared_name=True)
        except OSError as exc:
            error = str(store.save_failed(step, exc))
    error = broadcast_object(error)
    if error:
        raise GuardError(error)
    model_sd, optim_sd = _get(model, optimizer)
    try:
        with _single_process_quiet():
            dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp))
        local_error = None
    except OSError as exc:
        local_error = str(store.save_failed(step, exc))
    errors = [local_error]
    if info.is_distributed:
        import torch.distributed as dist

        errors = [None] * info.world_size
        dist.all_gather_object(errors, local_error)
    ckpt = None
    error = next((e for e in errors if e), None)
    if info.is_writer:
        try:
            if error is None:
                files = store.write_state(tmp, extra, name=EXTRA_FILE)
                ckpt = store.commit(tmp, step, epoch, files=files, format=FORMAT,
                                    world_size=info.world_size, meta=meta)
        except OSError as exc:
            error = str(store.save_failed(step, exc))
        if error:
            store.abort(tmp)
    error = broadcast_object(error)
    barrier()
    if error:
        raise GuardError(error)
    return ckpt


def load_sharded(store: CheckpointStore, ckpt: Checkpoint, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """Collective: loads this rank's shards into model/optimizer; returns the replicated extra state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    model_sd, optim_sd = _get(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    with _single_process_quiet():
        dcp.load(state, storage_reader=safe_reader(ckpt), planner=safe_load_planner())
    if optimizer is not None:
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    else:
        set_model_state_dict(model, state["model"])
    return store.load_file(ckpt, EXTRA_FILE)


def _get(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> tuple[dict, dict]:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    if optimizer is None:
        return get_model_state_dict(model), {}
    return get_state_dict(model, optimizer)


@contextmanager
def _single_process_quiet():
    """DCP warns that it assumes a single process when no process group exists: that is intended here."""
    with warnings.catch_warnings():
        if not dist_info().is_distributed:
            warnings.filterwarnings("ignore", message=".*assuming the intent is to (save|load) in a single process")
        yield
