"""Reading ``torch.distributed.checkpoint`` (DCP) directories without running code from them.

DCP's ``FileSystemReader`` unpickles ``.metadata`` with ``pickle.load`` and its default planner loads
non-tensor values with ``torch.load(weights_only=False)``: a checkpoint on a shared disk could run any
code on resume. Here ``.metadata`` goes through an unpickler that resolves only an allow-list of globals
(DCP's metadata dataclasses, ``torch.Size``, dtypes, layouts, paths), the shard files it names must be
plain names the manifest lists, and byte values load with ``weights_only=True``.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from gpuwise.guard.errors import GuardError
from gpuwise.guard.manifest import is_safe_name

_METADATA_CLASSES = frozenset({
    "Metadata", "MetadataIndex", "StorageMeta", "TensorProperties", "TensorStorageMetadata",
    "BytesStorageMetadata", "ChunkStorageMetadata", "_MEM_FORMAT_ENCODING",
})
_ALLOWED = {
    "torch.distributed.checkpoint.metadata": _METADATA_CLASSES,
    "torch.distributed.checkpoint.filesystem": frozenset({"_StorageInfo"}),
    "torch.serialization": frozenset({"_get_layout"}),
    "pathlib": frozenset({"PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"}),
    "collections": frozenset({"OrderedDict"}),
    "torch": frozenset({"Size"}),
}


class _AllowListUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name in _ALLOWED.get(module, ()) or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in DCP metadata")


def read_metadata(data: bytes, listed: Collection[str], where: str) -> Any:
    """The DCP ``Metadata`` in ``data``; GuardError when it names a disallowed global or a shard file the
    manifest does not list (``listed``)."""
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        metadata = _AllowListUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # any malformed pickle: a corrupt checkpoint
        raise GuardError(f"{where}: DCP metadata refused ({str(exc)[:120]})") from None
    if not isinstance(metadata, Metadata) or not isinstance(metadata.storage_data, dict):
        raise GuardError(f"{where}: DCP metadata is not a Metadata object")
    for info in metadata.storage_data.values():
        rel = getattr(info, "relative_path", None)
        if not is_safe_name(rel) or rel not in listed:
            raise GuardError(f"{where}: DCP metadata names a file the manifest does not list: {str(rel)[:80]!r}")
    return metadata


def safe_reader(ckpt: Any) -> Any:
    """A DCP storage reader for a verified checkpoint (``gpuwise.guard.checkpoint.Checkpoint``)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    listed = frozenset(ckpt.manifest.files)
    path = Path(ckpt.path)

    class _SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            metadata = read_metadata((path / ".metadata").read_bytes(), listed, path.name)
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return _SafeReader(str(path))


def safe_load_planner() -> Any:
    """DCP's default load planner, but non-tensor values load with ``torch.load(weights_only=True)``."""
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, set_element

    class _SafePlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            obj = torch.load(value, weights_only=True)
            if self.flatten_state_dict:
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj

    return _SafePlanner()
