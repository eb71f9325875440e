"""Checkpoints of sharded models (FSDP) through ``torch.distributed.checkpoint`` (DCP).

Each rank writes its own shards of the model and optimizer state in parallel into one shared temporary
directory; rank 0 adds the small replicated state (step, scheduler, RNG of every rank, data position) as a
``torch.save`` file, then hashes everything into the manifest and renames the directory into place, as
for unsharded checkpoints. The directory must be on a file system every rank can see (as DCP requires).
A resume may run on a different number of ranks: DCP reshards on load. A save keeps the rules of unsharded
ones, decided alike on every rank (no rank left inside a collective the others skipped): a NaN/Inf in any
rank's shards is a failed save, and a full disk on any rank makes room and saves again, once.

Loading never unpickles untrusted bytes: DCP's ``.metadata`` is a pickle, read here by an unpickler that
refuses every global outside DCP's own metadata classes, ``torch.Size``, dtypes and layouts (a crafted
file that names ``os.system`` is a corrupt checkpoint, not code that runs); every shard file the metadata
names must be listed, and so verified, in the manifest; non-tensor values load with
``torch.load(weights_only=True)`` instead of DCP's default ``weights_only=False``.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from gpuwise.guard.checkpoint import DCP_EXTRA_FILE, DISK_FULL_ERRNOS, Checkpoint, CheckpointStore, os_error_in
from gpuwise.guard.distributed import all_gather_object, barrier, broadcast_object, dist_info
from gpuwise.guard.dcp_safe import safe_load_planner, safe_reader
from gpuwise.guard.state_file import diverged_reason, state_nonfinite

log = logging.getLogger(__name__)

EXTRA_FILE = DCP_EXTRA_FILE
FORMAT = "torch.distributed.checkpoint"


def save_sharded(store: CheckpointStore, step: int, epoch: int, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None, extra: dict[str, Any],
                 meta: dict[str, Any] | None = None) -> Checkpoint | None:
    """Collective: every rank calls it. Returns the checkpoint on rank 0, None elsewhere; GuardError, the same line
    on every rank, when it is not written (the previous checkpoint intact).

    The rules of ``CheckpointStore.save``, decided alike on every rank: a state whose shards hold NaN/Inf on any rank
    (``state_nonfinite``) is not written; a full disk (ENOSPC, EDQUOT) on any rank has rank 0 delete the oldest
    checkpoints (``make_room``) and every rank save again, once (``made_room_in_vain`` where that failed too)."""
    shards = _get(model, optimizer)
    local = state_nonfinite(model, {"model": shards[0], "optimizer": shards[1]})
    diverged = [name for names in all_gather_object(local) for name in names]
    if diverged:
        raise store.save_failed(step, diverged_reason(diverged))
    ckpt, failed = _save_once(store, step, epoch, shards, extra, meta)
    if failed is not None and failed.errno in DISK_FULL_ERRNOS:
        freed = _make_room(store, step)
        if freed:
            if dist_info().is_writer:
                store.note_made_room(step, failed, freed)
            ckpt, failed = _save_once(store, step, epoch, shards, extra, meta)
            if failed is not None and dist_info().is_writer:
                store.made_room_in_vain()
    barrier()
    if failed is not None:
        raise store.save_failed(step, failed) from failed
    return ckpt


def _save_once(store: CheckpointStore, step: int, epoch: int, shards: tuple[dict, dict], extra: dict[str, Any],
               meta: dict[str, Any] | None) -> tuple[Checkpoint | None, OSError | None]:
    """One attempt of :func:`save_sharded` (collective): the checkpoint (rank 0), or the OSError that failed it on
    some rank, the same on every rank; what a failed attempt wrote is removed."""
    info = dist_info()
    tmp = store.directory / f".tmp-step-{step:09d}-shared"
    failed: OSError | None = None
    if info.is_writer:
        try:
            store.begin(step, shared_name=True)
        except OSError as exc:
            failed = exc
    failed = broadcast_object(failed)
    if failed is not None:
        return None, failed
    failed = next((exc for exc in all_gather_object(_dcp_save(shards, str(tmp))) if exc is not None), None)
    ckpt = None
    if info.is_writer:
        try:
            if failed is None:
                files = store.write_state(tmp, extra, name=EXTRA_FILE)
                ckpt = store.commit(tmp, step, epoch, files=files, format=FORMAT,
                                    world_size=info.world_size, meta=meta)
        except OSError as exc:
            failed = exc
        if failed is not None:
            store.abort(tmp)
    return ckpt, broadcast_object(failed)


def _dcp_save(shards: tuple[dict, dict], checkpoint_id: str) -> OSError | None:
    """DCP's save of this rank's shards (collective): None, or the OSError that failed it. DCP raises a failure on
    any rank as the same ``CheckpointException`` (a BaseException) on every rank: its first OSError is the one; one
    without an OSError (a bug, not the disk) is raised as it is."""
    import torch.distributed.checkpoint as dcp

    try:
        with _single_process_quiet():
            dcp.save({"model": shards[0], "optim": shards[1]}, checkpoint_id=checkpoint_id)
    except OSError as exc:
        return exc
    except dcp.CheckpointException as exc:
        causes = [os_error_in(failure) for _, (failure, _trace) in sorted(exc.failures.items())]
        failed = next((cause for cause in causes if cause is not None), None)
        if failed is None:
            raise
        return failed
    return None


def _make_room(store: CheckpointStore, step: int) -> list[Path]:
    """``store.make_room(step)`` on rank 0 (which creates, renames and deletes checkpoints), after every rank's writes
    ended; what it deleted, on every rank (none where deleting failed)."""
    freed: list[Path] = []
    if dist_info().is_writer:
        try:
            freed = store.make_room(step)
        except OSError as exc:
            log.warning("could not make room for a checkpoint in %s: %s", store.directory, exc.strerror or exc)
    return broadcast_object(freed)


def load_sharded(store: CheckpointStore, ckpt: Checkpoint, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None) -> tuple[dict[str, Any], list[str]]:
    """Collective: loads this rank's shards into model/optimizer; returns the replicated extra state, and the names
    of the loaded values of this rank's shards that hold NaN/Inf by the rule ``save_sharded`` refuses a save by
    (``state_nonfinite``: buffers too, NaN only). The caller gathers every rank's names."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    model_sd, optim_sd = _get(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    with _single_process_quiet():
        dcp.load(state, storage_reader=safe_reader(ckpt), planner=safe_load_planner())
    nonfinite = state_nonfinite(model, {"model": state["model"], "optimizer": state["optim"]})
    if optimizer is not None:
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    else:
        set_model_state_dict(model, state["model"])
    return store.load_file(ckpt, EXTRA_FILE), nonfinite


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
