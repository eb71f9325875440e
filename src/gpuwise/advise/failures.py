"""What went wrong in a run, read from its loss: NaN/inf losses (skipped steps, or the end of the run), the step
where the loss turned upwards for good (divergence), and a loss that never fell (not learning)."""

from __future__ import annotations

import numpy as np

from gpuwise.advise.data import Curve
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


def nonfinite_steps(curve: Curve) -> tuple[int | None, np.ndarray]:
    """(``nonfinite_end_step``, ``skipped_nonfinite_steps``) of a curve: from its points, or, for a curve thinned on
    read, from the reader's exact tally (the same rule, on the NaN/inf steps and the highest finite one)."""
    tally = curve.nonfinite
    if tally is None:
        return nonfinite_end_step(curve.steps, curve.loss), skipped_nonfinite_steps(curve.steps, curve.loss)
    finite = [] if tally.last_finite_step is None else [tally.last_finite_step]
    steps = np.array([*tally.steps, *finite], dtype=np.int64)
    loss = np.array([np.nan] * len(tally.steps) + [0.0] * len(finite))
    order = np.argsort(steps, kind="stable")
    steps, loss = steps[order], loss[order]
    return nonfinite_end_step(steps, loss), skipped_nonfinite_steps(steps, loss)


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
