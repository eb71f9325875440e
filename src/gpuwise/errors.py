"""The root of gpuwise's errors.

Each part defines one error type derived from :class:`GpuwiseError` (``CatalogError``,
``WorkloadError``, ...). The CLI turns any ``GpuwiseError`` into exit code 2 and one line on
stderr; anything else is a bug and exits 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


# Exit codes every part agrees on: 0 done, 1 a bug, 2 bad input (GpuwiseError), and EXIT_RESTART: the
# guard checkpointed and stopped on a preemption signal; whoever runs the job (the torchrun lines and
# SkyPilot YAML of gpuwise.launch, a scheduler) restarts it. os.EX_TEMPFAIL: "try again later".
EXIT_RESTART = 75


class GpuwiseError(Exception):
    """Bad input from the user: the message is one line that names the bad value."""


def did_you_mean(value: str, choices: Iterable[str], n: int = 3, *, prefix: str = "") -> str:
    """A ' (did you mean: a, b?)' suffix with the closest valid choices, or '' when none is close. ``prefix``:
    written before each suggestion (``timm:``), so that it can be pasted back; the match is on the bare names."""
    by_lower = {c.lower(): c for c in choices}
    typed = value.lower()
    # names the typed value begins (``fasterrcnn`` -> ``fasterrcnn_resnet50_fpn``), shortest first, then difflib's
    begun = sorted((c for c in by_lower if len(typed) >= 3 and c.startswith(typed) and c != typed), key=lambda c: (len(c), c))
    similar = difflib.get_close_matches(typed, list(by_lower), n=n, cutoff=0.5)
    close = [prefix + by_lower[c] for c in dict.fromkeys([*begun, *similar])][:n]
    return f" (did you mean: {', '.join(close)}?)" if close else ""
