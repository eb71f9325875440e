"""The file-system side of checkpoints: fsync helpers, free space, and what kind of disk this is.

Why all the fsync: ``os.replace`` makes a rename atomic for running processes, but after a power loss
or a stopped instance the rename can reach the disk before the file's data does, leaving a complete-looking
checkpoint full of zeros. Flushing the file, then the directory entry, orders the two.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import BinaryIO

from gpuwise.units import format_bytes

# File systems where another machine may read what we write, and where fsync costs a round trip.
NETWORK_FS_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "fuse.juicefs", "ceph",
                              "fuse.ceph", "lustre", "gpfs", "beegfs", "fuse.s3fs", "fuse.ossfs", "9p", "glusterfs",
                              "fuse.glusterfs", "fuse.rclone", "fuse.gcsfuse"})


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some network file systems refuse fsync on a directory; the rename is then as durable as they make it.
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


class HashingWriter:
    """A write-only file object that hashes what passes through it (no second read of a large file)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._sha = hashlib.sha256()
        self.bytes_written = 0

    def write(self, data: bytes | memoryview) -> int:
        self._sha.update(data)
        n = self._f.write(data)
        self.bytes_written += len(memoryview(data).cast("B"))
        return n

    def flush(self) -> None:
        self._f.flush()

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def sha256_file(path: Path, chunk_bytes: int = 8 << 20) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            sha.update(chunk)
    return sha.hexdigest()


def write_bytes_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def low_space_warning(directory: Path, checkpoint_bytes: int, min_checkpoints: int = 3) -> str | None:
    """A one-line warning when fewer than ``min_checkpoints`` checkpoints of this size fit, else None."""
    free = free_bytes(directory)
    if checkpoint_bytes > 0 and free < min_checkpoints * checkpoint_bytes:
        return (f"checkpoint disk {directory} has {format_bytes(free)} free, less than {min_checkpoints} "
                f"checkpoints of {format_bytes(checkpoint_bytes)}: the next save may fail (ENOSPC)")
    return None


def filesystem_type(path: Path) -> str | None:
    """The type of the mount holding ``path`` (from /proc/mounts), or None where unknown."""
    try:
        target = os.path.realpath(path)
        best, best_type = "", None
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mount = parts[1].replace("\\040", " ")
                    if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                        best, best_type = mount, parts[2]
        return best_type
    except OSError:
        return None


def is_network_fs(path: Path) -> bool:
    fs = filesystem_type(path)
    return fs is not None and (fs in NETWORK_FS_TYPES or fs.startswith("nfs"))
