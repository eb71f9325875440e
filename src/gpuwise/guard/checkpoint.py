"""Atomic, verified checkpoints in a directory: the last K kept, each with a manifest.

Layout of ``DIR``::

    DIR/step-000001200/state.pt        the state (torch.save), or the files of torch.distributed.checkpoint
    DIR/step-000001200/manifest.json   step, epoch, time, sizes, sha256 of every file, versions
    DIR/.tmp-step-000001250-...        a save in progress (or killed): never read, removed at the next save

A checkpoint is written into a temporary directory next to its final place, every file flushed and
fsync'ed, the manifest written last, then the directory renamed into place and the parent fsync'ed. A
kill at any moment leaves either the complete new checkpoint or none of it; the previous ones are never
touched before the new one is in place. A resume takes the newest checkpoint whose files match the
manifest's sizes and checksums and names the ones it skipped.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gpuwise.guard.errors import GuardError
from gpuwise.guard.manifest import FORMAT_VERSION, Manifest
from gpuwise.guard.storage import HashingWriter, fsync_dir, sha256_file, write_bytes_durably

STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
DCP_METADATA_FILE = ".metadata"
DCP_EXTRA_FILE = "extra.pt"
_STEP_DIR = re.compile(r"^step-(\d{9,})$")
# The files a resume loads, by format: each must be listed (and so verified) in the manifest.
REQUIRED_FILES = {"torch.save": (STATE_FILE,), "torch.distributed.checkpoint": (DCP_METADATA_FILE, DCP_EXTRA_FILE),
                  "lightning": ("state.ckpt",)}

__all__ = ["FORMAT_VERSION", "Checkpoint", "CheckpointStore", "Manifest", "Skipped"]


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    manifest: Manifest

    @property
    def step(self) -> int:
        return self.manifest.step


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


class CheckpointStore:
    """The checkpoints of one run in one directory (local disk or a mounted network file system)."""

    def __init__(self, directory: str | os.PathLike, keep: int = 3) -> None:
        if keep < 1:
            raise GuardError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self._verified: dict[str, tuple[int, int, int]] = {}  # checkpoint name -> manifest identity

    # -- reading ---------------------------------------------------------------------------------
    def step_dirs(self) -> list[Path]:
        """Committed checkpoint directories, newest step first (nothing is verified yet)."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _STEP_DIR.match(p.name))]
        return [p for _, p in sorted(found, reverse=True)]

    def verify(self, path: Path, *, checksums: bool = True, nested_names: bool = False) -> Checkpoint:
        """The checkpoint at ``path`` if its manifest is well formed, lists every file a resume loads, and
        every listed file matches its size and checksum; GuardError says why not.

        A checkpoint gpuwise wrote must hold nothing the manifest does not list (an added file could be
        read by the loader unverified); ``nested_names`` allows relative paths for directories another
        library wrote and ``seal_directory`` sealed."""
        try:
            text = (path / MANIFEST_FILE).read_bytes()
        except FileNotFoundError:
            raise GuardError(f"{path.name}: no manifest") from None
        except OSError as exc:
            raise GuardError(f"{path.name}: unreadable manifest ({exc.strerror or exc})") from None
        try:
            manifest = Manifest.from_json(text, nested_names=nested_names)
        except GuardError as exc:
            raise GuardError(f"{path.name}: unreadable manifest: {exc}") from None
        for name in REQUIRED_FILES.get(manifest.format, ()):
            if name not in manifest.files:
                raise GuardError(f"{path.name}: manifest does not list {name}, which a resume would load")
        if manifest.format in REQUIRED_FILES:
            unlisted = sorted(f.name for f in path.iterdir() if f.name != MANIFEST_FILE and f.name not in manifest.files)
            if unlisted:
                raise GuardError(f"{path.name}: holds files its manifest does not list ({', '.join(unlisted[:3])})")
        for name, info in manifest.files.items():
            f = path / name
            if not _is_plain_file_inside(path, name):
                raise GuardError(f"{path.name}: {name} missing (or not a plain file)")
            size = f.stat().st_size
            if size != info["bytes"]:
                raise GuardError(f"{path.name}: {name} has {size} bytes, manifest says {info['bytes']}")
            if checksums and sha256_file(f) != info["sha256"]:
                raise GuardError(f"{path.name}: {name} checksum mismatch (corrupt)")
        if manifest.format == "torch.distributed.checkpoint":
            from gpuwise.guard.dcp_safe import read_metadata

            read_metadata((path / DCP_METADATA_FILE).read_bytes(), manifest.files, path.name)
        return Checkpoint(path, manifest)

    def latest(self, *, checksums: bool = True) -> tuple[Checkpoint | None, list[Skipped]]:
        """The newest checkpoint that verifies, and the newer ones skipped with the reason."""
        skipped: list[Skipped] = []
        for path in self.step_dirs():
            try:
                return self.verify(path, checksums=checksums), skipped
            except GuardError as exc:
                skipped.append(Skipped(path, str(exc)))
        return None, skipped

    def load_state(self, ckpt: Checkpoint, *, map_location: Any = "cpu", trust_pickle: bool = False) -> Any:
        """``torch.load`` with ``weights_only=True`` of the verified state file; pickled objects only when
        the user trusts the files."""
        if STATE_FILE not in ckpt.manifest.files:
            raise GuardError(f"{ckpt.path.name}: manifest does not list {STATE_FILE}: not loaded")
        path = ckpt.path / STATE_FILE
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            if not trust_pickle:
                raise GuardError(
                    f"{ckpt.path.name}: state holds objects that torch.load(weights_only=True) refuses "
                    f"({str(exc).splitlines()[0]}); store extras as tensors/plain types, or pass trust_pickle=True "
                    "if you trust this directory") from None
            return torch.load(path, map_location=map_location, weights_only=False)

    # -- writing ---------------------------------------------------------------------------------
    def begin(self, step: int, *, shared_name: bool = False) -> Path:
        """A fresh temporary directory for a checkpoint of ``step``.

        ``shared_name``: a name every rank can compute (torch.distributed.checkpoint writes from all ranks).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        suffix = "shared" if shared_name else f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self.directory / f".tmp-step-{step:09d}-{suffix}"
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        return tmp

    def write_state(self, tmp: Path, state: Any, name: str = STATE_FILE) -> dict[str, dict[str, Any]]:
        """torch.save ``state`` into ``tmp/name`` durably; returns the manifest entry of the file."""
        path = tmp / name
        with open(path, "wb") as f:
            writer = HashingWriter(f)
            try:
                torch.save(state, writer)
            except RuntimeError as exc:
                # torch's zip writer turns a failed write into "unexpected pos" when it closes the archive;
                # the OSError underneath (ENOSPC, EIO) is the cause worth reporting.
                cause = _os_error_in(exc)
                if cause is None:
                    raise
                raise cause from None
            f.flush()
            os.fsync(f.fileno())
        return {name: {"bytes": path.stat().st_size, "sha256": writer.hexdigest()}}

    def commit(self, tmp: Path, step: int, epoch: int, *, files: dict[str, dict[str, Any]] | None = None,
               format: str = "torch.save", world_size: int = 1, meta: dict[str, Any] | None = None) -> Checkpoint:
        """Write the manifest (hashing files not in ``files``), rename ``tmp`` into place, prune old ones."""
        entries = dict(files or {})
        for f in sorted(tmp.iterdir()):  # flat: a checkpoint holds plain file names only
            rel = f.name
            if f.is_file() and rel not in entries and rel != MANIFEST_FILE:
                entries[rel] = {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
                _fsync_file(f)
        manifest = Manifest(step=step, epoch=epoch, time_s=time.time(), files=entries, format=format,
                            world_size=world_size, meta=dict(meta or {}))
        write_bytes_durably(tmp / MANIFEST_FILE, manifest.to_json().encode())
        fsync_dir(tmp)
        final = self.directory / f"step-{step:09d}"
        if final.exists():  # the same step saved again (e.g. preemption right after a periodic save)
            old = self.directory / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        fsync_dir(self.directory)
        self._remember_verified(final)  # hashed while written: no second read
        self.prune()
        return Checkpoint(final, manifest)

    def abort(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    def save(self, state: Any, step: int, epoch: int, *, meta: dict[str, Any] | None = None,
             world_size: int = 1) -> Checkpoint:
        """Write ``state`` as the checkpoint of ``step`` atomically. On any OSError (ENOSPC, EIO, a lost
        network mount) nothing of the new checkpoint remains and GuardError names the intact previous one."""
        tmp: Path | None = None
        try:
            tmp = self.begin(step)
            files = self.write_state(tmp, state)
            return self.commit(tmp, step, epoch, files=files, world_size=world_size, meta=meta)
        except OSError as exc:
            if tmp is not None:
                self.abort(tmp)
            raise self.save_failed(step, exc) from exc

    def save_failed(self, step: int, exc: OSError) -> GuardError:
        previous = self.step_dirs()
        kept = f"previous checkpoint {previous[0].name} is intact" if previous else "no previous checkpoint exists"
        return GuardError(f"checkpoint of step {step} not written to {self.directory}: "
                          f"{exc.strerror or exc}; {kept}")

    def prune(self) -> list[Path]:
        """Keep the newest ``keep`` checkpoints that verify; delete older ones, corrupt ones older than a
        verified one (no resume would read them), and leftovers of killed saves. Corrupt checkpoints newer
        than every verified one stay for inspection (a resume skips them, naming them); the newest
        verified checkpoint is never deleted."""
        removed = []
        verified = 0
        for path in self.step_dirs():
            if verified >= self.keep:
                pass  # older than the kept ones
            elif self._verifies(path):
                verified += 1
                continue
            elif verified == 0:
                continue
            shutil.rmtree(path, ignore_errors=True)
            self._verified.pop(path.name, None)
            removed.append(path)
        for leftover in self.directory.glob(".old-step-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return removed

    def _verifies(self, path: Path) -> bool:
        """Full verification, remembered per checkpoint (keyed by its manifest's identity on disk)."""
        try:
            st = (path / MANIFEST_FILE).stat()
        except OSError:
            return False
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._verified.get(path.name) != key:
            try:
                self.verify(path)
            except GuardError:
                return False
            self._verified[path.name] = key
        return True

    def _remember_verified(self, path: Path) -> None:
        st = (path / MANIFEST_FILE).stat()
        self._verified[path.name] = (st.st_ino, st.st_mtime_ns, st.st_size)

    def remove_stale_temporaries(self) -> list[Path]:
        """Temporary directories of saves that were killed (call when no save of this run is in flight)."""
        stale = list(self.directory.glob(".tmp-step-*")) if self.directory.is_dir() else []
        for p in stale:
            shutil.rmtree(p, ignore_errors=True)
        return stale


def _is_plain_file_inside(root: Path, name: str) -> bool:
    """``root/name`` is a regular file reached without following a symbolic link."""
    current = root
    for part in name.split("/"):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
    return stat.S_ISREG(mode)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _os_error_in(exc: BaseException) -> OSError | None:
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 10:
        if isinstance(e, OSError):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def seal_directory(path: str | os.PathLike, step: int, epoch: int = 0, *, meta: dict[str, Any] | None = None,
                   format: str = "directory") -> Checkpoint:
    """Add a manifest (sizes, sha256) to a checkpoint directory another library wrote in place (HF Trainer,
    Lightning), after fsync'ing its files: ``CheckpointStore.verify`` then tells a complete one from one
    cut short by a kill. Written last, so a directory with a manifest was complete when it was sealed."""
    path = Path(path)
    entries: dict[str, dict[str, Any]] = {}
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(path).as_posix()
        if f.is_file() and rel != MANIFEST_FILE:
            _fsync_file(f)
            entries[rel] = {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
    manifest = Manifest(step=step, epoch=epoch, time_s=time.time(), files=entries, format=format, meta=dict(meta or {}))
    tmp = path / f".{MANIFEST_FILE}.tmp"
    write_bytes_durably(tmp, manifest.to_json().encode())
    os.replace(tmp, path / MANIFEST_FILE)
    fsync_dir(path)
    return Checkpoint(path, manifest)


def latest_sealed(parent: str | os.PathLike, pattern: str = r"^checkpoint-(\d+)$") -> tuple[Checkpoint | None, list[Skipped]]:
    """The newest sealed, verifying subdirectory of ``parent`` whose name matches ``pattern`` (group 1: step)."""
    parent = Path(parent)
    rx = re.compile(pattern)
    found = sorted(((int(m.group(1)), p) for p in parent.iterdir() if p.is_dir() and (m := rx.match(p.name))),
                   reverse=True) if parent.is_dir() else []
    store = CheckpointStore(parent)
    skipped: list[Skipped] = []
    for _, p in found:
        try:
            return store.verify(p, nested_names=True), skipped
        except GuardError as exc:
            skipped.append(Skipped(p, str(exc)))
    return None, skipped
