"""A wheel of the running gpuwise, for a remote machine that no package registry serves it to.

gpuwise is installed from its own source or a wheel, not from PyPI, so a task that runs ``gpuwise run`` on a
rented machine must bring it along: a SkyPilot task uploads this wheel (``file_mounts``) and its ``setup``
installs it. The wheel is the package as this process imports it (pure Python: the files under
``gpuwise/``, data files included) with the installed distribution's ``METADATA`` (its ``Requires-Dist``,
so pip installs the dependencies) and entry points (the ``gpuwise`` command). The same files give the
same bytes (fixed timestamps, sorted entries), so the file name carries a digest of its content and a
second emit reuses it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path

import gpuwise
from gpuwise.atomic import write_bytes_atomic
from gpuwise.cachedir import user_cache_dir
from gpuwise.launch.plan import LaunchError

DIST = "gpuwise"
_WHEEL_FILE = "Wheel-Version: 1.0\nGenerator: gpuwise.launch.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)          # the earliest date a zip entry can hold: reproducible bytes


def wheel_dir() -> Path:
    """Where built wheels are kept: ``$XDG_CACHE_HOME/gpuwise/wheels``, else ``~/.cache/gpuwise/wheels``."""
    return user_cache_dir("wheels")


def _package_files(root: Path) -> list[tuple[str, bytes]]:
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((f"{DIST}/{path.relative_to(root).as_posix()}", path.read_bytes()))
    return files


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel_bytes() -> tuple[str, bytes]:
    """The file name and the bytes of a wheel of the running gpuwise."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        raise LaunchError("gpuwise is not installed as a package here (run `pip install -e .` in its checkout), "
                          "so no wheel of it can be built for the remote machine") from None
    version = dist.version
    info = f"{DIST}-{version}.dist-info"
    entries = _package_files(Path(gpuwise.__file__).resolve().parent)
    entries.append((f"{info}/METADATA", (dist.read_text("METADATA") or "").encode()))
    entries.append((f"{info}/WHEEL", _WHEEL_FILE.encode()))
    if dist.read_text("entry_points.txt"):
        entries.append((f"{info}/entry_points.txt", dist.read_text("entry_points.txt").encode()))
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, data)
    return f"{DIST}-{version}-py3-none-any.whl", buffer.getvalue()


def build_wheel(directory: Path | None = None) -> Path:
    """Write the wheel under ``directory`` (default :func:`wheel_dir`) in a folder named by its digest,
    atomically; return its path. The same gpuwise gives the same path, written once."""
    name, data = wheel_bytes()
    folder = (directory or wheel_dir()) / hashlib.sha256(data).hexdigest()[:16]
    path = folder / name
    if path.is_file() and path.read_bytes() == data:
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except OSError as exc:
        raise LaunchError(f"cannot write gpuwise's wheel to {folder}: {exc.strerror or exc}") from None
    return path
