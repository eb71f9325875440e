"""What a resume hands to ``torch.load``, and what it refuses to: one verified state file, read safely.

Three holes a hostile or damaged file could use, closed here:

- **Zip bombs.** ``torch.save`` writes a zip archive of *stored* (uncompressed) entries, and gpuwise writes
  nothing else; torch's reader would inflate a deflate-compressed entry without bound (a 1 MiB file can
  become gigabytes in memory). Every entry must be stored, with its declared size equal to the bytes it
  takes in the file, so what is read can never exceed the file's size.
- **Swapped bytes.** With ``trust_pickle=True`` a full unpickler runs, so the bytes it reads must be the
  bytes whose sha256 the manifest lists: the file is read into memory once, hashed, and loaded from that
  buffer (a file renamed over it after the check changes nothing). ``weights_only`` loads run no code;
  they read through one open file (the zip check and the load see the same inode).
- **Non-finite states.** A run that diverged saves NaN weights that verify perfectly and resume silently;
  :func:`nonfinite_names` finds them so the resume can refuse that checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import torch

from gpuwise.guard import distributed as gdist
from gpuwise.guard.errors import GuardError

log = logging.getLogger(__name__)

_METHODS = {zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma"}


def check_stored_zip(f: IO[bytes], label: str) -> None:
    """GuardError unless ``f`` is a zip archive of stored entries whose sizes fit in the file."""
    f.seek(0, io.SEEK_END)
    file_bytes = f.tell()
    f.seek(0)
    try:
        with zipfile.ZipFile(f) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise GuardError(f"{label} is not the zip archive torch.save writes ({exc})") from None
    total_bytes = 0
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED:
            method = _METHODS.get(entry.compress_type, f"method {entry.compress_type}")
            raise GuardError(f"{label}: entry {entry.filename!r} is {method}-compressed; gpuwise writes stored "
                             "entries only, and a compressed one can inflate without bound (refused, not loaded)")
        if entry.file_size != entry.compress_size:
            raise GuardError(f"{label}: entry {entry.filename!r} declares {entry.file_size} bytes but stores "
                             f"{entry.compress_size} (refused, not loaded)")
        total_bytes += entry.file_size
    if total_bytes > file_bytes:
        raise GuardError(f"{label}: its entries declare {total_bytes} bytes, more than the file's {file_bytes} "
                         "(refused, not loaded)")
    f.seek(0)


def load_state_file(path: Path, *, label: str, sha256: str, map_location: Any = "cpu",
                    trust_pickle: bool = False) -> Any:
    """``torch.load`` of the state file at ``path`` after :func:`check_stored_zip`.

    ``weights_only=True`` first; pickled objects only with ``trust_pickle``, and then from the bytes read
    once and matched against ``sha256`` (the manifest's), so the unpickler never runs on other bytes."""
    if trust_pickle:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise GuardError(f"{label}: checksum mismatch at load (the file changed after it was verified): not loaded")
        f: IO[bytes] = io.BytesIO(data)
        return _load(f, label, map_location, trust_pickle)
    with open(path, "rb") as f:
        return _load(f, label, map_location, trust_pickle)


def _load(f: IO[bytes], label: str, map_location: Any, trust_pickle: bool) -> Any:
    check_stored_zip(f, label)
    try:
        return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if not trust_pickle:
            raise GuardError(
                f"{label}: state holds objects that torch.load(weights_only=True) refuses "
                f"({str(exc).splitlines()[0]}); store extras as tensors/plain types, or pass trust_pickle=True "
                "if you trust this directory") from None
    f.seek(0)
    return torch.load(f, map_location=map_location, weights_only=False)


def nonfinite_names(groups: Mapping[str, Any], *, nan_only: Iterable[str] = (), limit: int = 3) -> list[str]:
    """Up to ``limit`` dotted names of floating tensors in ``groups`` holding NaN or ±Inf.

    Names listed in ``nan_only`` (a model's buffers: a causal mask of -inf is legitimate) count only NaN. The checks
    run on each tensor's device and are read back once a device (one wait on a GPU, not one a tensor: the guard runs
    this at every save)."""
    nan_only = set(nan_only)
    names_by_device: dict[torch.device, list[str]] = {}
    flags_by_device: dict[torch.device, list[torch.Tensor]] = {}
    for group, value in groups.items():
        for name, tensor in _tensors(value, group):
            if (not (tensor.is_floating_point() or tensor.is_complex()) or tensor.numel() == 0
                    or tensor.layout != torch.strided or tensor.is_meta):
                continue        # integers, sparse and meta tensors hold no NaN a save could carry
            bad = _holds_nonfinite(tensor, nan_only=name in nan_only)
            names_by_device.setdefault(tensor.device, []).append(name)
            flags_by_device.setdefault(tensor.device, []).append(bad)
    bad_names = set()
    for device, flags in flags_by_device.items():
        read = torch.stack(flags).cpu().tolist()
        bad_names.update(name for name, is_bad in zip(names_by_device[device], read) if is_bad)
    ordered = [name for names in names_by_device.values() for name in names if name in bad_names]
    return ordered[:limit]


def state_nonfinite(model: torch.nn.Module, state: Mapping[str, Any]) -> list[str]:
    """Names of the values in a Guard ``state``'s model and optimizer that hold NaN or ±Inf (a model's buffers:
    NaN only, as a causal mask of -inf is legitimate): the one rule for refusing to save or load a diverged state.
    It checks what the state holds: of a partly frozen model, the trained parameters and buffers (``frozen``: the
    frozen ones are not saved, so a frozen -inf mask kept as a parameter stops no save). A sharded state (DTensors) is checked in this rank's shards: the caller gathers every rank's names."""
    # every name of a buffer shared by several modules (state_dict lists each; named_buffers only the first)
    buffers = [f"model.{name}" for name, _ in gdist.unwrap(model).named_buffers(remove_duplicate=False)]
    try:
        return nonfinite_names({"model": state["model"], "optimizer": state.get("optimizer")}, nan_only=buffers)
    except (RuntimeError, NotImplementedError, TypeError) as exc:    # a tensor type torch cannot check
        log.warning("could not check the state for NaN/Inf values (%s): saved or loaded unchecked", exc)
        return []


def diverged_reason(names: list[str], shown: int = 3) -> str:
    """Why a save of a state whose values ``names`` hold NaN/Inf is not written (``CheckpointStore.save_failed``'s
    cause)."""
    return f"the state holds NaN/Inf values ({', '.join(names[:shown])}), the run diverged"


CHECK_CHUNK_ELEMENTS = 1 << 26     # elements checked at once: the check's own flags stay under 64 MiB a tensor


def _holds_nonfinite(tensor: torch.Tensor, *, nan_only: bool) -> torch.Tensor:
    """A 0-d bool tensor on ``tensor``'s device (no wait for it): True where it holds NaN (or ±Inf unless
    ``nan_only``), checked a chunk at a time so a save near full GPU memory does not allocate a tensor-sized mask;
    float8 (which isfinite does not take) widened a chunk at a time."""
    pieces = tensor.view(-1).split(CHECK_CHUNK_ELEMENTS) if tensor.is_contiguous() else (tensor,)
    flags = []
    for piece in pieces:
        if piece.element_size() == 1:       # float8: widened (NaN and Inf kept) for the checks
            piece = piece.to(torch.float16)
        flags.append(torch.isnan(piece).any() if nan_only else ~torch.isfinite(piece).all())
    return flags[0] if len(flags) == 1 else torch.stack(flags).any()


def _tensors(value: Any, prefix: str) -> Iterable[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        # A DTensor (FSDP2, sharded optimizer state): this rank's shard, with no collective.
        yield prefix, value.to_local() if hasattr(value, "to_local") else value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{prefix}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{prefix}.{i}")
