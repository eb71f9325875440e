"""Numbers in words for the advice texts and the table: ranges and drops per doubling (durations: gpuwise.units)."""

from __future__ import annotations


def g(x: float) -> str:
    return f"{x:.4g}"


def range_text(low: float, high: float) -> str:
    """``0.91–0.92``; with a negative end ``-3.002 to -3.001`` (a dash between minus signs misreads)."""
    lo, hi = g(low), g(high)
    return f"{lo} to {hi}" if low < 0 or high < 0 else f"{lo}–{hi}"


def drop_text(drop: float) -> str:
    """A drop per doubling of the steps: ``8.5%``, ``-3.0%``; a rise of ×2 or more per doubling as the factor
    (``up ×1,388``): -138649.8 % reads as noise."""
    if drop > -1.0:
        return f"{drop:.1%}"
    ratio = 1.0 - drop
    return f"up ×{ratio:,.0f}" if ratio >= 10 else f"up ×{ratio:.1f}"

