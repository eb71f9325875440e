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



# What the flatness rule's percentage is a share of (``phases.progress_factor`` is the rule's one home)
FLAT_SHARE_OF = "as a share of the loss or, where smaller, of what the run has gained so far"


def flat_rule_text(threshold: float) -> str:
    """The flatness rule in words, one wording for the Plateau, Forecast and Stop texts: ``under 1% per doubling of
    the steps, as a share of the loss or, where smaller, of what the run has gained so far``."""
    return f"under {threshold:.0%} per doubling of the steps, {FLAT_SHARE_OF}"


def flat_drop_text(share_drop: float, loss_drop: float) -> str:
    """A flat phase's drop per doubling of the steps, saying what it is a share of: of what the run has gained so
    far where that share (``share_drop``) is the smaller one, with the loss's own drop beside it; else of the loss."""
    if share_drop < loss_drop - 0.0005:
        return (f"each doubling of the steps lowers the loss by {drop_text(share_drop)} of what the run has gained "
                f"so far; the loss itself falls {drop_text(loss_drop)} per doubling")
    return f"{drop_text(share_drop)} lower per doubling of the steps"
