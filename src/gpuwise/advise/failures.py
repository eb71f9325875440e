"""What went wrong in a run, read from its loss: NaN/inf losses (skipped steps, or the end of the run), the step
where the loss turned upwards for good (divergence), and a loss that never fell (not learning)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gpuwise.advise.data import SKIPPED_LISTED, Curve, NonFiniteTally
from gpuwise.advise.phases import RISING, Phase, log_time
from gpuwise.advise.smoothing import running_median


def nonfinite_end_step(steps: np.ndarray, loss: np.ndarray) -> int | None:
    """The first step of the NaN/inf losses a log ends on (the run never recovered: it diverged), else None.

    A non-finite loss followed by finite ones is not a divergence: with fp16 the loss scaler skips a step
    whose gradients overflow and the run goes on (``skipped_nonfinite_steps``)."""
    finite = np.isfinite(loss)
    if not len(finite) or finite[-1]:
        return None
    last_finite = np.nonzero(finite)[0]
    return int(steps[last_finite[-1] + 1]) if len(last_finite) else int(steps[0])


def skipped_nonfinite_steps(steps: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """The steps of NaN/inf losses that finite losses follow: steps the run skipped and recovered from."""
    end = nonfinite_end_step(steps, loss)
    bad = ~np.isfinite(loss)
    if end is not None:
        bad &= steps < end
    return np.asarray(steps)[bad]


def nonfinite_tally(steps: np.ndarray, loss: np.ndarray) -> NonFiniteTally:
    """The ``NonFiniteTally`` of a curve's points (one per step, by step)."""
    skipped = skipped_nonfinite_steps(steps, loss)
    return NonFiniteTally(nan_step=nonfinite_end_step(steps, loss), skipped_count=len(skipped),
                          skipped_steps=skipped[:SKIPPED_LISTED])


def nonfinite_of(curve: Curve) -> NonFiniteTally:
    """The NaN/inf losses of a curve: of its points, or, for a curve thinned on read, the reader's tally of every row."""
    return curve.nonfinite if curve.nonfinite is not None else nonfinite_tally(curve.steps, curve.loss)


def _lowest(kept: list[int], steps: Iterable[int]) -> list[int]:
    """``kept`` (ascending, distinct, at most ``SKIPPED_LISTED``) with ``steps`` among them where low enough."""
    new = [s for s in steps if s not in kept and (len(kept) < SKIPPED_LISTED or s < kept[-1])]
    return sorted({*kept, *new})[:SKIPPED_LISTED] if new else kept


def _below(kept: list[int], count: int, step: int) -> tuple[list[int], int]:
    """(``kept``, ``count``) of some NaN/inf losses less those at or above ``step``; ``kept`` holds the lowest
    ``count`` steps, or ``SKIPPED_LISTED`` of them: the count is exact unless every kept step is below ``step``
    while some are not kept (those are then taken to be below too)."""
    below = [s for s in kept if s < step]
    return below, (len(below) if len(below) < len(kept) or count == len(kept) else count)


class NonFiniteCounter:
    """Counts the NaN/inf losses of a log's rows as they are read, in memory that does not grow with the rows
    (counts and at most ``SKIPPED_LISTED`` steps of each kind: a 50-million-row log that is mostly NaN is not
    a set of 50 million steps), to the ``NonFiniteTally`` ``nonfinite_tally`` gives for one point per step.

    Rows whose steps never go back (a step logged again in a row included: its latest loss counts) give exactly
    that tally. A row whose step goes back is a resumed run re-doing the steps from there: the NaN/inf losses
    counted at and above its step are dropped (exactly when at most ``SKIPPED_LISTED`` were counted or the step
    is at or below the highest of those listed), and the rows go on from it. Where the resumed run stops short
    of the first attempt's last step, the first attempt's rows above it no longer count: the log ends where the
    resumed run does (one point per step keeps their latest losses: those rows stay in the thinned curve).
    """

    def __init__(self) -> None:
        self._skipped_count = 0
        self._skipped_steps: list[int] = []        # the lowest, ascending
        self._run_count = 0                        # NaN/inf losses since the last finite one
        self._run_steps: list[int] = []            # their lowest steps, ascending
        self._last: tuple[int, bool] | None = None   # (step, finite) of the row before
        # skipped and run as they were before the last finite row: restored when a NaN/inf loss replaces it
        self._before_finite: tuple[int, list[int], int, list[int]] = (0, [], 0, [])

    def add(self, step: int, finite: bool) -> None:
        if self._last is not None and step < self._last[0]:   # a resumed run re-doing steps from ``step``
            self._skipped_steps, self._skipped_count = _below(self._skipped_steps, self._skipped_count, step)
            self._run_steps, self._run_count = _below(self._run_steps, self._run_count, step)
        same_step = self._last is not None and self._last[0] == step
        if finite:
            if same_step and not self._last[1]:   # the NaN/inf loss just logged at this step, logged again finite
                self._run_count -= 1
                self._run_steps = [s for s in self._run_steps if s != step]
            if not (same_step and self._last[1]):   # a finite loss logged again changes nothing
                self._before_finite = (self._skipped_count, self._skipped_steps, self._run_count, self._run_steps)
                if self._run_count:
                    self._skipped_count += self._run_count
                    self._skipped_steps = _lowest(self._skipped_steps, self._run_steps)
                    self._run_count, self._run_steps = 0, []
        elif not same_step or self._last[1]:   # (a NaN/inf loss logged again in a row is one loss)
            if same_step:   # the finite loss just logged at this step, logged again NaN/inf: as if never logged
                self._skipped_count, self._skipped_steps, self._run_count, self._run_steps = self._before_finite
            self._run_count += 1
            self._run_steps = _lowest(self._run_steps, (step,))
        self._last = (step, finite)

    def tally(self) -> NonFiniteTally:
        return NonFiniteTally(nan_step=self._run_steps[0] if self._run_count else None,
                              skipped_count=self._skipped_count, skipped_steps=np.array(self._skipped_steps))


def with_rise_from(phases: list[Phase], step: int | None) -> list[Phase]:
    """The last phase, when rising, starts at ``step`` (the divergence step: the trend's best point), so the
    table and the diagnosis give one step for the turn; the bins of the slope windows put it only roughly."""
    if step is None or len(phases) < 2 or phases[-1].kind != RISING or not phases[-2].start_step < step < phases[-1].end_step:
        return phases
    prev, last = phases[-2], phases[-1]
    return [*phases[:-2], Phase(prev.kind, prev.start_step, step, prev.drop_per_doubling),
            Phase(last.kind, step, last.end_step, last.drop_per_doubling)]


RUNAWAY_RISE_PER_DOUBLING = 0.5   # a divergence climbs by at least half the best loss per doubling of the steps


def divergence_step(steps: np.ndarray, loss: np.ndarray, trend: np.ndarray, noise_abs: float,
                    span_points: float = 5.0) -> int | None:
    """The step where the loss turned upwards for good, or None.

    Diverged means: the recent loss (median of the last 2 %, at least 5 points: an EMA lags behind a
    run-away loss) stands above the trend's minimum by more than 3 noise stds, by more than a quarter
    of what the run had gained before the minimum, and by 10 % of the loss; and it ran away: from the step
    returned to where it stood half the rise higher, it climbed by at least ``RUNAWAY_RISE_PER_DOUBLING`` (half) of the best loss per
    doubling of the steps. A slower climb (an eval loss rising 30 % over two doublings as the model overfits,
    14 % per doubling) is a rising phase, not a divergence: a run-away loss multiplies within a fraction of a
    doubling (a loss growing 5 % a step rises ×100 in 100 steps). The pace is the climb's own, to half the rise:
    a loss that jumps and stays up diverged, however long the log goes on after the jump. The step returned is the
    last point the run was at its best, the checkpoint to go back to: the lowest running median of the
    raw losses (over the trend's span in points, 5 to 101) from the trend's minimum on. The trend's own
    minimum comes too early: a zero-phase EMA runs backward as well, and carries the blow-up back in time
    (a run turning up at step 16,000 had its trend lowest at step 14,400)."""
    n = len(trend)
    if n < 10:
        return None
    i_min = int(np.argmin(trend))
    k = max(5, n // 50)
    if i_min >= n - k:
        return None
    low = float(trend[i_min])
    gained = float(trend[0]) - low
    rise = float(np.median(loss[-k:])) - low
    if rise <= max(3.0 * noise_abs, 0.25 * gained, 0.1 * abs(low)):
        return None
    width = int(np.clip(span_points, 5, 101))
    tail = running_median(loss[max(0, i_min - width):], width)[i_min - max(0, i_min - width):]
    # The latest point as low as the lowest (within one standard error of a median of ``width`` points) before the
    # climb: on a flat stretch the noise, not the run, picks which point is lowest.
    best = int(np.argmin(tail))
    up = np.nonzero(tail[best:] > tail[best] + 0.5 * rise)[0]
    before_climb = tail[best: best + (int(up[0]) if len(up) else len(tail))]
    as_low = np.nonzero(before_climb <= tail[best] + 1.2533 * noise_abs / np.sqrt(width))[0]
    at = i_min + best + int(as_low[-1])
    # the pace of the climb itself, from the last good point to where the loss first stood half the rise higher
    # (to the log's end where it never did): a jump that stays up is a run-away however long the log goes on
    climb_end, climbed = (i_min + best + int(up[0]), 0.5 * rise) if len(up) else (n - 1, rise)
    lt = log_time(steps)
    doublings = max(float(lt[climb_end] - lt[at]) / np.log(2.0), 1e-12)
    if climbed / doublings < RUNAWAY_RISE_PER_DOUBLING * abs(low):
        return None
    return int(steps[at])


def made_progress(trend: np.ndarray, noise_abs: float, min_relative_drop: float = 0.03) -> bool:
    """False when the trend never fell clearly below where it started (the 'not learning' case)."""
    if len(trend) < 5:
        return True
    head = float(np.median(trend[: max(1, len(trend) // 20)]))
    drop = head - float(np.min(trend[len(trend) // 10:]))
    return drop > max(4.0 * noise_abs / np.sqrt(max(1, len(trend) // 20)), min_relative_drop * abs(head), 1e-12)
