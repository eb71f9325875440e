"""The whole advice for one log: analysis + noise scale + prices -> ``AdviceReport`` (and its JSON).

I/O stays outside: the caller reads the log and loads the catalog; everything here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from gpuwise.advise.advice import (Advice, Pricing, diverged_advice, forecast_advice, healthy_advice,
                                   eval_rising_advice, implausible_advice, is_flat, noise_advice, not_learning_advice, overfitting_advice,
                                   no_switch_reason, plan_advice, plateau_advice, stop_advice,
                                   switch_advice)
from gpuwise.advise.analysis import AdviseSettings, CurveAnalysis, analyze_curve
from gpuwise.advise.data import TrainingLog
from gpuwise.advise.errors import AdviseError
from gpuwise.advise.fit import forecast_points
from gpuwise.advise.gpu_options import SPOT_RISK, gpu_options
from gpuwise.advise.gpu_plan import GpuPlan, SwitchCost, min_switch_saving, plan_run
from gpuwise.advise.noise_scale import NoiseScaleSummary, summarise
from gpuwise.advise.phases import RISING
from gpuwise.advise.run_end import RunEnd, recorded_run_end, run_end_advice
from gpuwise.advise.overfitting import EvalRise, detect_eval_rise
from gpuwise.catalog import resolve_gpu
from gpuwise.catalog.model import Catalog, CatalogError
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION
from gpuwise.plan.money import RATES_CHECKED, rates_in
from gpuwise.plan.quote import Quote
from gpuwise.plan.scaling import TimeScaling, time_scaling
from gpuwise.plan.spot import SpotRisk
from gpuwise.workload.precision import UNKNOWN_JOB_PRECISION


@dataclass(frozen=True)
class PricingRequest:
    """What the user told about the GPU side (CLI options), each overriding what the log says."""

    gpu_name: str | None = None
    price_per_hour: float | None = None     # for all the run's GPUs (the old --price-per-hour)
    price_per_gpu_hour: float | None = None  # per GPU-hour (--gpu-price, as report takes it): × the GPUs
    price_currency: str | None = None       # of that price (None: the ranking currency)
    currency: str | None = None             # the ranking currency (None: as recommend picks it)
    provider: str | None = None
    spot: bool = False
    precision: str | None = None
    count: int | None = None
    memory_need_bytes: int | None = None
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION
    switch: SwitchCost = field(default_factory=SwitchCost)
    scaling: TimeScaling | None = None      # default: the datasheet ratio at the run's precision
    spot_risk: SpotRisk = SPOT_RISK          # how spot offers are priced (--preemptions-per-hour, --checkpoint-every)


@dataclass(frozen=True, eq=False)
class AdviceReport:
    """What ``advise`` says of one training log: the loss curve's analysis (``analysis``; ``diagnosis``:
    healthy, plateau, noisy, not_learning or diverged), the gradient noise scale where the log has
    measurements (``noise_scale``), the advice in words with its numbers (``advice``), the GPU plan for the
    rest of the run with prices (``plan``, ``pricing``), and where the run is assumed to end (``end_step``,
    ``end_reason``). ``to_dict()`` is the `gpuwise advise --json` object."""

    analysis: CurveAnalysis
    noise_scale: NoiseScaleSummary | None
    advice: tuple[Advice, ...]
    plan: GpuPlan | None
    pricing: Pricing
    source: str
    target_loss: float | None
    end_step: int
    end_reason: str
    loss_name: str | None = None            # the column, tag or metric the loss was read from
    other_loss_names: tuple[str, ...] = ()  # other loss-like series in the log, not used (--loss-tag picks one)
    overfitting: EvalRise | None = None  # an eval loss beside the training loss rising while it falls
    eval_name: str | None = None            # the eval series read beside the loss (None: none)
    thinned: Mapping[str, int] | None = None   # the log thinned on read: rows_read, points, bin_steps (None: not)
    run_end: RunEnd | None = None           # how a guarded run ended, as its run log records it (None: not recorded)
    eval_rising: EvalRise | None = None     # an eval loss rising while the training loss does not fall
    no_switch: str | None = None            # why the plan stays on the current GPU (None: it moves, or no plan)

    @property
    def diagnosis(self) -> str:
        return self.analysis.diagnosis

    def to_dict(self) -> dict:
        a = self.analysis
        return {
            "source": self.source,
            "diagnosis": a.diagnosis,
            "run_end": None if self.run_end is None else self.run_end.to_dict(),
            "points": int(len(a.steps)),
            "last_step": a.last_step,
            "current_trend_loss": _r(a.current_trend_loss),  # the fit's value at the last step when there is a fit
            "step_time_s": a.step_time_s,
            "wall_times_unused": a.wall_times_unused,   # why the log's wall times gave no step time (null: used, or none)
            "noise": {"relative_std": _r(a.noise.relative_std), "absolute_std": _r(a.noise.absolute_std),
                      "since_step": a.noise.window_start_step, "ema_weight": round(a.ema_weight, 5)},
            "loss_series": {"name": self.loss_name, "ignored": list(self.other_loss_names)},
            "eval_loss_series": self.eval_name,   # the held-out loss read beside the loss (the overfitting check)
            "thinned": None if self.thinned is None else dict(self.thinned),
            "overfitting": None if self.overfitting is None else self.overfitting.to_dict(),
            "eval_rising": None if self.eval_rising is None else self.eval_rising.to_dict(),
            "nan_step": a.nan_step,
            "skipped_nonfinite": {"count": a.skipped_count, "steps": [int(x) for x in a.skipped_steps]},
            "divergence_step": a.divergence_step,
            "phases": [p.to_dict() for p in a.phases],
            "forecast": self._forecast_dict(),
            "noise_scale": None if self.noise_scale is None else self.noise_scale.to_dict(),
            "advice": [x.to_dict() for x in self.advice],
            "plan": [] if self.plan is None else [p.to_dict() for p in self.plan.phases],
            "plan_summary": None if self.plan is None else {
                "end_step": self.plan.end_step, "end_reason": self.plan.end_reason, "currency": self.plan.currency,
                "cost": round(self.plan.cost, 2), "hours": round(self.plan.hours, 3),
                "stay": self.plan.stay.to_dict(), "saving": round(self.plan.saving, 2),
                "switch_step": self.plan.switch_step,   # where the plan moves: last_step for now; null: it stays
                "min_switch_saving": round(min_switch_saving(self.plan.stay.cost, self.plan.currency), 2),
                "no_switch": self.no_switch},
            "ranking_currency": self.pricing.currency,
            "exchange_rates": None if self.pricing.currency is None else {
                "units_of_ranking_currency_per_unit": rates_in(self.pricing.currency), "checked": RATES_CHECKED,
                "indicative": True},
            "prices_checked": prices_checked(self.pricing),
            "gpu": None if self.pricing.current is None else self.pricing.current.to_dict(),
            "gpu_options": [o.to_dict() for o in self.pricing.options],   # every priced GPU, as plan quotes it
            "pricing_note": self.pricing.note or None,
        }

    def _forecast_dict(self) -> dict:
        a, fit = self.analysis, self.analysis.fit
        if fit is None:
            why = ("the run diverged" if a.diagnosis == "diverged" else
                   "the loss is rising" if a.phases[-1].kind == RISING else "too few points")
            return {"available": False, "reason": why}
        best = fit.best.to_dict(fit.t_scale)   # the family with the most weight, as the text's mix names it
        floor, span = fit.agreed_floor(), fit.floor_range()
        return {
            "available": True, **best,
            "fit_from_step": a.fit_from_step,
            "candidates": [{**c.to_dict(fit.t_scale), "weight": round(float(w), 4)}
                           for c, w in zip(fit.candidates, fit.weights)],
            "forecast_is": "BIC-weighted average of the candidates with weight > 0",
            "asymptote_loss": _r(floor) if floor is not None else None,
            "levels_off": None if span is None else {"low": _r(span[0]), "high": _r(span[1])},
            "residual_std": _r(fit.residual_std),
            "band": "5th-95th percentile of the trend over a moving-block bootstrap, widened by the hold-out miss",
            "points": forecast_points(fit, max(self.end_step, 2 * a.last_step)),
            "target_loss": self.target_loss,
            "target_reached_step": a.target_reached_step,
            "steps_to_target": None if a.steps_to_target is None else a.steps_to_target.to_dict(),
            "min_progress_per_hour": None if a.min_progress_per_hour is None else _r(a.min_progress_per_hour),
            "diminishing_returns_step": a.diminishing_returns_step,
            "plateau_forecast_step": a.plateau_forecast_step,
        }


def _r(x: float) -> float:
    return float(f"{x:.6g}")


def build_pricing(catalog: Catalog | None, log: TrainingLog, req: PricingRequest, step_time_s: float | None,
                  wall_times_unused: str | None = None) -> Pricing:
    """The current GPU's quote and every other GPU's at ``step_time_s``; without one, no prices and a note why
    (``wall_times_unused``: why the log's wall times gave none, else the log has none)."""
    gpu_name = req.gpu_name or log.gpu_name
    if catalog is None:
        return Pricing(None, note="no GPU catalog")
    if not gpu_name:
        return Pricing(None, note="pass --gpu NAME (the log does not say which GPU the run used)")
    try:
        current = resolve_gpu(catalog, gpu_name)
    except CatalogError:
        if req.gpu_name:
            raise
        return Pricing(None, note=f"the log's GPU {gpu_name!r} is not in the catalog; pass --gpu NAME")
    if not step_time_s:
        return Pricing(None, note=wall_times_unused or "pass --step-time-s (the log has no wall times)")
    count = req.count or log.gpu_count or 1
    scaling = req.scaling or time_scaling(req.precision or log.precision or UNKNOWN_JOB_PRECISION)
    need = req.memory_need_bytes or log.peak_memory_bytes
    price = None
    if req.price_per_gpu_hour is not None:
        price = (req.price_per_gpu_hour * count, req.price_currency)
    elif req.price_per_hour is not None:
        price = (req.price_per_hour, req.price_currency)
    cur, options = gpu_options(catalog, current, step_time_s, scaling=scaling, count=count, provider=req.provider,
                               spot=req.spot, currency=req.currency, memory_need_bytes=need, current_price=price,
                               headroom_fraction=req.headroom_fraction, spot_risk=req.spot_risk)
    if cur is None:
        where = f" from {req.provider}" if req.provider else ""
        return Pricing(None, tuple(options), req.switch,
                       note=f"no price for {current.id}{where} in the catalog; pass --gpu-price",
                       headroom_fraction=req.headroom_fraction, spot_risk=req.spot_risk)
    # how step times scale to other GPUs is said once, by the caller's footer (the CLI's "Step times on other
    # GPUs are scaled by ..."), not again in this note
    note = "" if need else "memory fit not checked (the log has no memory samples; pass --peak-memory)"
    if req.scaling is not None and scaling.step_time_s is None:   # a requested predictor fell back
        note = "; ".join(x for x in (note, f"step times on other GPUs: {scaling.method}") if x)
    note = "; ".join(x for x in (note, conversion_note(cur, options)) if x)
    return Pricing(cur, tuple(options), req.switch, note, need, req.headroom_fraction, req.spot_risk)


def conversion_note(current: Quote, options: list[Quote]) -> str:
    """Which prices were converted into the ranking currency, and at which rates ("" when none was)."""
    rank_in = current.ranking_currency
    converted = sorted({q.currency for q in (current, *options) if q.currency and q.currency != rank_in})
    if not converted:
        return ""
    return (f"prices in {', '.join(converted)} converted to {rank_in} (the ranking currency) at exchange rates "
            f"indicative as of {RATES_CHECKED}")


def prices_checked(pricing: Pricing) -> list[str]:
    """The dates the catalog prices compared were checked (the user's own price has none)."""
    quotes = [q for q in (pricing.current, *pricing.options) if q is not None and q.offer is not None]
    return sorted({q.offer.checked for q in quotes if q.offer.checked})


def end_of_run(a: CurveAnalysis, settings: AdviseSettings, log: TrainingLog,
               run_end: RunEnd | None = None) -> tuple[int, str]:
    """How far the run goes, for the remaining cost: --total-steps, the target, the log's meta, where the guard
    recorded the run finished (``run_end``), else 2× now."""
    if settings.total_steps:
        return max(settings.total_steps, a.last_step), "--total-steps"
    if a.steps_to_target is not None and a.steps_to_target.step is not None:
        return a.steps_to_target.step, f"to reach loss {settings.target_loss:g}"
    if run_end is not None and run_end.finished and run_end.ends_curve:
        return a.last_step, "the run finished there, as the guard recorded; pass --total-steps to price going on"
    for key in ("total_steps", "max_steps"):
        value = log.meta.get(key)
        if value and str(value).isdigit() and int(value) > a.last_step:
            return int(value), f"{key} in the log"
    if settings.target_loss is None:
        return 2 * max(a.last_step, 1), "assumed: as many steps again; pass --total-steps or --target-loss"
    # a target was given but sets no end: say why, and only what can still set one
    target = f"{settings.target_loss:g}"
    if a.target_reached_step is not None:
        why = f"the target loss {target} was reached at step {a.target_reached_step:,}"
    elif a.fit is None:
        why = f"no trend fit to forecast the target loss {target}"
    else:
        why = f"the forecast does not reach the target loss {target}"
    return 2 * max(a.last_step, 1), f"assumed: as many steps again, as {why}; pass --total-steps"


def advise(log: TrainingLog, settings: AdviseSettings = AdviseSettings(), catalog: Catalog | None = None,
           request: PricingRequest = PricingRequest()) -> AdviceReport:
    """The advice for ``log`` (``read_log``: a run log, CSV, JSONL or TensorBoard): ``analyze_curve`` of its loss,
    the noise scale of its gradient-noise samples, and, with a ``catalog``, what the rest of the run costs on
    each GPU (``request``: the GPU, prices and currency the user named). Pure: the caller reads the log and
    loads the catalog. AdviseError for settings the log contradicts (``--total-steps`` below its last step)."""
    if settings.total_steps is not None and len(log.curve) and settings.total_steps < int(log.curve.steps[-1]):
        raise AdviseError(f"--total-steps {settings.total_steps:,} is below the steps already done: "
                          f"{log.curve.source} goes to step {int(log.curve.steps[-1]):,}")
    a = analyze_curve(log.curve, settings)
    batch = log.curve.last_batch_size()
    ns = summarise(log.noise, batch) if log.noise is not None and len(log.noise) >= 2 else None
    pricing = build_pricing(catalog, log, request, a.step_time_s, a.wall_times_unused)
    run_end = recorded_run_end(log.meta, log.curve)
    end_step, end_reason = end_of_run(a, settings, log, run_end)
    remaining = max(0, end_step - a.last_step)
    lr = _lr_near(log, a.restart_step)

    rise = detect_eval_rise(a.steps, a.trend, log.eval_curve, log.eval_name) if a.diagnosis != "diverged" else None
    overfit = rise if rise is not None and rise.train_fell else None   # the training loss fell meanwhile
    eval_rising = rise if rise is not None and not rise.train_fell else None
    lr_now, lr_peak = _lr_near(log, None), _lr_peak(log)

    items: list[Advice] = []
    if a.diagnosis == "diverged":
        items += diverged_advice(a, lr)
    elif a.diagnosis == "not_learning":
        items += not_learning_advice(a, lr_now)
    else:
        if a.diagnosis == "healthy":
            items += healthy_advice(a)
        items += noise_advice(a, ns, pricing)
        if is_flat(a):
            items += plateau_advice(a, pricing, remaining, end_reason, lr_now, lr_peak)
        items += forecast_advice(a, settings.target_loss)
        items += stop_advice(a, pricing, end_step, end_reason)
        items[:0] = implausible_advice(a, end_step, end_reason)   # first: it says how far to trust the rest
    if overfit is not None:
        items[:0] = overfitting_advice(overfit)   # first: it changes where the run should stop
    if eval_rising is not None:
        items[:0] = eval_rising_advice(eval_rising)
    items[:0] = run_end_advice(run_end, a)        # before all: the curve ends where the run did, not where it would
    if a.diagnosis in ("diverged", "not_learning") and ns is not None:
        items += [x for x in noise_advice(a, ns, pricing) if x.kind == "batch_size"]

    plan, no_switch = None, None
    fits = pricing.current is not None and pricing.current.fits is not False
    if not fits and pricing.current is not None and a.diagnosis not in ("diverged", "not_learning") \
            and not any(x.kind == "memory" for x in items):
        items += switch_advice(pricing, remaining, end_reason)   # says the run does not fit, and where it does
    if fits and a.diagnosis not in ("diverged", "not_learning") and remaining > 0:
        plan = plan_run(pricing.current, list(pricing.options), now_step=a.last_step, end_step=end_step,
                        end_reason=end_reason, switch=pricing.switch, risk=pricing.spot_risk)
        stays = plan.switch_step is None
        no_switch = no_switch_reason(pricing, remaining) if stays else None
        if not stays and not any(x.kind == "switch_gpu" for x in items):
            items += switch_advice(pricing, remaining, end_reason)   # the plan's move now, and the GPUs it beat
        if not stays or not any(x.kind == "switch_gpu" for x in items):
            items += plan_advice(plan, no_switch)  # a "stay" plan says nothing a "stay on this GPU" item has not
    thinned = None
    if log.thinned_bin_steps > 1:
        thinned = {"rows_read": log.rows_read, "points": len(log.curve), "bin_steps": log.thinned_bin_steps}
    return AdviceReport(a, ns, tuple(items), plan, pricing, log.curve.source, settings.target_loss, end_step, end_reason,
                        log.loss_name, log.other_loss_names, overfit, log.eval_name, thinned, run_end=run_end,
                        eval_rising=eval_rising, no_switch=no_switch)


def _lr_peak(log: TrainingLog) -> float | None:
    lr = log.curve.lr
    if lr is None or not np.isfinite(lr).any():
        return None
    return float(np.nanmax(lr))


def _lr_near(log: TrainingLog, step: int | None) -> float | None:
    c = log.curve
    if c.lr is None:
        return None
    ok = np.isfinite(c.lr)
    if step is not None:
        ok &= c.steps <= step
    return float(c.lr[ok][-1]) if ok.any() else None



