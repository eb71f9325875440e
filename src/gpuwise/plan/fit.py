"""The one answer to "does it fit?": one rule, one meaning of headroom, one largest-batch search.

Headroom is a share of the GPU's memory **as the driver reports it** (``GPU.visible_memory_bytes``:
15360 MiB on a 16 GiB T4), kept free for fragmentation and drift. The same number means the same
thing on every command: ``estimate``, ``recommend``, ``report`` and ``advise``. A job fits when the
memory nvidia-smi would show for it at its peak (``total_bytes``) is at most the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable


from gpuwise.plan.errors import PlanError

DEFAULT_HEADROOM_FRACTION = 0.05


def check_headroom(fraction: float) -> float:
    if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and 0.0 <= fraction < 1.0):
        raise PlanError(f"--headroom must be a share of GPU memory in [0, 1) (e.g. 0.05 or 5%), got {fraction!r}")
    return float(fraction)


def parse_headroom(text: str | float | None) -> float:
    """'5%', '0.05' or 0.05 -> 0.05; None -> the default."""
    if text is None:
        return DEFAULT_HEADROOM_FRACTION
    if isinstance(text, (int, float)):
        return check_headroom(text)
    s = text.strip()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*%", s)
    try:
        value = float(m.group(1)) / 100.0 if m else float(s)
    except ValueError:
        raise PlanError(f"--headroom must be a share of GPU memory like 5% or 0.05, got {text!r}") from None
    return check_headroom(value)


def usable_bytes(gpu, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """What a job may plan to use on ``gpu``: the memory the driver reports, less the headroom."""
    return usable_of(gpu.visible_memory_bytes, headroom_fraction)


def usable_of(visible_memory_bytes: int, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """The same for a GPU known by the memory the driver reports (a quote's ``gpu_memory_bytes``)."""
    return int(visible_memory_bytes * (1.0 - headroom_fraction))


def fits(total_bytes: int, gpu, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> bool:
    """The fit rule: nvidia-smi's figure at the peak within the GPU's usable memory."""
    return total_bytes <= usable_bytes(gpu, headroom_fraction)


def spare_bytes(total_bytes: int, gpu, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """Usable memory left at the peak (negative: short by that much)."""
    return usable_bytes(gpu, headroom_fraction) - total_bytes


def largest_fitting(
    total_bytes_of: Callable[[int], int], budget_bytes: int, *, upper: int, powers_of_two: bool = False,
    max_evaluations: int = 40,
) -> int:
    """The largest x in [1, upper] with ``total_bytes_of(x) <= budget_bytes``; 0 when x = 1 does not fit.

    ``total_bytes_of`` grows with x and is close to affine (memory against batch or context), so the
    line through two evaluations guesses the answer and each verified guess narrows the bracket; where
    the line does not help, the bracket is halved. ``powers_of_two`` searches 1, 2, 4, … and ``upper``
    only (each evaluation of a traced model is a trace: a small grid shared across GPUs keeps them few).
    """
    grid = _grid(upper, powers_of_two)
    seen: dict[int, int] = {}

    def value(i: int) -> int:
        x = grid[i]
        if x not in seen:
            seen[x] = total_bytes_of(x)
        return seen[x]

    if value(0) > budget_bytes:
        return 0
    lo, hi = 0, len(grid)            # grid[lo] fits; grid[hi] (if any) does not
    probe = min(_index_at_most(grid, 8), len(grid) - 1)
    if probe > lo:
        lo, hi = (probe, hi) if value(probe) <= budget_bytes else (lo, probe)
    bisect = False   # after a guess that did not halve the bracket, halve it once (bounded work)
    while hi - lo > 1 and len(seen) < max_evaluations:
        width = hi - lo
        i = (lo + hi) // 2 if bisect else _secant_index(grid, seen, budget_bytes, lo, hi)
        if value(i) <= budget_bytes:
            lo = i
        else:
            hi = i
        bisect = not bisect and (hi - lo) * 2 > width
    return grid[lo]


def _grid(upper: int, powers_of_two: bool) -> list[int] | range:
    if upper < 1:
        return [1]
    if powers_of_two:   # and the upper limit itself (an effective batch of 100 may run as one micro-batch)
        grid = [1 << k for k in range(int(math.log2(upper)) + 1)]
        return grid + [upper] if grid[-1] != upper else grid
    return range(1, upper + 1)


def _index_at_most(grid, x: int) -> int:
    lo, hi = 0, len(grid) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if grid[mid] <= x:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _secant_index(grid, seen: dict[int, int], budget: int, lo: int, hi: int) -> int:
    """The grid index where the line through the two evaluations nearest the budget crosses it, kept
    strictly inside (lo, hi) (callers have hi - lo > 1); the middle of the bracket when the line says
    nothing."""
    middle = (lo + hi) // 2
    points = sorted(seen.items(), key=lambda xb: abs(xb[1] - budget))[:2]
    if len(points) < 2:
        return middle
    (x1, b1), (x2, b2) = sorted(points)
    slope = (b2 - b1) / (x2 - x1) if x2 != x1 else 0.0
    if slope <= 0:
        return middle
    guess = x1 + (budget - b1) / slope
    i = _index_at_most(grid, max(1, int(guess)))
    # the line says the answer is at (or past) an end of the bracket: test the grid point next to that
    # end, which settles it in one evaluation when the line is right (memory is close to affine)
    return min(max(i, lo + 1), hi - 1)
