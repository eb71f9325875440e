"""Phases of a loss curve (fast descent, slow descent, plateau, rising) and the step each begins.

The measure is the slope of log-loss against log-step, ``d ln L / d ln t``, reported as the fraction
the loss drops per doubling of the steps. It is the same number for the same curve shape whatever the
loss scale, and a power law ``b·t^-c`` has the constant slope ``-c``. Where it is smaller, the drop is
counted as a share of what the run has gained so far instead (``progress_scale``): a loss levelling off near
zero still falls by a large share of itself per doubling, yet buys almost nothing once it is a hundredth of where it
started; but not where the loss itself still halves per doubling or faster (``gain_share_below_drop``). The slope is fitted to mean
ln-losses in bins uniform in log-step, over windows of fixed log-width, so the dense late part of a
log does not turn tiny wiggles into large slopes, with a standard error from the point-to-point
noise; a slope that noise could have made, or one from fewer than ``min_window_points`` points, is
"unsure" and takes the kind of its neighbours. Runs narrower than ``min_phase_log_width`` or
``min_phase_step_fraction`` merge into their neighbours; neighbours whose slopes differ by less than
``significant_z`` standard errors join; a phase's label goes the way its loss went (never "rising" where it
fell, nor on a rise within the noise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuwise.advise.smoothing import running_median

FAST, SLOW, PLATEAU, RISING = "fast_descent", "slow_descent", "plateau", "rising"
# A fast descent over a few noisy points that carries this share of the run's whole fall in ln-loss is a
# phase however narrow (a loss from 25 to 0.01 in 3 logged steps, then flat, was "flat since step 0").
FALL_SHARE_KEPT = 0.5


@dataclass(frozen=True)
class PhaseThresholds:
    """Drop of the loss per doubling of the steps (fractions: 0.1 = 10 %)."""

    fast_drop_per_doubling: float = 0.10
    plateau_drop_per_doubling: float = 0.01
    rise_per_doubling: float = 0.02
    window_log_width: float = 0.4     # ln-steps over which one slope is fitted (×1.5 in steps)
    min_phase_log_width: float = 0.15  # a phase spans at least ×1.16 in steps ...
    min_phase_step_fraction: float = 0.03  # ... and 3 % of the run (the first steps are wide in log-steps)
    n_bins: int = 100
    min_window_points: int = 8         # a slope from fewer logged points is never sure (its noise estimate is not)
    significant_z: float = 4.0         # slopes differing by less (standard errors) are one: ~0.05 over 100 bins
    # The share of what the run has gained is read only where the loss itself falls by less than this per
    # doubling: a loss that still halves (or more) with each doubling of the steps falls at least as fast as 1/t,
    # and the next doubling takes half of what is left; no one reads that as flat (a 40-step run falling 6 % a
    # step, 0.188 -> 0.123 over steps 34-40, 84 % per doubling, was "plateau: 0.8 % of what the run has gained").
    gain_share_below_drop: float = 0.5


NOT_FLAT_MARGIN = 1.0 + 1e-9   # a drop scaled to the plateau threshold itself reads as not flat, rounding aside


@dataclass(frozen=True)
class Phase:
    kind: str
    start_step: int
    end_step: int
    drop_per_doubling: float  # median over the phase; negative = rising

    def to_dict(self) -> dict:
        return {"kind": self.kind, "start_step": self.start_step, "end_step": self.end_step,
                "drop_per_doubling": round(self.drop_per_doubling, 5)}


def log_time(steps: np.ndarray) -> np.ndarray:
    """ln of a step count that starts at 1 (logs start at step 0 or 1; a resumed log keeps its steps)."""
    steps = np.asarray(steps, dtype=float)
    shift = 0.0 if steps.min() >= 1 else 1.0 - steps.min()
    return np.log(steps + shift)


def log_loss(trend: np.ndarray) -> np.ndarray:
    """ln L for positive losses; losses that reach zero or below are shifted by a small offset first."""
    if np.all(trend > 0):
        return np.log(trend)
    span = float(np.ptp(trend)) or 1.0
    return np.log(trend - trend.min() + 0.05 * span)


def log_bins(steps: np.ndarray, loss: np.ndarray, n_bins: int = 100) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean ln-loss in bins uniform in log-step: (ln-step centre, mean ln-loss, first step, count),
    non-empty bins only. Early bins hold one point each, late ones hundreds: every part of the run weighs
    by its share of log-time, and the counts say how much each bin's mean can be trusted."""
    lt, ly = log_time(steps), log_loss(loss)
    edges = np.linspace(lt[0], lt[-1], n_bins + 1)
    idx = np.clip(np.searchsorted(edges, lt, side="right") - 1, 0, n_bins - 1)
    counts_all = np.bincount(idx, minlength=n_bins)
    used = np.nonzero(counts_all)[0]
    counts = counts_all[used]
    centres = np.bincount(idx, weights=lt, minlength=n_bins)[used] / counts
    means = np.bincount(idx, weights=ly, minlength=n_bins)[used] / counts
    firsts = np.array([int(steps[np.argmax(idx == b)]) for b in used])
    return centres, means, firsts, counts


def _line_fit(centres: np.ndarray, log_y: np.ndarray, counts: np.ndarray, point_lt: np.ndarray,
              point_noise: np.ndarray, c: float, half: float, min_points: int = 0) -> tuple[float, float]:
    """(slope, standard error) of ln-loss vs ln-step over the bins within ±half of ``c`` (at least the 3
    nearest), weighted by points per bin; the error from the point noise in that window, infinite when the
    window holds fewer than ``min_points`` logged points (a noise measured on a handful of points can be a
    third of the real one: one window of six points 15 % apart came out "sure" of a rise)."""
    sel = np.abs(centres - c) <= half
    if sel.sum() < 3:
        sel = np.zeros(len(centres), dtype=bool)
        sel[np.argsort(np.abs(centres - c))[:3]] = True
    slope, se = _weighted_slope(centres[sel], log_y[sel], counts[sel], point_lt, point_noise)
    return slope, (se if counts[sel].sum() >= min_points else np.inf)


def _weighted_slope(x: np.ndarray, y: np.ndarray, counts: np.ndarray, point_lt: np.ndarray,
                    point_noise: np.ndarray) -> tuple[float, float]:
    """(slope, standard error) of bin means ``y`` against ``x``, each bin weighted by its points."""
    w = counts.astype(float)
    xm = float(np.sum(w * x) / np.sum(w))
    sxx = float(np.sum(w * (x - xm) ** 2))
    if len(x) < 2 or sxx <= 0:
        return 0.0, np.inf
    ym = float(np.sum(w * y) / np.sum(w))
    slope = float(np.sum(w * (x - xm) * (y - ym)) / sxx)
    near = point_noise[(point_lt >= x.min() - 1e-12) & (point_lt <= x.max() + 1e-12)]
    noise = float(np.median(near)) if len(near) else float(np.median(point_noise))
    return slope, noise / np.sqrt(sxx)


def local_drop_per_doubling(centres: np.ndarray, log_y: np.ndarray, counts: np.ndarray, point_lt: np.ndarray,
                            point_noise: np.ndarray, th: PhaseThresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop of the loss per doubling of the steps at each bin, with a ±3 standard-error range:
    (drop, low, high), over windows of ``th.window_log_width`` ln-steps. (A window that widens where the
    noise hides the sign was tried: it lent flat stretches the slope of the phases around them.)"""
    drop, low, high = (np.zeros(len(centres)) for _ in range(3))
    for i, c in enumerate(centres):
        slope, se = _line_fit(centres, log_y, counts, point_lt, point_noise, c, th.window_log_width / 2.0,
                              th.min_window_points)
        drop[i] = 1.0 - np.exp(slope * np.log(2.0))
        low[i] = 1.0 - np.exp((slope + 3.0 * se) * np.log(2.0)) if np.isfinite(se) else -np.inf
        high[i] = 1.0 - np.exp((slope - 3.0 * se) * np.log(2.0)) if np.isfinite(se) else np.inf
    return drop, low, high


def progress_scale(log_y: np.ndarray, drop: np.ndarray, head_bins: int = 3,
                   below_drop: float = PhaseThresholds.gain_share_below_drop,
                   sure_drop: np.ndarray | None = None) -> np.ndarray:
    """Per bin, the factor (<= 1) that turns "drop per doubling, as a share of the loss now" into "as a
    share of what the run has gained so far", wherever that is the smaller of the two (``progress_factor``).

    Why: a loss that levels off near zero (cross-entropy on data the model can learn: 2.3 -> 0.03 by step 350,
    0.014 by step 800) still falls by a large share of itself per doubling of the steps, a "fast descent" to the
    log-slope alone, while every further doubling buys under 1 % of the 2.3 the run has already gained: to
    whoever pays for the steps, that is a plateau, and it looks like one. A curve levelling off above zero has
    both measures small. Rises are left unscaled, and so is a loss sure to halve per doubling or faster (``sure_drop``:
    the low end of each bin's drop, so a window whose noise alone reads a steep fall keeps the gain's reading).
    """
    level = np.exp(log_y)
    head = np.maximum.accumulate(running_median(level, head_bins))   # the first bins hold single, noisy points
    return progress_factor(level, head, drop, below_drop, sure_drop)


def progress_factor(level: np.ndarray, head: np.ndarray | float, drop: np.ndarray,
                    below_drop: float = PhaseThresholds.gain_share_below_drop,
                    sure_drop: np.ndarray | None = None) -> np.ndarray:
    """The one home of the flatness measure's scale: the factor (<= 1) that turns ``drop`` (per doubling of the
    steps, as a share of the loss ``level``) into a share of what the run has gained so far (``head - level``,
    ``head`` the highest level the run started from) where that is the smaller share, unless the loss itself surely
    falls by ``below_drop`` or more per doubling (``sure_drop``, the drop's low end; ``drop`` itself when None);
    1 for a rise or no gain; for a loss still falling that fast, the share of the gain where that still reads as a
    descent, else just enough not to read as flat (a slow descent: the two measures disagree, neither says flat).
    The phases (``progress_scale``) and the forecast (``analysis.plateau_forecast_step``) both call it flat
    when the drop so measured is under ``PhaseThresholds.plateau_drop_per_doubling``."""
    level, drop = np.asarray(level, dtype=float), np.asarray(drop, dtype=float)
    sure = drop if sure_drop is None else np.asarray(sure_drop, dtype=float)
    gained = np.asarray(head, dtype=float) - level
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        share = np.where((gained > 0) & (drop > 0), level / gained, 1.0)
        # a loss sure to halve per doubling is never flat, whatever share of the gain it buys: at least a slow
        # descent (its drop scaled no lower than the plateau threshold), not a fast one by its own log-slope
        not_flat = np.minimum(1.0, PhaseThresholds.plateau_drop_per_doubling * NOT_FLAT_MARGIN / drop)
        factor = np.where(sure < below_drop, share, np.maximum(share, not_flat))
    return np.clip(np.nan_to_num(factor, nan=1.0, posinf=1.0), 0.0, 1.0)


def head_level(steps: np.ndarray, loss: np.ndarray, n_bins: int = 100, head_bins: int = 3) -> float | None:
    """The level the run has gained from (``progress_scale``'s ``head`` at the last bin): the highest running
    median of 3 log-step bins' mean losses; None for a loss that reaches zero or below (its ln is shifted)."""
    loss = np.asarray(loss, dtype=float)
    if len(loss) < 2 or not np.all(loss > 0):
        return None
    _, log_y, _, _ = log_bins(np.asarray(steps), loss, n_bins)
    return float(np.max(running_median(np.exp(log_y), head_bins)))


def loss_drop_per_doubling(steps: np.ndarray, trend: np.ndarray, start_step: int, end_step: int) -> float:
    """The loss's own drop per doubling of the steps from ``start_step`` to ``end_step`` (its trend at both ends, as
    a share of the loss: no ``progress_factor``); 0 for a span under one step or a trend not above zero."""
    lt = log_time(np.asarray(steps, dtype=float))
    i0, i1 = (int(np.clip(np.searchsorted(steps, s), 0, len(steps) - 1)) for s in (start_step, end_step))
    width, y0, y1 = float(lt[i1] - lt[i0]), float(trend[i0]), float(trend[i1])
    if width <= 0 or y0 <= 0 or y1 <= 0:
        return 0.0
    return float(1.0 - np.exp(np.log(y1 / y0) / width * np.log(2.0)))


def point_noise_log(loss: np.ndarray, min_points: int = 9) -> np.ndarray:
    """Noise of each point's ln-loss from differences of neighbours (which cancel a slow trend):
    robust std of the differences in a window of ``min_points`` around the point (moved inwards at the ends,
    so it always holds ``min_points`` of them where the curve has that many), divided by √2. (Padding the
    ends with copies of the last difference made the noise there 0: a 15-point log's last three points were
    "sure" of a 15 % rise that was noise.)"""
    ly = log_loss(loss)
    d = np.diff(ly)
    if len(d) == 0:
        return np.zeros(len(ly))
    width = min(2 * (min_points // 2) + 1, len(d))
    windows = np.lib.stride_tricks.sliding_window_view(d, width)
    starts = np.clip(np.arange(len(ly)) - width // 2, 0, len(windows) - 1)
    windows = windows[starts]
    med = np.median(windows, axis=1, keepdims=True)
    return 1.4826 * np.median(np.abs(windows - med), axis=1) / np.sqrt(2.0)


def classify(drop: float, low: float, high: float, th: PhaseThresholds) -> str | None:
    """The kind the estimate says; None (unsure) when it says falling or rising but its ±3 SE range holds
    zero, or flat but its range reaches a fast descent: a noisy flat stretch must not flicker between
    slow descent and rising, and a noisy descent must not be called a plateau. Unsure bins take the kind of their nearest sure neighbour."""
    kind = kind_of(drop, th)
    if kind == PLATEAU:
        # flat, unless the noise leaves room for a fast descent (a few noisy early points)
        return PLATEAU if high < th.fast_drop_per_doubling else None
    if low <= 0.0 <= high:
        return None
    return kind


def kind_of(drop: float, th: PhaseThresholds) -> str:
    """The documented rule, the one home of the thresholds: a drop per doubling of the steps of at least
    10 % is a fast descent, of at least 1 % a slow one, of -2 % or less (a rise of 2 %) rising, else plateau."""
    if drop >= th.fast_drop_per_doubling:
        return FAST
    if drop >= th.plateau_drop_per_doubling:
        return SLOW
    if drop <= -th.rise_per_doubling:
        return RISING
    return PLATEAU


def fill_unsure(kinds: list[str | None]) -> list[str]:
    """Each None takes the nearest sure kind (the earlier one on a tie); all unsure -> plateau."""
    sure = [i for i, k in enumerate(kinds) if k is not None]
    if not sure:
        return [PLATEAU] * len(kinds)
    out = []
    for i, k in enumerate(kinds):
        if k is None:
            j = min(sure, key=lambda s: (abs(s - i), s))
            k = kinds[j]
        out.append(k)
    return out


def detect_phases(steps: np.ndarray, loss: np.ndarray, th: PhaseThresholds = PhaseThresholds()) -> list[Phase]:
    """Phases of a finite (raw, noisy) curve, in order; the first starts at the first step."""
    steps = np.asarray(steps)
    if len(steps) < 5:
        return [Phase(PLATEAU, int(steps[0]), int(steps[-1]), 0.0)] if len(steps) else []
    loss = np.asarray(loss, dtype=float)
    centres, log_y, firsts, counts = log_bins(steps, loss, th.n_bins)
    drop, low, high = local_drop_per_doubling(centres, log_y, counts, log_time(steps), point_noise_log(loss), th)
    scale = progress_scale(log_y, drop, below_drop=th.gain_share_below_drop, sure_drop=low)
    drop, low, high = (d * scale for d in (drop, low, high))
    classified = [classify(d, lo, hi, th) for d, lo, hi in zip(drop, low, high)]
    sure = np.array([k is not None for k in classified])
    kinds = fill_unsure(classified)
    span = float(steps[-1] - steps[0]) or 1.0
    plunge = _leading_plunge(log_y, firsts, float(np.median(point_noise_log(loss))), span, sure, kinds, th)
    kinds[:plunge] = [FAST] * plunge
    if plunge:   # its rate is the whole fall over its ln-steps, not the noisy windows' median
        fall_slope = (log_y[plunge] - np.max(log_y[:plunge])) / max(centres[plunge] - centres[0], 1e-9)
        drop[:plunge] = 1.0 - np.exp(fall_slope * np.log(2.0))
        sure[:plunge] = True
    runs = _runs(kinds)
    # a run's extent, in ln-steps and as a share of all steps, up to where the next run begins: both from the
    # steps the table prints (each bin's first step; the first shifts log_time as all the steps do), not from the
    # bins' mean ln-step, which lies inside a bin of many points (41-47 read as x1.17, printed x1.15)
    bounds_step = np.append(firsts, steps[-1]).astype(float)
    bounds_lt = log_time(bounds_step)

    # How far the ln-loss fell over the whole run: a descent that carries most of it is the run's
    # learning however few steps it took, and must not fold into the plateau after it.
    whole_fall = float(np.max(log_y[:3]) - np.min(log_y))

    def carries_the_fall(kind: str, i0: int, i1: int) -> bool:
        # the fall across the run itself: from its first bin (or the one before, where it starts falling) to its
        # last (or the one after). Measured from the run's highest point before to its lowest after, a one-bin
        # "fast descent" half-way down a noisy decay "carried" the fall of the whole curve and kept a 4-step phase.
        if kind != FAST or whole_fall <= 0:
            return False
        before = float(np.max(log_y[max(i0 - 1, 0): i0 + 1]))
        after = float(np.min(log_y[i1: i1 + 2]))
        return before - after >= FALL_SHARE_KEPT * whole_fall

    def wide_enough(kind: str, i0: int, i1: int) -> bool:
        # A fast descent at the start is held to its width in log-steps only: over the first 2 % of the
        # steps it is most of what a run learns, and must not fold into the plateau after it. (The run's
        # kind, not its first bin's: a noisy first bin merged into a descent is part of it.)
        first_fast = i0 == 0 and kind == FAST
        if carries_the_fall(kind, i0, i1):
            return True
        return (bounds_lt[i1 + 1] - bounds_lt[i0] >= th.min_phase_log_width
                and (first_fast or (bounds_step[i1 + 1] - bounds_step[i0]) / span >= th.min_phase_step_fraction))

    runs = _merge_short(runs, wide_enough)
    # Each phase is named by the number the table prints (its median drop per doubling): the bins' kinds,
    # the unsure ones filled from their neighbours and the narrow runs merged, can leave a phase whose median
    # says otherwise (a "rising" phase falling 2.6 % per doubling, a "plateau" falling 1.4 %).
    for _ in range(5):
        relabelled = _named_by_median(runs, drop, sure, th, wide_enough)
        if relabelled == runs:
            break
        runs = _merge_short(relabelled, wide_enough)
    runs = _named_by_median(runs, drop, sure, th, wide_enough)
    point_lt, noise_lt = log_time(steps), point_noise_log(loss)

    def measured(i0: int, i1: int) -> tuple[float, float]:
        # the run's own change: one line through all its bins, with its standard error
        return _weighted_slope(centres[i0:i1 + 1], log_y[i0:i1 + 1], counts[i0:i1 + 1], point_lt, noise_lt)

    def kept(kind: str, i0: int, i1: int) -> bool:
        return bool(plunge and i0 == 0) or carries_the_fall(kind, i0, i1)

    runs = _named_by_median(_join_alike(runs, measured, kept, th), drop, sure, th, lambda *_: False)
    runs = _split_at_turn(runs, log_y, measured, kept, th)
    labelled = _measured_labels(runs, drop, sure, measured, kept, th)
    phases = []
    for k, (kind, i0, i1, number) in enumerate(labelled):
        start = int(steps[0]) if k == 0 else int(firsts[i0])
        end = int(steps[-1]) if k == len(labelled) - 1 else int(firsts[labelled[k + 1][1]])
        phases.append(Phase(kind, start, end, number))
    return phases


def _split_at_turn(runs: list[tuple[str, int, int]], log_y: np.ndarray, measured, kept,
                   th: PhaseThresholds) -> list[tuple[str, int, int]]:
    """A run named rising whose loss fell over it as a whole fell first and then rose: split at its lowest bin
    into a descent and the rise, when the line through each side is sure of its sign (``th.significant_z``
    standard errors) and the rise is one (at least ``th.rise_per_doubling``). Without this, such a run took the
    name of its overall fall: a sparse eval loss, down from 2.5 to 1.24 by step 800 and up to 1.6 by step 2,900,
    where only the late windows held enough points to be sure (all rising, the unsure early ones filled from
    them), read as one "slow descent" over the whole run."""
    out: list[tuple[str, int, int]] = []
    for kind, i0, i1 in runs:
        b = i0 + int(np.argmin(log_y[i0:i1 + 1]))
        if kind != RISING or kept(kind, i0, i1) or measured(i0, i1)[0] >= 0 or b - i0 < 2 or i1 - b < 2:
            out.append((kind, i0, i1))
            continue
        (s_left, e_left), (s_right, e_right) = measured(i0, b), measured(b, i1)
        falls = np.isfinite(e_left) and s_left < -th.significant_z * e_left
        rises = np.isfinite(e_right) and s_right > th.significant_z * e_right
        if falls and rises and kind_of(float(1.0 - np.exp(s_right * np.log(2.0))), th) == RISING:
            out += [(kind_of(float(1.0 - np.exp(s_left * np.log(2.0))), th), i0, b - 1), (RISING, b, i1)]
        else:
            out.append((kind, i0, i1))
    return out


def _join_alike(runs: list[tuple[str, int, int]], measured, kept, th: PhaseThresholds) -> list[tuple[str, int, int]]:
    """Joins, closest first, neighbouring runs whose measured slopes (``measured``: one line through each run's
    bins) differ by less than ``th.significant_z`` standard errors: noise, not a change of regime (a power law
    with 1 % noise hovering at the plateau threshold flipped between slow descent and plateau 8 times). Runs
    ``kept`` (a plunge that carries the run's fall) stay apart. The joined run keeps its first kind; the caller
    names it by its number."""
    runs = list(runs)
    while len(runs) > 1:
        fits = [measured(i0, i1) for _, i0, i1 in runs]
        best, best_z = None, th.significant_z
        for j in range(len(runs) - 1):
            if kept(*runs[j]) or kept(*runs[j + 1]):
                continue
            (s1, e1), (s2, e2) = fits[j], fits[j + 1]
            z = abs(s1 - s2) / np.hypot(e1, e2) if np.isfinite(e1) and np.isfinite(e2) else 0.0
            if z < best_z:
                best, best_z = j, z
        if best is None:
            break
        runs[best] = (runs[best][0], runs[best][1], runs[best + 1][2])
        del runs[best + 1]
    return runs


def _measured_labels(runs: list[tuple[str, int, int]], drop: np.ndarray, sure: np.ndarray, measured, kept,
                     th: PhaseThresholds) -> list[tuple[str, int, int, float]]:
    """(kind, first bin, last bin, drop per doubling) of each run, its kind always the one its number names.

    The number is the median of the run's bins' slopes (``phase_drop``), unless the loss went the other way over
    the run (one line through all its bins, ``measured``): then the run is named from that change. A rise within
    the noise has no phase of its own: it joins the neighbour whose slope is closest. So never "rising" where the
    loss fell (the median of a few noisy windows said "up ×2.5" over a stretch whose loss fell from 1.6 to 1.2),
    nor where a rise is one noise could make (the last 3 points of a 15-point log "rising 14.6 %"). Runs ``kept``
    (a plunge: its fall lies at its end, not inside it) keep the kind their number names."""
    spans = [(i0, i1) for _, i0, i1 in runs]
    while True:
        labels = [_label(i0, i1, drop, sure, measured, kept, th) for i0, i1 in spans]
        lone = [j for j, (_, _, alone) in enumerate(labels) if alone]
        if lone and len(spans) > 1:
            j = lone[0]
            slope = measured(*spans[j])[0]
            near = [n for n in (j - 1, j + 1) if 0 <= n < len(spans)]
            n = min(near, key=lambda n: abs(measured(*spans[n])[0] - slope))
            spans[min(j, n)] = (spans[min(j, n)][0], spans[max(j, n)][1])
            del spans[max(j, n)]
            continue
        joined: list[tuple[int, int]] = []
        previous = None
        for (i0, i1), (kind, _, _) in zip(spans, labels):
            if joined and kind == previous:
                joined[-1] = (joined[-1][0], i1)
            else:
                joined.append((i0, i1))
            previous = kind
        if len(joined) == len(spans):
            return [(kind, i0, i1, number) for (i0, i1), (kind, number, _) in zip(spans, labels)]
        spans = joined


def _label(i0: int, i1: int, drop: np.ndarray, sure: np.ndarray, measured, kept,
           th: PhaseThresholds) -> tuple[str, float, bool]:
    """(kind, drop per doubling, whether it is a rise within the noise: no phase of its own) of bins i0..i1."""
    number = phase_drop(drop[i0:i1 + 1], sure[i0:i1 + 1])
    kind = kind_of(number, th)
    if kept(kind, i0, i1):
        return kind, number, False
    slope, se = measured(i0, i1)
    change = float(1.0 - np.exp(slope * np.log(2.0)))
    up = change < 0
    significant = bool(np.isfinite(se) and abs(slope) > th.significant_z * se)
    if (kind == RISING and up and significant) or (kind != RISING and not up) \
            or (kind == PLATEAU and not (significant and kind_of(change, th) == RISING)):
        return kind, number, False          # the number goes the way the loss went
    if not up or significant or kind_of(change, th) == PLATEAU:
        return kind_of(change, th), change, False
    # a rise noise could make: a plateau, its number clamped into the plateau band (the most a plateau rises),
    # so a phase left alone (nothing to join) never reads "plateau" beside a rising number
    return PLATEAU, float(max(change, np.nextafter(-th.rise_per_doubling, 0.0))), True


def _leading_plunge(log_y: np.ndarray, firsts: np.ndarray, noise_log: float, span: float, sure: np.ndarray,
                    kinds: list[str], th: PhaseThresholds) -> int:
    """The bins of a fall at the start too quick, too sparsely logged or too noisy for the slope windows: a few
    points that carry the run's fall in ln-loss, far above the noise, to within a tenth of it of the level the run
    then keeps (the loss never climbs half-way back). 0 where there is none, or where the fall can be read from its
    slopes: it spans ``th.min_phase_step_fraction`` of the steps or more, and some window over it is ``sure`` or
    its bins' ``kinds`` (the unsure ones filled from their neighbours) are not all plateau. Steps alone were the
    wrong measure: a fall from 2.8 to 0.8 logged every 10 steps, 10 points over the first 5 % of the steps, had no
    window of ``th.min_window_points`` points, each took the kind of the plateau after it, and the table said
    "plateau from step 0". (A fall filled as a rise is left to ``_split_at_turn``, which ends it at its lowest
    point, not a tenth above the level after it.)"""
    if len(log_y) < 4:
        return 0
    floor = float(np.median(log_y[len(log_y) // 2:]))
    fall = float(np.max(log_y[:3])) - floor
    if fall <= 6.0 * noise_log:
        return 0
    highest_after = np.maximum.accumulate(log_y[::-1])[::-1]
    flat = np.nonzero((highest_after <= floor + 0.5 * fall) & (log_y <= floor + 0.1 * fall))[0]
    if not len(flat) or flat[0] == 0:
        return 0
    b = int(flat[0])
    quick = (firsts[b] - firsts[0]) / span < th.min_phase_step_fraction
    read_as_flat = not sure[:b].any() and all(k == PLATEAU for k in kinds[:b])
    return b if quick or read_as_flat else 0


def phase_drop(drop: np.ndarray, sure: np.ndarray) -> float:
    """A phase's drop per doubling: the median over its bins whose slope is sure (an unsure bin's slope is one
    noise could have made: it takes its kind from its neighbours and has no say in their number); over all
    its bins when none is sure."""
    return float(np.median(drop[sure] if sure.any() else drop))


def _named_by_median(runs: list[tuple[str, int, int]], drop: np.ndarray, sure: np.ndarray, th: PhaseThresholds,
                     wide_enough) -> list[tuple[str, int, int]]:
    """Each run named by ``kind_of`` its drop (``phase_drop``). A run whose drop names another kind than it had is
    split in two where the drop changes most clearly (the split that leaves the least absolute deviation from
    each side's median), when both sides are wide enough and of different kinds: a descent that goes flat
    half-way stays a descent then a plateau, not one slow descent. Neighbours of one kind then join (the
    median of two joined runs lies between theirs, so the joined name still holds)."""
    def named(i0: int, i1: int) -> tuple[str, float]:
        d = phase_drop(drop[i0:i1 + 1], sure[i0:i1 + 1])
        return kind_of(d, th), d

    def spread(i0: int, i1: int, centre: float) -> float:
        return float(np.abs(drop[i0:i1 + 1] - centre).sum())

    out: list[tuple[str, int, int]] = []
    for kind, i0, i1 in runs:
        kind_now, _ = named(i0, i1)
        if kind_now == kind or i1 - i0 < 3:
            out.append((kind_now, i0, i1))
            continue
        best, best_cost = None, np.inf
        for b in range(i0 + 2, i1):
            (kl, dl), (kr, dr) = named(i0, b - 1), named(b, i1)
            if kl == kr or not (wide_enough(kl, i0, b - 1) and wide_enough(kr, b, i1)):
                continue
            cost = spread(i0, b - 1, dl) + spread(b, i1, dr)
            if cost < best_cost:
                best, best_cost = [(kl, i0, b - 1), (kr, b, i1)], cost
        out += best or [(kind_now, i0, i1)]
    return _join_equal(out)


def _runs(kinds: list[str]) -> list[tuple[str, int, int]]:
    runs: list[tuple[str, int, int]] = []
    for i, k in enumerate(kinds):
        if runs and runs[-1][0] == k:
            runs[-1] = (k, runs[-1][1], i)
        else:
            runs.append((k, i, i))
    return runs


def _merge_short(runs: list[tuple[str, int, int]], wide_enough) -> list[tuple[str, int, int]]:
    """Folds the narrowest run that is not ``wide_enough`` into a neighbour, until none is left.

    The neighbour is the one whose kind is closer (fast/slow/plateau/rising are ordered), so a blip of
    'plateau' inside a slow descent becomes slow descent, not fast."""
    order = {FAST: 0, SLOW: 1, PLATEAU: 2, RISING: 3}
    runs = list(runs)
    while len(runs) > 1:
        narrow = [j for j, (kind, i0, i1) in enumerate(runs) if not wide_enough(kind, i0, i1)]
        if not narrow:
            break
        j = min(narrow, key=lambda j: runs[j][2] - runs[j][1])
        kind, i0, i1 = runs[j]
        if j == 0:
            n = 1
        elif j == len(runs) - 1:
            n = j - 1
        else:
            left, right = runs[j - 1], runs[j + 1]
            n = j - 1 if abs(order[left[0]] - order[kind]) <= abs(order[right[0]] - order[kind]) else j + 1
        nk, n0, n1 = runs[n]
        runs[n] = (nk, min(n0, i0), max(n1, i1))
        del runs[j]
        runs = _join_equal(runs)
    return runs


def _join_equal(runs: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Neighbouring runs of one kind joined into one."""
    merged: list[tuple[str, int, int]] = []
    for r in runs:
        if merged and merged[-1][0] == r[0]:
            merged[-1] = (r[0], merged[-1][1], r[2])
        else:
            merged.append(r)
    return merged
