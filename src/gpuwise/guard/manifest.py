"""The manifest of a checkpoint and its schema, checked before anything in it is trusted.

A manifest is JSON written last into a checkpoint directory: step, epoch, time, and for every file its
size and sha256. A resume reads manifests it did not write (a shared disk, a copied directory, an older
run), so every field is checked for type and range before use, and every file name must stay inside the
checkpoint: a plain file name (``state.pt``), never ``../x``, ``/etc/x`` or an empty part. Anything else
is a :class:`GuardError` (the checkpoint is corrupt: the resume falls back to an older one), never a
``TypeError`` from deep inside.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import gpuwise
from gpuwise.guard.errors import GuardError

FORMAT_VERSION = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PLAIN_NAME = re.compile(r"^[^/\\\x00-\x1f]+$")


@dataclass(frozen=True)
class Manifest:
    step: int
    epoch: int
    time_s: float
    files: dict[str, dict[str, Any]]          # name -> {"bytes": int, "sha256": hex}
    format: str = "torch.save"                # or "torch.distributed.checkpoint", "directory"
    world_size: int = 1
    gpuwise_version: str = gpuwise.__version__
    torch_version: str = torch.__version__
    format_version: int = FORMAT_VERSION
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.files.values())

    def to_json(self) -> str:
        d = asdict(self)
        d["total_bytes"] = self.total_bytes
        d["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.time_s))
        return json.dumps(d, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, *, nested_names: bool = False) -> "Manifest":
        """The manifest in ``text`` after checking its schema; GuardError names the first problem.

        ``nested_names``: names may be relative paths of plain names (``sub/file``), for directories
        another library wrote (``seal_directory``); a checkpoint gpuwise wrote holds plain names only.
        """
        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise GuardError(f"manifest is not JSON ({str(exc)[:80]})") from None
        if not isinstance(d, dict):
            raise GuardError(f"manifest is a JSON {type(d).__name__}, not an object")
        values = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        for key in ("step", "epoch", "time_s", "files"):
            if key not in values:
                raise GuardError(f"manifest has no {key!r}")
        _check_int(values, "step", 0)
        _check_int(values, "epoch", 0)
        _check_int(values, "world_size", 1)
        _check_int(values, "format_version", 0)
        t = values["time_s"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise GuardError(f"manifest time_s is {t!r}, not a finite number")
        for key in ("format", "gpuwise_version", "torch_version"):
            if key in values and not isinstance(values[key], str):
                raise GuardError(f"manifest {key} is {values[key]!r}, not text")
        if not isinstance(values.get("meta", {}), dict):
            raise GuardError("manifest meta is not an object")
        values["files"] = check_files(values["files"], nested_names=nested_names)
        return cls(**values)


def _check_int(values: dict[str, Any], key: str, minimum: int) -> None:
    if key in values:
        v = values[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise GuardError(f"manifest {key} is {v!r}, not a whole number >= {minimum}")


def check_files(files: object, *, nested_names: bool = False) -> dict[str, dict[str, Any]]:
    """The ``files`` table after checking every name, size and checksum field."""
    if not isinstance(files, dict):
        raise GuardError(f"manifest files is a {type(files).__name__}, not an object")
    if not files:
        raise GuardError("manifest lists no files")
    for name, info in files.items():
        if not is_safe_name(name, nested=nested_names):
            raise GuardError(f"manifest names a file outside the checkpoint: {name!r}")
        if not isinstance(info, dict):
            raise GuardError(f"manifest entry of {name!r} is {type(info).__name__}, not an object")
        size = info.get("bytes")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise GuardError(f"manifest size of {name!r} is {size!r}, not a whole number of bytes")
        digest = info.get("sha256")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise GuardError(f"manifest sha256 of {name!r} is not 64 hex digits")
    return files


def is_safe_name(name: object, *, nested: bool = False) -> bool:
    """A plain file name inside the checkpoint (or, ``nested``, a relative path of plain names)."""
    if not isinstance(name, str) or not name:
        return False
    parts = name.split("/") if nested else [name]
    return all(_PLAIN_NAME.match(p) and p not in (".", "..") for p in parts)
