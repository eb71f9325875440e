"""Capture and restore every random number generator a training step draws from.

Two forms of the same state. An :class:`RngSnapshot` holds what the generators return, in memory: cheap
enough to take at the start of every step attempt (about 85 µs of CPU on this project's 2-core VM, most of
it NumPy's ``get_state``; reading the CUDA generators is a host-side copy of a few bytes each), so that an
OOM retry restarts the step from the generators' state when it began. The checkpoint form
(:func:`capture_rng_state`) stores the same state as tensors and plain Python types so that the checkpoint
loads with ``torch.load(weights_only=True)`` (no arbitrary pickles: a checkpoint from a shared disk cannot
run code).

A rank with no saved state of its own (a restart with more ranks than the checkpoint's) is seeded by
:func:`seed_rng_for_rank` from rank 0's saved state and its rank: deterministic, and not a copy of rank 0's.

Covered: Python's ``random``, NumPy's global generator, torch's CPU generator and every initialised CUDA
device's. Not covered: ``torch.Generator`` objects the caller made (pass them the seed and keep their state
in ``extras``), and generators of other libraries.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class RngSnapshot:
    """The generators' states as they return them (kept in memory, never saved as such)."""

    python: tuple
    numpy: tuple
    torch_cpu: torch.Tensor
    torch_cuda: tuple[torch.Tensor, ...]


def snapshot_rng() -> RngSnapshot:
    """Python's, NumPy's, torch's CPU and (when initialised) every CUDA generator, as they are now."""
    # Only when CUDA is already in use: querying it otherwise would initialise a context (and memory).
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return RngSnapshot(python=random.getstate(), numpy=np.random.get_state(), torch_cpu=torch.get_rng_state(),
                       torch_cuda=tuple(torch.cuda.get_rng_state_all()) if cuda else ())


def restore_rng(snapshot: RngSnapshot) -> None:
    """Put every generator back where ``snapshot`` found it."""
    random.setstate(snapshot.python)
    np.random.set_state(snapshot.numpy)
    torch.set_rng_state(snapshot.torch_cpu)
    if snapshot.torch_cuda and torch.cuda.is_available():
        # A restart may see fewer GPUs (elastic, or another GPU picked): restore those that exist.
        for index, s in enumerate(snapshot.torch_cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, index)


def rng_state_dict(snapshot: RngSnapshot) -> dict[str, Any]:
    """``snapshot`` in the checkpoint form: tensors and plain types only."""
    version, internal, gauss = snapshot.python
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = snapshot.numpy
    return {
        "python": {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "kind": str(np_kind),
            "keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "gauss": float(np_gauss),
        },
        "torch_cpu": snapshot.torch_cpu,
        "torch_cuda": list(snapshot.torch_cuda),
    }


def rng_snapshot_from_dict(state: dict[str, Any]) -> RngSnapshot:
    """The inverse of :func:`rng_state_dict`."""
    py, npy = state["python"], state["numpy"]
    return RngSnapshot(
        python=(py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]),
        numpy=(npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["gauss"]),
        torch_cpu=state["torch_cpu"],
        torch_cuda=tuple(state.get("torch_cuda") or ()),
    )


def capture_rng_state() -> dict[str, Any]:
    """The state of every generator now, in the checkpoint form."""
    return rng_state_dict(snapshot_rng())


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore the generators from the checkpoint form."""
    restore_rng(rng_snapshot_from_dict(state))


def seed_rng_for_rank(state: dict[str, Any], rank: int) -> None:
    """Seed every generator of ``rank``, which has no saved state (the world size grew), from ``state`` (rank 0's,
    in the checkpoint form) and the rank: every resume from the same checkpoint draws the same numbers, and the
    new ranks do not draw rank 0's (identical dropout masks on every rank)."""
    py, npy = state["python"], state["numpy"]
    digest = hashlib.sha256()
    for part in (py["state"], npy["keys"], state["torch_cpu"]):
        digest.update(part.numpy().tobytes())
    digest.update(f"{npy['pos']}/{rank}".encode())
    seed_all(int.from_bytes(digest.digest()[:8], "little"))


def seed_all(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (CPU and every CUDA device) from one whole number >= 0."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
