"""Files written whole or not at all: a temporary file beside the target, renamed over it.

A directory in the target's place, a missing parent or a full disk raises OSError and leaves nothing
behind (neither an empty target nor the temporary file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(21, "is a directory", str(p))
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return p
