"""Where a ``--plot`` picture goes: the path checked before the long work (one line, exit 2, nothing lost),
the figure written without a traceback.

The file's suffix picks the format, as matplotlib does (``.png``, ``.pdf``, ``.svg``, ...); a name without
a suffix is written as a PNG under exactly that name (matplotlib would add ``.png`` to it).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from gpuwise.errors import GpuwiseError

_ALWAYS = ("png", "pdf", "svg")     # what matplotlib's Agg canvas writes everywhere: known without importing it


class PlotError(GpuwiseError):
    """A plot that cannot be written where asked (or has nothing to draw): one line naming the path."""


def plot_format(path: str | os.PathLike, option: str = "--plot") -> str:
    """The format ``path`` is written in; PlotError where it cannot be written there: a folder, a missing or
    read-only folder, a suffix matplotlib cannot write."""
    text = os.fspath(path)
    if not text.strip():
        raise PlotError(f"{option} needs a file name, e.g. {option} plot.png")
    p = Path(text)
    if p.is_dir():
        raise PlotError(f"{option} {text} is a folder: give a file name, e.g. {option} {p / 'plot.png'}")
    folder = p.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise PlotError(f"{option} {text}: {folder} {why}")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PlotError(f"{option} {text}: not writable here (permission denied)")
    suffix = p.suffix[1:].lower()
    if not suffix or suffix in _ALWAYS:
        return suffix or "png"
    formats = _supported_formats()
    if suffix not in formats:
        raise PlotError(f"{option} {text}: matplotlib cannot write .{suffix} files "
                        f"(give .png, or one of: {', '.join(sorted(formats))})")
    return suffix


def _supported_formats() -> set[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return set(FigureCanvasAgg.get_supported_filetypes())


def save_figure(fig, path: str | os.PathLike, option: str = "--plot", **savefig_kwargs) -> Path:
    """Writes ``fig`` to ``path`` in the format its suffix names; PlotError (one line) where it cannot. The
    picture is drawn in memory first: a failure leaves no file, empty or half written."""
    fmt = plot_format(path, option)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, **savefig_kwargs)
    except (ValueError, OSError) as exc:
        raise PlotError(f"{option} {os.fspath(path)}: cannot draw it as .{fmt} ({exc})") from None
    out = Path(path)
    try:
        out.write_bytes(buf.getvalue())
    except OSError as exc:
        raise PlotError(f"{option} {os.fspath(path)}: cannot write it ({exc.strerror or exc})") from None
    return out
