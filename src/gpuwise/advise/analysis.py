"""Curve analysis: trend, noise, phases, failures, the fitted forecast, and the diagnosis.

Pure: a ``Curve`` and settings in, a ``CurveAnalysis`` out. The diagnosis is one word, decided in
this order (the first that holds): ``diverged`` (the log ends on NaN/inf losses, or the trend turned up for good and ran away;
a NaN/inf loss that finite ones follow is a skipped step, counted, and left out of the analysis),
``not_learning`` (the trend never fell clearly), ``noisy`` (the loss swings around its trend by more
than ``noisy_relative_std``), ``plateau`` (the last phase is flat), else ``healthy``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuwise.advise.data import Curve
from gpuwise.advise.errors import AdviseError
from gpuwise.advise.fit import (StepEstimate, TrendFit, capped_at, diminishing_returns_step, fit_trend,
                                prefer_floor, steps_to_target)
from gpuwise.advise.failures import divergence_step, made_progress, nonfinite_of, with_rise_from
from gpuwise.advise.phases import (FAST, PLATEAU, RISING, SLOW, Phase, PhaseThresholds, detect_phases, head_level,
                                   progress_factor)
from gpuwise.advise.smoothing import NoiseLevel, auto_weight, ema_zero_phase, noise_level, noise_trend
from gpuwise.advise.wall_times import wall_times_unused
from gpuwise.plan.constraints import MAX_STEPS, MAX_STEPS_TEXT

DIAGNOSES = ("healthy", "plateau", "noisy", "not_learning", "diverged")


@dataclass(frozen=True)
class AdviseSettings:
    """Knobs of the analysis. ``min_progress_per_hour``: loss units per hour below which more training is
    not worth its time; None = ``min_relative_progress_per_hour`` × the current trend loss."""

    target_loss: float | None = None
    step_time_s: float | None = None
    total_steps: int | None = None
    min_progress_per_hour: float | None = None
    min_relative_progress_per_hour: float = 0.002
    noisy_relative_std: float = 0.10
    span_fraction: float = 0.02
    n_boot: int = 30
    phases: PhaseThresholds = field(default_factory=PhaseThresholds)

    def __post_init__(self) -> None:
        """AdviseError, naming the option, for a value no run has: not a finite number, not positive, more steps
        than gpuwise counts (``MAX_STEPS``, the one cap of a step count)."""
        if self.total_steps is not None and self.total_steps > MAX_STEPS:     # first: a float of it may overflow
            raise AdviseError(f"--total-steps must be at most {MAX_STEPS_TEXT}, got {self.total_steps:,}")
        if self.target_loss is not None and not np.isfinite(self.target_loss):
            raise AdviseError(f"--target-loss must be a finite number, got {self.target_loss!r}")
        for flag, value in (("--step-time-s", self.step_time_s), ("--min-progress-per-hour", self.min_progress_per_hour),
                            ("--total-steps", self.total_steps)):
            if value is not None and not (np.isfinite(float(value)) and value > 0):
                raise AdviseError(f"{flag} must be positive (and finite), got {value!r}")


@dataclass(frozen=True, eq=False)
class CurveAnalysis:
    steps: np.ndarray               # finite points only
    loss: np.ndarray
    trend: np.ndarray               # zero-phase debiased EMA of ``loss``
    ema_weight: float
    noise: NoiseLevel
    phases: tuple[Phase, ...]
    nan_step: int | None            # the first of the NaN/inf losses the log ends on (diverged)
    skipped_steps: np.ndarray       # the first steps of NaN/inf losses the run recovered from (fp16 loss scaling skips them)
    skipped_count: int              # all of those NaN/inf losses
    divergence_step: int | None
    progressed: bool
    fit: TrendFit | None
    fit_from_step: int | None
    diagnosis: str
    step_time_s: float | None
    steps_to_target: StepEstimate | None
    target_reached_step: int | None  # the target was already reached by the trend at this step
    diminishing_returns_step: int | None
    min_progress_per_hour: float | None
    plateau_forecast_step: int | None
    thresholds: PhaseThresholds = PhaseThresholds()
    wall_times_unused: str | None = None   # why the log's wall times gave no step time (a burst, too few)

    @property
    def restart_step(self) -> int | None:
        """The step to restart a diverged run from (at or before): the last one at the run's best, where the
        run-away began (``divergence_step``), else the first NaN/inf step of the end (the loss went from
        finite straight to NaN: the checkpoint before it). None when the run did not diverge."""
        return self.divergence_step if self.divergence_step is not None else self.nan_step

    @property
    def last_step(self) -> int:
        return int(self.steps[-1])

    @property
    def current_trend_loss(self) -> float:
        """The fitted trend at the last step (an EMA lags at the end of a falling curve), else the EMA."""
        if self.fit is not None:
            return float(self.fit.predict(self.steps[-1]))
        return float(self.trend[-1])


def analyze_curve(curve: Curve, settings: AdviseSettings = AdviseSettings()) -> CurveAnalysis:
    """The loss curve read: its smoothed trend and noise, phases, the NaN/inf steps, a trend fit and forecast
    (steps to ``settings.target_loss``, where returns diminish), and one ``diagnosis`` (``DIAGNOSES``).
    ``CurveAnalysis.step_time_s``: ``settings.step_time_s``, else the curve's wall time per step (None where it has
    no times, or where they give none, written in a burst or too few: ``wall_times_unused`` says why). AdviseError
    for a curve too short to read (fewer than 5 finite points)."""
    nonfinite = nonfinite_of(curve)
    nan_step = nonfinite.nan_step
    ok = np.isfinite(curve.loss)
    steps, loss = curve.steps[ok], curve.loss[ok]
    if len(steps) < 5:
        what = (f"a NaN/inf loss at step {nan_step}" if nan_step is not None
                else f"{len(steps)} finite loss value{'' if len(steps) == 1 else 's'}")
        raise AdviseError(f"{curve.source}: too few points to analyse ({what}; at least 5 finite points are needed)")
    weight = auto_weight(len(loss), settings.span_fraction)
    trend = ema_zero_phase(loss, weight)
    noise = noise_level(steps, loss, noise_trend(loss, weight))   # a smoother with a minimum window
    div_step = divergence_step(steps, loss, trend, noise.absolute_std, span_points=weight / (1.0 - weight))
    phases = tuple(with_rise_from(detect_phases(steps, loss, settings.phases), div_step))
    flat = phases[-1].kind in (PLATEAU, RISING)
    progressed = made_progress(trend, noise.absolute_std)
    diverged = nan_step is not None or div_step is not None
    if diverged:
        diagnosis = "diverged"
    elif not progressed:
        diagnosis = "not_learning"
    elif noise.relative_std >= settings.noisy_relative_std:
        diagnosis = "noisy"
    elif phases[-1].kind in (PLATEAU, RISING):
        diagnosis = "plateau"
    else:
        diagnosis = "healthy"

    fit, fit_from = None, None
    if not diverged and phases[-1].kind != RISING:   # the families fitted are of a falling loss: none forecasts a rise
        fit_from = fit_start_step(phases, steps, warmup_end_step(steps, _finite_lr(curve, ok)))
        sel = steps >= fit_from
        fit = fit_trend(steps[sel], loss[sel], n_boot=settings.n_boot)
        if fit is not None:
            fit = prefer_floor(fit, flat)   # a plateau is forecast by the fits that level off
        if fit is not None and phases[-1].kind != RISING:
            fit = capped_at(fit, float(trend[-1]))   # never forecast above the trend already reached
    step_time_s, wall_times_unused = _step_time_s(curve, settings.step_time_s)
    target_est, reached, dim_step, min_pph, plateau_at = None, None, None, None, None
    if fit is not None:
        if settings.target_loss is not None:
            reached = _reached_step(steps, trend, fit, fit_from, settings.target_loss)
            if reached is None:
                target_est = steps_to_target(fit, settings.target_loss, flat)
        if step_time_s:
            min_pph = settings.min_progress_per_hour
            if min_pph is None:
                min_pph = settings.min_relative_progress_per_hour * abs(float(trend[-1]))
            dim_step = diminishing_returns_step(fit, step_time_s, min_pph) if min_pph > 0 else None
        plateau_at = plateau_forecast_step(fit, settings.phases, head_level(steps, loss, settings.phases.n_bins))
    return CurveAnalysis(
        steps=steps, loss=loss, trend=trend, ema_weight=weight,
        noise=noise, phases=phases, nan_step=nan_step, skipped_steps=nonfinite.skipped_steps,
        skipped_count=nonfinite.skipped_count, divergence_step=div_step, progressed=progressed, fit=fit,
        fit_from_step=fit_from, diagnosis=diagnosis, step_time_s=step_time_s, steps_to_target=target_est,
        target_reached_step=reached, diminishing_returns_step=dim_step, min_progress_per_hour=min_pph,
        plateau_forecast_step=plateau_at, thresholds=settings.phases, wall_times_unused=wall_times_unused)


def _step_time_s(curve: Curve, given_s: float | None) -> tuple[float | None, str | None]:
    """(seconds per step, why the log's wall times were not used): ``given_s`` (--step-time-s) where given, else
    the curve's wall time per step; (None, why) where its times give none (``wall_times.wall_times_unused``: written
    in a burst, too few), (None, None) where the curve has no times."""
    if given_s:
        return given_s, None
    if curve.t_s is None:
        return None, None
    unused = wall_times_unused(curve.steps, curve.t_s)
    return (None, unused) if unused else (curve.step_time_s(), None)


def _reached_step(steps: np.ndarray, trend: np.ndarray, fit: TrendFit, fit_from: int, target: float) -> int | None:
    """The first logged step where the trend was at or below ``target``: by the fit within its range (an
    EMA rounds off the steep start of a curve), by the EMA before it; None when not yet."""
    in_fit = steps >= fit_from
    below = np.nonzero(fit.predict(steps[in_fit]) <= target)[0]
    before = np.nonzero((trend <= target) & ~in_fit)[0]
    if len(before):
        return int(steps[before[0]])
    return int(steps[in_fit][below[0]]) if len(below) else None


WARMUP_PEAK_SHARE = 0.99      # the learning rate's peak: within 1 % of its largest logged value (float rounding)
MIN_POINTS_AFTER_WARMUP = 20  # a fit needs points past the warm-up; with fewer, the warm-up is not skipped


def fit_start_step(phases, steps: np.ndarray, warmup_end: int | None = None, skip_fraction: float = 0.1) -> int:
    """Where the trend fit starts: the current regime, not before the first 10 % of the steps, and not before the
    end of a learning-rate warm-up (``warmup_end_step``) where at least ``MIN_POINTS_AFTER_WARMUP`` points follow it.
    The first steps of a run (warm-up, the initial transient) follow other laws than its tail; fitted along, they
    bend the forecast (measured in benchmarks/results/advise.md): a linear warm-up over a third of a 300-step run,
    fitted from step 30, read the loss levelling off 10-15 % above where it went."""
    skip = int(steps[0] + skip_fraction * (steps[-1] - steps[0]))
    start = max(regime_start_step(phases), skip)
    if warmup_end is not None and np.count_nonzero(steps >= warmup_end) >= MIN_POINTS_AFTER_WARMUP:
        start = max(start, warmup_end)
    return int(steps[np.searchsorted(steps, start)])


def warmup_end_step(steps: np.ndarray, lr: np.ndarray | None) -> int | None:
    """The first step where the logged learning rate reaches its peak (``WARMUP_PEAK_SHARE`` of its largest
    value): the end of a warm-up, the first step where there is none. None where no finite, positive rate is
    logged. ``lr``: per point of ``steps``, NaN where not logged."""
    if lr is None:
        return None
    ok = np.isfinite(lr) & (lr > 0)
    if not ok.any():
        return None
    at_peak = np.nonzero(ok & (lr >= WARMUP_PEAK_SHARE * np.max(lr[ok])))[0]
    return int(steps[at_peak[0]])


def _finite_lr(curve: Curve, finite_loss: np.ndarray) -> np.ndarray | None:
    """The curve's learning rate at its finite-loss points (None where it logs none)."""
    return None if curve.lr is None else curve.lr[finite_loss]


def regime_start_step(phases: tuple[Phase, ...] | list[Phase]) -> int:
    """Where the current regime began: the last descent that follows a plateau (an LR drop, the end of a
    warm-up), else the start. Fitting one smooth family across such a break would bend it."""
    start = phases[0].start_step
    for prev, cur in zip(phases, phases[1:]):
        if prev.kind in (PLATEAU, RISING) and cur.kind in (FAST, SLOW):
            start = cur.start_step
    return start


def plateau_forecast_step(fit: TrendFit, th: PhaseThresholds, head: float | None = None,
                          max_factor: float = 1000.0) -> int | None:
    """The first step from the last one on where the fitted trend is flat by the phases' measure: it drops less
    than the plateau threshold per doubling of the steps, as a share of the loss or, where smaller, of what the
    run has gained from ``head`` (``phases.progress_factor``, ``phases.head_level``; None: of the loss); the last
    step itself when it already does; None within ``max_factor``×."""
    grid = np.geomspace(max(fit.last_step, 1), max(fit.last_step, 1) * max_factor, 2000)
    level = fit.predict(grid)
    t = grid + fit.t_shift
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # the phases' measure: 1 - 2^(d ln L / d ln t), so the gain-share cap compares like with like
        drop = -np.expm1(fit.slope_per_step(grid) * t * np.log(2.0) / level)
    if head is not None:
        drop = drop * progress_factor(level, head, drop, th.gain_share_below_drop)
    flat = np.nonzero((level > 0) & (drop < th.plateau_drop_per_doubling))[0]
    return int(round(grid[flat[0]])) if len(flat) else None
