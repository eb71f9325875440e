"""Files written whole or not at all: a temporary file beside the target, renamed (or linked) into its place.

A directory in the target's place, a missing parent or a full disk raises OSError and leaves nothing
behind (neither an empty target nor the temporary file). The file gets the mode any new file gets
(0666 less the umask), or keeps the one it had when it is replaced: never the temporary file's 0600."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o666     # what open(..., "w") asks for; the umask takes its share


def new_file_mode() -> int:
    """The mode a file created now gets: ``NEW_FILE_MODE`` less the process's umask."""
    return NEW_FILE_MODE & ~_umask()


def _umask() -> int:
    """The process's umask: from /proc (Linux 4.7+), which leaves it alone; else by setting it and back, which
    leaves another thread creating a file in between that instant's 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _write_temp(p: Path, data: bytes, mode: int) -> str:
    """A temporary file beside ``p`` holding ``data`` with ``mode``: its path."""
    if p.is_dir():
        raise IsADirectoryError(21, "is a directory", str(p))
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_text_atomic(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """``text`` into ``path``, replacing what is there (whose mode it keeps)."""
    return write_bytes_atomic(path, text.encode(encoding))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """``data`` into ``path``, replacing what is there (whose mode it keeps)."""
    p = Path(path)
    try:
        mode = stat.S_IMODE(p.stat().st_mode)
    except FileNotFoundError:
        mode = new_file_mode()
    tmp = _write_temp(p, data, mode)
    try:
        os.replace(tmp, p)
    except BaseException:
        _unlink(tmp)
        raise
    return p


def write_new_text_atomic(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """``text`` into ``path``, a new file: FileExistsError when anything is there (the temporary file is linked
    into place, which never replaces, so a file made meanwhile is not overwritten either)."""
    p = Path(path)
    if p.exists() or p.is_symlink():
        raise FileExistsError(17, "already exists", str(p))
    data = text.encode(encoding)
    tmp = _write_temp(p, data, new_file_mode())
    try:
        os.link(tmp, p)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        _write_exclusive(p, data)     # a file system without hard links: created exclusively instead
    finally:
        _unlink(tmp)
    return p


_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK)


def _write_exclusive(p: Path, data: bytes) -> None:
    """``p`` created (O_EXCL) and written; removed again when the write fails, so nothing partial stays."""
    with open(p, "xb") as f:
        try:
            f.write(data)
            f.flush()
        except BaseException:
            _unlink(str(p))
            raise
