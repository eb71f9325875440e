"""Atomic, verified checkpoints in a directory: the last K kept, each with a manifest.

Layout of ``DIR``::

    DIR/step-000001200/state.pt        the state (torch.save), or the files of torch.distributed.checkpoint
    DIR/step-000001200/manifest.json   step, epoch, time, sizes, sha256 of every file, versions
    DIR/.tmp-step-000001250-...        a save in progress (or killed): complete only once its manifest is in
    DIR/.old-step-000001200-...        a copy moved aside while the same step was saved again

A checkpoint is written into a temporary directory next to its final place, every file flushed and
fsync'ed, the manifest written last, then the directory renamed into place and the parent fsync'ed. The
previous checkpoints are never touched before the new one is in place. Saving a step that exists (a crash
save right after a periodic one, ``guard.save()``) takes two renames (the old copy aside, the new one in);
a kill between them leaves no ``step-N`` at all, only the moved copy and the complete temporary one. So
before a resume reads anything, :meth:`CheckpointStore.recover` puts the newest verified copy of each step
back in place, and only then removes the leftovers: a kill at any moment leaves the newest completed save
loadable (what the kill loses is the save in progress and the steps trained since the last completed one).
A resume takes the newest checkpoint whose files match the manifest's sizes and checksums and
names the ones it skipped. Symbolic links named like checkpoints are never followed, and removed.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import errno
import stat
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gpuwise.guard.dcp_safe import read_metadata
from gpuwise.guard.errors import GuardError
from gpuwise.guard.manifest import FORMAT_VERSION, Manifest
from gpuwise.guard.state_file import check_stored_zip, load_state_file
from gpuwise.guard.storage import HashingWriter, fsync_dir, sha256_file, write_bytes_durably

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
DCP_METADATA_FILE = ".metadata"
DCP_EXTRA_FILE = "extra.pt"
_STEP_DIR = re.compile(r"^step-(\d{9,})$")
# Leftovers of a save: a temporary directory (complete once its manifest is in), a copy moved aside.
# Written where room made for a save did not let it through, removed when a checkpoint is written: a restarted run
# (torchrun, a preemption) reads it, and deletes no more on a disk too small for one new checkpoint
ROOM_IN_VAIN_FILE = ".room-made-in-vain"
_LEFTOVER_DIR = re.compile(r"^\.(?:tmp|old)-step-(\d{9,})-[^/]+$")
# The files a resume loads, by format: each must be listed (and so verified) in the manifest.
REQUIRED_FILES = {"torch.save": (STATE_FILE,), "torch.distributed.checkpoint": (DCP_METADATA_FILE, DCP_EXTRA_FILE),
                  "lightning": ("state.ckpt",)}
# A save failing with one of these is out of room: deleting the oldest checkpoint may let it through.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# The files gpuwise writes with torch.save: zip archives of stored entries, checked as such before loading.
TORCH_SAVE_FILES = (STATE_FILE, DCP_EXTRA_FILE)

__all__ = ["FORMAT_VERSION", "Checkpoint", "CheckpointStore", "Manifest", "Recovery", "Skipped"]


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


@dataclass(frozen=True)
class Recovery:
    """What :meth:`CheckpointStore.recover` did: ``placed`` maps a leftover's name to the checkpoint it
    became; ``removed`` are the leftovers (and symbolic links) deleted after that."""
    placed: dict[str, Path]
    removed: list[Path]


class CheckpointStore:
    """The checkpoints of one run in one directory (local disk or a mounted network file system)."""

    def __init__(self, directory: str | os.PathLike, keep: int = 3) -> None:
        if keep < 1:
            raise GuardError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self._verified: dict[str, tuple[int, int, int]] = {}  # checkpoint name -> manifest identity
        self._made_room = False  # a full disk made a save delete an old checkpoint (warned once)
        self._room_in_vain = False  # the last save after make_room failed all the same; none written since

    # -- reading ---------------------------------------------------------------------------------
    def step_dirs(self) -> list[Path]:
        """Committed checkpoint directories, newest step first (nothing is verified yet). A symbolic link
        is never one: it could point anywhere, and would be loaded from there."""
        return [p for _, p in self._entries(_STEP_DIR) if not p.is_symlink()]

    def _entries(self, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
        """Entries whose name matches ``pattern`` (group 1: the step), newest step first."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := pattern.match(p.name))]
        return sorted(found, reverse=True)

    def verify(self, path: Path, *, checksums: bool = True, nested_names: bool = False) -> Checkpoint:
        """The checkpoint at ``path`` if its manifest is well formed, states the step its directory is named for
        (``step-N``, ``.tmp-step-N-…``, ``.old-step-N-…``), lists every file a resume loads, and every listed file
        matches its size and checksum; GuardError says why not.

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
        named = _step_in_name(path.name)
        if named is not None and manifest.step != named:
            raise GuardError(f"{path.name}: manifest says step {manifest.step}, its directory is of step {named}")
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
            if name in TORCH_SAVE_FILES:
                with open(f, "rb") as archive:
                    check_stored_zip(archive, f"{path.name}: {name}")
        if manifest.format == "torch.distributed.checkpoint":
            read_metadata((path / DCP_METADATA_FILE).read_bytes(), manifest.files, path.name)
        return Checkpoint(path, manifest)

    def latest(self, *, checksums: bool = True, exclude: Collection[str] = ()) -> tuple[Checkpoint | None, list[Skipped]]:
        """The newest checkpoint that verifies, and the newer ones skipped with the reason. Checkpoints
        named in ``exclude`` are passed over unread (a resume refused them already)."""
        skipped: list[Skipped] = []
        for path in self.step_dirs():
            if path.name in exclude:
                continue
            try:
                return self.verify(path, checksums=checksums), skipped
            except GuardError as exc:
                skipped.append(Skipped(path, str(exc)))
        return None, skipped

    def load_state(self, ckpt: Checkpoint, *, map_location: Any = "cpu", trust_pickle: bool = False) -> Any:
        """``torch.load`` with ``weights_only=True`` of the verified state file; pickled objects only when
        the user trusts the files."""
        return self.load_file(ckpt, STATE_FILE, map_location=map_location, trust_pickle=trust_pickle)

    def load_file(self, ckpt: Checkpoint, name: str, *, map_location: Any = "cpu", trust_pickle: bool = False) -> Any:
        """The ``torch.save`` file ``name`` of a verified checkpoint, read by the rules of ``state_file``."""
        if name not in ckpt.manifest.files:
            raise GuardError(f"{ckpt.path.name}: manifest does not list {name}: not loaded")
        return load_state_file(ckpt.path / name, label=f"{ckpt.path.name}/{name}",
                               sha256=ckpt.manifest.files[name]["sha256"], map_location=map_location,
                               trust_pickle=trust_pickle)

    # -- writing ---------------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Create the directory and write (then remove) a small file in it: GuardError, in one line, when
        that fails (a path through a file, a read-only mount, no permission), before a run relies on it."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise GuardError(f"checkpoint directory {self.directory} cannot be created: "
                             f"{exc.strerror or exc}{_blocking_file(self.directory)}") from None
        if not self.directory.is_dir():
            raise GuardError(f"checkpoint directory {self.directory} is not a directory")
        probe = self.directory / f".gpuwise-write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"gpuwise")
            finally:
                os.close(fd)
        except OSError as exc:
            raise GuardError(f"checkpoint directory {self.directory} is not writable: {exc.strerror or exc}") from None
        finally:
            try:
                probe.unlink()
            except OSError:
                pass

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
                cause = os_error_in(exc)
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
        self._place(tmp, final)
        self._remember_verified(final)  # hashed while written: no second read
        self._room_in_vain = False
        (self.directory / ROOM_IN_VAIN_FILE).unlink(missing_ok=True)
        self.prune()
        return Checkpoint(final, manifest)

    def _place(self, source: Path, final: Path) -> None:
        """Rename the complete checkpoint ``source`` to ``final`` and make it durable. When ``final``
        exists (the same step saved again) it is moved aside first: a kill between the two renames leaves
        both copies, which :meth:`recover` finds."""
        if os.path.lexists(final):
            old = self.directory / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(source, final)
            fsync_dir(self.directory)
            _remove(old)
        else:
            os.replace(source, final)
        fsync_dir(self.directory)

    def recover(self) -> Recovery:
        """Put back in place what a killed save left, then remove the leftovers. Call before reading, when
        no save of this run is in flight (a resume does).

        For each step, the newest verified copy (by manifest time) among ``step-N``, copies moved aside
        (``.old-step-N-*``) and complete temporary directories (``.tmp-step-N-*``, manifest in) becomes
        ``step-N``; the committed ``step-N`` wins a tie. Every other leftover, and every symbolic link
        named like a checkpoint, is then deleted."""
        placed: dict[str, Path] = {}
        by_step: dict[int, list[Path]] = {}
        for step, path in self._entries(_LEFTOVER_DIR):
            by_step.setdefault(step, []).append(path)
        for step, leftovers in by_step.items():
            final = self.directory / f"step-{step:09d}"
            best = self._newest_verified(step, leftovers, final)
            if best is not None:
                self._place(best, final)
                self._remember_verified(final)
                placed[best.name] = final
        removed = [p for _, paths in by_step.items() for p in paths if p.name not in placed]
        for path in removed:
            _remove(path)
        removed += self._remove_step_links()
        return Recovery(placed, removed)

    def _newest_verified(self, step: int, leftovers: list[Path], final: Path) -> Path | None:
        """The leftover to put in place of ``final``: verified, of this step, newer than a verified
        ``final``; None when ``final`` stays."""
        best, best_time_s = None, None
        if not final.is_symlink() and final.is_dir():
            try:
                best_time_s = self.verify(final).manifest.time_s
            except GuardError:
                pass
        for path in leftovers:
            if path.is_symlink() or not path.is_dir():
                continue
            try:
                manifest = self.verify(path).manifest  # of this step: verify checks it against the name
            except GuardError:
                continue
            if best_time_s is None or manifest.time_s > best_time_s:
                best, best_time_s = path, manifest.time_s
        return best

    def _remove_step_links(self) -> list[Path]:
        links = [p for _, p in self._entries(_STEP_DIR) if p.is_symlink()]
        for link in links:
            log.warning("%s is a symbolic link (to %s), not a checkpoint: removed, never followed",
                        link, os.readlink(link))
            link.unlink()
        return links

    def abort(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    def save(self, state: Any, step: int, epoch: int, *, meta: dict[str, Any] | None = None,
             world_size: int = 1) -> Checkpoint:
        """Write ``state`` as the checkpoint of ``step`` atomically. On any OSError (ENOSPC, EIO, a lost
        network mount) nothing of the new checkpoint remains and GuardError names the intact previous one.

        A full disk (ENOSPC, EDQUOT) with more than one verified checkpoint kept is met once by deleting the
        oldest ones beyond one less than are kept (``make_room``, said in a warning) and saving again: a disk
        that holds ``keep`` checkpoints, and no more, would otherwise refuse every save after the ``keep``-th,
        as the new one is written before the oldest is pruned."""
        try:
            return self._save_once(state, step, epoch, meta=meta, world_size=world_size)
        except OSError as exc:
            freed = self.make_room(step) if exc.errno in DISK_FULL_ERRNOS else []
            if not freed:
                raise self.save_failed(step, exc) from exc
            self.note_made_room(step, exc, freed)
        try:
            return self._save_once(state, step, epoch, meta=meta, world_size=world_size)
        except OSError as exc:
            self.made_room_in_vain()
            raise self.save_failed(step, exc) from exc

    def _save_once(self, state: Any, step: int, epoch: int, *, meta: dict[str, Any] | None,
                   world_size: int) -> Checkpoint:
        """One attempt of :meth:`save`: what it wrote is removed before its OSError is raised."""
        tmp: Path | None = None
        try:
            tmp = self.begin(step)
            files = self.write_state(tmp, state)
            return self.commit(tmp, step, epoch, files=files, world_size=world_size, meta=meta)
        except OSError:
            if tmp is not None:
                self.abort(tmp)
            raise

    def make_room(self, below_step: int) -> list[Path]:
        """Delete the oldest verified checkpoints of steps before ``below_step`` (the step about to be saved) so that
        one fewer than now (at most ``keep - 1``, at least one) remain, making room for one more; never the newest
        verified one, never the only one. A checkpoint at or past ``below_step`` is none of this run's past (a
        newer one a resume refused, NaN, say) and neither counts nor is deleted: the one the run resumed from is
        kept. Returns those deleted (none when a single one verifies, and none after ``made_room_in_vain`` until a
        checkpoint is written: a disk too small for one new checkpoint would otherwise lose an old one at every
        save, down to the last)."""
        if self._room_in_vain or (self.directory / ROOM_IN_VAIN_FILE).exists():
            log.info("no checkpoint deleted to make room in %s: the last room made did not let a save through",
                     self.directory)
            return []
        verified = [path for step, path in self._entries(_STEP_DIR)
                    if step < below_step and not path.is_symlink() and self._verifies(path)]
        remaining = max(1, min(len(verified), self.keep) - 1)
        removed = verified[remaining:]
        for path in removed:
            shutil.rmtree(path, ignore_errors=True)
            self._verified.pop(path.name, None)
        if removed:
            fsync_dir(self.directory)
        return removed

    def made_room_in_vain(self) -> None:
        """Say that a save after ``make_room`` failed all the same: ``make_room`` deletes nothing more until a
        checkpoint is written (``commit``), in this run and in a restarted one (``ROOM_IN_VAIN_FILE``). Where the
        full disk refuses even that empty file, the next restart may make room once more."""
        self._room_in_vain = True
        try:
            (self.directory / ROOM_IN_VAIN_FILE).touch()
        except OSError as exc:
            log.warning("could not mark %s as too full to make room in: %s", self.directory, exc.strerror or exc)

    def note_made_room(self, step: int, cause: OSError, freed: list[Path]) -> None:
        """Say that the save of ``step`` met a full disk (``cause``) and ``make_room`` deleted ``freed`` before saving
        again: once a warning, then quieter (on such a disk every later save does the same)."""
        log.log(logging.INFO if self._made_room else logging.WARNING,
                "checkpoint of step %d: %s in %s; deleted the oldest checkpoint(s) %s to make room (keep=%d "
                "checkpoints and a new one do not fit); saving again", step, cause.strerror or cause,
                self.directory, ", ".join(p.name for p in freed), self.keep)
        self._made_room = True

    def save_failed(self, step: int, cause: OSError | str) -> GuardError:
        """The one line of a save of ``step`` that did not happen (``cause``: the OSError, or why it was not
        attempted), naming the intact previous checkpoint."""
        previous = self.step_dirs()
        kept = f"previous checkpoint {previous[0].name} is intact" if previous else "no previous checkpoint exists"
        detail = cause if isinstance(cause, str) else cause.strerror or cause
        return GuardError(f"checkpoint of step {step} not written to {self.directory}: {detail}; {kept}")

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
        # A copy moved aside is a leftover once its step is back in place; otherwise recover() needs it.
        for step, leftover in self._entries(_LEFTOVER_DIR):
            final = self.directory / f"step-{step:09d}"
            if leftover.name.startswith(".old-") and not final.is_symlink() and self._verifies(final):
                _remove(leftover)
        return removed + self._remove_step_links()

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
        """What :meth:`recover` removed (call when no save of this run is in flight)."""
        return self.recover().removed


def _step_in_name(name: str) -> int | None:
    """The step a checkpoint directory's name gives (``step-N``, or a save's leftover of step N); None for
    other names (a directory another library wrote, sealed)."""
    m = _STEP_DIR.match(name) or _LEFTOVER_DIR.match(name)
    return int(m.group(1)) if m else None


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


def _remove(path: Path) -> None:
    """Delete a directory tree, or only the link when ``path`` is a symbolic link."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError ``exc`` is, or was raised from (its chain of causes), if any."""
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


def sealed_time_s(path: str | os.PathLike) -> float | None:
    """When the checkpoint directory ``path`` was sealed, as its manifest records it (a copy keeps it, where files'
    times do not), or None where it has no readable manifest."""
    try:
        return Manifest.from_json((Path(path) / MANIFEST_FILE).read_bytes(), nested_names=True).time_s
    except (OSError, GuardError, ValueError):
        return None


def latest_sealed(parent: str | os.PathLike, pattern: str = r"^checkpoint-(\d+)$") -> tuple[Checkpoint | None, list[Skipped]]:
    """The newest sealed, verifying subdirectory of ``parent`` whose name matches ``pattern`` (group 1: step).
    Newest by when it was sealed (``sealed_time_s``), ties and unsealed ones by step, unsealed first (a save cut
    short is said as skipped): after a roll-back to an older checkpoint, the checkpoints the resumed run sealed
    are newer than the abandoned higher-numbered ones, as the HF callback's rotation counts them."""
    parent = Path(parent)
    rx = re.compile(pattern)
    found = [(int(m.group(1)), p) for p in parent.iterdir() if p.is_dir() and (m := rx.match(p.name))] \
        if parent.is_dir() else []
    sealed_at = {p: sealed_time_s(p) for _, p in found}
    found.sort(key=lambda f: (math.inf if sealed_at[f[1]] is None else sealed_at[f[1]], f[0]), reverse=True)
    store = CheckpointStore(parent)
    skipped: list[Skipped] = []
    for _, p in found:
        try:
            return store.verify(p, nested_names=True), skipped
        except GuardError as exc:
            skipped.append(Skipped(p, str(exc)))
    return None, skipped


def _blocking_file(directory: Path) -> str:
    """`` (PATH is a file, not a directory)`` when a component of ``directory`` exists and is not a directory."""
    for parent in [directory, *directory.parents]:
        if os.path.lexists(parent) and not parent.is_dir():
            return f" ({parent} is a file, not a directory)"
    return ""
