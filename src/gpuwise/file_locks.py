"""What ``flock`` failing says about the file system: one home for the guard's directory lock and the run log's.

An NFS mount without lockd, some FUSE and network file systems refuse ``flock`` with these errno values: no other
process holds the lock there, the file system cannot hold one at all (EBADF: some FUSE mounts answer so for a
descriptor opened read-write)."""

from __future__ import annotations

import errno

NO_FLOCK_ERRNOS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS, errno.EBADF})


def cannot_lock(exc: OSError) -> bool:
    """Whether ``exc`` from ``flock`` says the file system does not lock files (not that another process holds it)."""
    return exc.errno in NO_FLOCK_ERRNOS
