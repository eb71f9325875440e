"""Text from files made safe for a terminal: escape sequences and control characters removed.

A GPU name in a CSV, a metric name in a run log or a path can carry ``ESC [ 2 J`` (clear the screen),
an OSC 8 link or a right-to-left override; printed raw they rewrite what the user sees. Every reader
passes text from files through :func:`printable` before it can reach a terminal.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, then single characters:
# C0 and C1 controls, DEL, and the bidirectional overrides/isolates.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters; tabs and line breaks become spaces
    (one line stays one line)."""
    text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("", text.replace("\t", " ").replace("\n", " ").replace("\r", " "))


def printable_or_none(text: object) -> str | None:
    """``printable`` for optional text fields (None stays None, other types become their str)."""
    return None if text is None else printable(str(text))


def for_console(text: object) -> str:
    """``text`` from outside gpuwise (a process command line, an NVML name, a catalog provider) made safe
    for a rich console: :func:`printable`, then rich markup escaped, so ``[/]`` or ``[red]`` in it is shown,
    not interpreted (an unmatched closing tag would otherwise crash the print). None becomes ""."""
    from rich.markup import escape  # here: the ground floor does not import rich for everyone

    return "" if text is None else escape(printable(str(text)))


def clipped(text: str, max_chars: int) -> str:
    """``text`` whole where it fits in ``max_chars``, else cut to that with an ellipsis as its last character."""
    return text if len(text) <= max_chars else text[:max_chars - 1].rstrip() + "…"
