"""The one answer to "does it fit?": one rule, one meaning of headroom, one largest-batch search.

Headroom is a share of the GPU's memory **as the driver reports it** (``GPU.visible_memory_bytes``:
15360 MiB on a 16 GiB T4), kept free for fragmentation and drift. The same number means the same
thing on every command: ``estimate``, ``recommend``, ``report`` and ``advise``. A job fits when the
memory nvidia-smi would show for it at its peak (``total_bytes``) is at most the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gpuwise.plan.errors import PlanError

if TYPE_CHECKING:
    from gpuwise.catalog.model import GPU

DEFAULT_HEADROOM_FRACTION = 0.05
# Batches under a largest-batch answer that are checked too (``largest_fitting``'s ``below``): predicted
# memory steps back between neighbouring batches by the allocator's rounding (ViT-B/16 on an RTX 4090:
# up to 4 batches above one that does not fit), so "b fits, b + 1 does not" alone may sit above a tight one.
CHECKED_BELOW = 4


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


def usable_bytes(gpu: GPU, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """What a job may plan to use on ``gpu``: the memory the driver reports, less the headroom."""
    return usable_of(gpu.visible_memory_bytes, headroom_fraction)


def usable_of(visible_memory_bytes: int, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """The same for a GPU known by the memory the driver reports (a quote's ``gpu_memory_bytes``)."""
    return int(visible_memory_bytes * (1.0 - headroom_fraction))


def fits(total_bytes: int, gpu: GPU, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> bool:
    """The fit rule: nvidia-smi's figure at the peak within the GPU's usable memory."""
    return total_bytes <= usable_bytes(gpu, headroom_fraction)


def spare_bytes(total_bytes: int, gpu: GPU, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """Usable memory left at the peak (negative: short by that much)."""
    return usable_bytes(gpu, headroom_fraction) - total_bytes


def largest_fitting(
    total_bytes_of: Callable[[int], int], budget_bytes: int, *, upper: int = 0, powers_of_two: bool = False,
    grid: Sequence[int] | None = None, below: int = 0, max_evaluations: int = 40,
) -> int:
    """The largest x of the grid (every integer in [1, upper] by default) with ``total_bytes_of(x) <=
    budget_bytes``, searched as if memory grew with x; 0 when the first does not fit. The answer was
    evaluated: it fits (and, within ``max_evaluations``, the next grid value does not).

    ``total_bytes_of`` is close to affine (memory against batch or context), so the line through two
    evaluations guesses the answer and each verified guess narrows the bracket; where the line does not
    help, the bracket is halved. ``powers_of_two`` searches 1, 2, 4, … and ``upper`` only (each evaluation
    of a traced model is a trace: a small grid shared across GPUs keeps them few); ``grid`` (ascending, from
    1) searches those values instead (the micro-batches that divide a batch).

    Memory is not strictly monotone in the batch: the caching allocator rounds blocks and segments, so a
    batch may need a little less than a smaller one (ViT-B/16 on an RTX 4090: ±0.3 GiB around a trend of
    0.07 GiB a sample; 310 fits where 306-309 do not). A search that assumes it grows finds *a* boundary,
    which may sit a few values above one that does not fit. ``below`` = k checks the k values under the
    boundary found and, where one does not fit, searches under that one: the answer is then the largest x
    with every value up to it fitting, wherever memory steps back over at most k values (further under a
    fitting value it is taken to be lower). A larger x that fits again past values that do not is not
    looked for: it fits by the allocator's rounding, by less than the estimate's own step between
    neighbours, and the smaller batches of a run (an epoch's last) would not fit.
    """
    grid = list(grid) if grid is not None else _grid(upper, powers_of_two)
    seen: dict[int, int] = {}        # grid index -> bytes

    def value(i: int) -> int:
        if i not in seen:
            seen[i] = total_bytes_of(grid[i])
        return seen[i]

    if value(0) > budget_bytes:
        return 0
    lo, hi = 0, len(grid)            # grid[lo] fits; grid[hi] (if any) does not
    probe = min(_index_at_most(grid, 8), len(grid) - 1)
    if probe > lo:
        lo, hi = (probe, hi) if value(probe) <= budget_bytes else (lo, probe)
    while True:
        bisect = False   # after a guess that did not halve the bracket, halve it once (bounded work)
        while hi - lo > 1 and len(seen) < max_evaluations:
            width = hi - lo
            i = (lo + hi) // 2 if bisect else _secant_index(grid, seen, budget_bytes, lo, hi)
            if value(i) <= budget_bytes:
                lo = i
            else:
                hi = i
            bisect = not bisect and (hi - lo) * 2 > width
        # the values just under the answer, lowest first: the first that does not fit bounds the answer
        short = None
        for j in range(max(lo - below, 1), lo):
            if j not in seen and len(seen) >= max_evaluations:
                continue
            if value(j) > budget_bytes:
                short = j
                break
        if short is None:
            return grid[lo]
        hi = short
        lo = max(i for i, b in seen.items() if i < short and b <= budget_bytes)


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
    strictly inside (lo, hi) (callers have hi - lo > 1). Where those two slope the wrong way (the
    allocator's rounding: a batch needing a little less than a smaller one), the line through the
    bracket's ends; the middle of the bracket when no line says anything."""
    middle = (lo + hi) // 2
    points = sorted(((grid[i], b) for i, b in seen.items()), key=lambda xb: abs(xb[1] - budget))[:2]
    if len(points) < 2:
        return middle
    (x1, b1), (x2, b2) = sorted(points)
    if b2 < b1 and hi < len(grid) and lo in seen and hi in seen:
        (x1, b1), (x2, b2) = (grid[lo], seen[lo]), (grid[hi], seen[hi])
    slope = (b2 - b1) / (x2 - x1) if x2 != x1 else 0.0
    if slope <= 0:
        return middle
    guess = x1 + (budget - b1) / slope
    i = _index_at_most(grid, max(1, int(guess)))
    # the line says the answer is at (or past) an end of the bracket: test the grid point next to that
    # end, which settles it in one evaluation when the line is right (memory is close to affine)
    return min(max(i, lo + 1), hi - 1)
