"""Advice with numbers: one small function per finding, each returning ``Advice`` items.

The three questions a renter asks while watching the loss, and the answers given here:
(1) flat: is the rest of the run cheaper on another GPU? -> ``plateau_advice`` with time and cost per GPU;
(2) swinging: does a larger batch (and a bigger GPU) pay off? -> ``noise_advice`` from the noise scale;
(3) not falling: too little GPU, or a broken model? -> ``not_learning_advice``: compute never stops a loss
from falling, so it lists the checks that find the real cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from gpuwise.advise.analysis import CurveAnalysis
from gpuwise.advise.gpu_options import (SPOT_RISK, expected_cost_for, expected_hours_for,
                                        spot_note, with_count)
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION, usable_of
from gpuwise.plan.quote import Quote
from gpuwise.plan.spot import SpotRisk
from gpuwise.advise.gpu_plan import (MIN_SAVING_AMOUNT, MIN_SAVING_CURRENCY, MIN_SAVING_SHARE, GpuPlan, SwitchCost,
                                     finish_on, min_switch_saving, switch_saving, worth_switching)
from gpuwise.advise.noise_scale import NoiseScaleSummary, pollux_efficiency, steps_ratio
from gpuwise.advise.overfitting import MEDIAN_EVALS, EvalRise
from gpuwise.advise.phases import PLATEAU, RISING, loss_drop_per_doubling
from gpuwise.advise.wording import FLAT_SHARE_OF, drop_text, flat_drop_text, flat_rule_text, g as _g, range_text
from gpuwise.units import YEAR_S, format_bytes, format_duration, format_money


@dataclass(frozen=True)
class Advice:
    # run_end, diverged, overfitting, eval_rising, not_learning, noisy, batch_size, plateau, switch_gpu, memory, forecast, stop,
    # implausible, healthy, plan
    kind: str
    title: str
    text: str
    numbers: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "title": self.title, "text": self.text, "numbers": dict(self.numbers)}


@dataclass(frozen=True)
class Pricing:
    """What the cost advice needs: the current GPU as an option, the others, and the switching cost.

    ``current`` is None when the GPU, its price or the step time is unknown; ``note`` then says which. ``spot_risk``:
    the preemptions a spot offer's time and cost include (--preemptions-per-hour, --checkpoint-every)."""

    current: Quote | None
    options: tuple[Quote, ...] = ()
    switch: SwitchCost = SwitchCost()
    note: str = ""
    memory_need_bytes: int | None = None   # the run's peak GPU memory, when known
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION
    spot_risk: SpotRisk = SPOT_RISK

    @property
    def currency(self) -> str | None:
        """The ranking currency: every cost the advice compares is in it."""
        return self.current.ranking_currency if self.current is not None else None

    @property
    def spot_note(self) -> str:
        """The preemptions the spot offers priced here are assumed to take ("" when none is spot)."""
        return spot_note((q for q in (self.current, *self.options) if q is not None), self.spot_risk)


def diverged_advice(a: CurveAnalysis, lr_at: float | None) -> list[Advice]:
    """Where the run diverged, and the step to restart from (``CurveAnalysis.restart_step``: the one step the text,
    ``numbers.step`` and ``divergence_step`` give)."""
    turned = (f"The loss turned upwards after step {a.divergence_step:,}: its trend rose from "
              f"{_g(float(np.min(a.trend)))} to {_g(a.current_trend_loss)}") if a.divergence_step is not None else ""
    if a.nan_step is not None:
        head = f"The loss became NaN/inf at step {a.nan_step:,} and stayed so to the end of the log."
        if turned:
            head = f"{turned}, and became NaN/inf at step {a.nan_step:,} and stayed so to the end of the log."
    else:
        head = f"{turned}."
    step = a.restart_step
    where = (f"the last checkpoint at or before step {step:,} (the run's last good step)" if a.divergence_step is not None
             else f"the last checkpoint before step {step:,}")
    lr_text = f" The learning rate there was {lr_at:.3g}." if lr_at is not None else ""
    text = (f"{head}{lr_text} Restart from {where} with a lower peak learning "
            "rate (halve it) or a longer warm-up, clip gradients (max-norm 1.0), and with fp16 keep the loss "
            "scaler on or use bf16. A different GPU will not fix this: the same steps diverge on any GPU.")
    return [Advice("diverged", "Training diverged", text,
                   {"step": step, "lr": lr_at, "nan_step": a.nan_step, "divergence_step": a.divergence_step})]


def not_learning_advice(a: CurveAnalysis, lr_last: float | None) -> list[Advice]:
    head_loss = float(np.median(a.trend[: max(1, len(a.trend) // 20)]))
    lr_hint = ""
    if lr_last is not None and lr_last <= 0:
        lr_hint = " The logged learning rate is 0: the optimizer cannot move the weights."
    elif lr_last is not None:
        lr_hint = f" The last logged learning rate is {lr_last:.3g}."
    text = (f"The loss has not fallen: its trend went from {_g(head_loss)} to {_g(a.current_trend_loss)} over "
            f"{a.last_step - int(a.steps[0]):,} steps (noise ±{_g(a.noise.absolute_std)}).{lr_hint} "
            "Lack of compute slows training, but it does not stop a loss from falling: a weaker GPU takes longer "
            "per step, yet each step lowers the loss just as much. A bigger GPU will not help here. Check, in this order: "
            "(1) one-batch overfit test: train on one fixed batch for 200 steps; the loss must go near zero, and if it "
            "does not, the wiring is broken (optimizer.step()/zero_grad() missing, frozen or detached parameters, "
            "wrong loss input); (2) LR range test: raise the learning rate from 1e-7 to 1 over ~100 steps and use about "
            "a tenth of the rate where the loss is lowest before it explodes; (3) labels: do they match the inputs "
            "(shuffled separately? off by one? the class count the loss expects?); (4) data pipeline: plot a batch "
            "as the model sees it (normalisation, augmentation, padding, not the same batch every step).")
    return [Advice("not_learning", "The loss is not falling", text,
                   {"trend_start": head_loss, "trend_now": a.current_trend_loss, "lr": lr_last})]


def noise_advice(a: CurveAnalysis, ns: NoiseScaleSummary | None, pricing: Pricing) -> list[Advice]:
    """The 'swings wildly' question. With a measured noise scale, the batch answer comes from it."""
    rel = a.noise.relative_std
    out = []
    if a.diagnosis == "noisy":
        text = (f"The loss swings ±{rel:.0%} around its trend (since step {a.noise.window_start_step:,}). Much of a "
                "logged training loss's swing is the loss of each small batch, not bad progress: judge by the trend.")
        if ns is None or ns.b_noise is None:
            text += (" Whether a larger batch pays off depends on the gradient noise scale, which this log does not "
                     "hold: log it with gpuwise.advise.NoiseScaleMeter (two gradient norms per step, almost free). "
                     "Cheapest ways to calm the loss meanwhile: gradient accumulation ×2 (the same cost per sample, "
                     "half as many, steadier steps) or a 2× lower learning rate (steadier, but slower per step).")
        out.append(Advice("noisy", "The loss is noisy", text, {"relative_std": rel}))
    if ns is not None and ns.b_noise is not None:
        out.append(_batch_advice(ns, pricing))
    return out


def _batch_advice(ns: NoiseScaleSummary, pricing: Pricing) -> Advice:
    b, bn = ns.batch_size, float(ns.b_noise)
    ratio2 = steps_ratio(b, 2 * b, bn)
    numbers = {"batch_size": b, "noise_scale": bn, "double_batch_steps_ratio": ratio2,
               "double_batch_pollux_efficiency": pollux_efficiency(2 * b, b, bn)}
    if b < 0.5 * bn:
        text = (f"The batch ({b:g}) is well below the gradient noise scale (B_noise ≈ {bn:,.0f}): doubling it to "
                f"{2 * b:g} needs {ratio2:.0%} of the steps for the same progress, and each sample keeps "
                f"{pollux_efficiency(2 * b, b, bn):.0%} of its value (Pollux). A larger batch pays off. Cheapest ways: ")
        ways = ["gradient accumulation ×2 on this GPU (costs nothing extra per sample; wall time about the same, "
                "the steps are fewer and steadier)"]
        if pricing.current is not None:
            cur, currency = pricing.current, pricing.currency   # every price in the ranking currency
            two = with_count(cur, 2 * cur.count)
            ways.append(f"{two.count} GPUs data-parallel with batch {2 * b:g} "
                        f"(≈{format_money(two.price_per_hour_ranked, currency)}/h instead of "
                        f"{format_money(cur.price_per_hour_ranked, currency)}/h, about half the wall time at "
                        "about the same cost)")
            need = pricing.memory_need_bytes
            h = pricing.headroom_fraction
            # activations grow with the batch, weights and optimizer state do not: 2× the peak is an upper bound
            if need is None:
                ways.append(f"batch {2 * b:g} in one step on this or a larger GPU: whether it fits is not known, as "
                            "the run's peak memory was not measured (--peak-memory, or a run log with GPU samples, "
                            "tells)")
            elif 2 * need <= usable_of(cur.gpu_memory_bytes, h):
                ways.insert(0, f"batch {2 * b:g} on this GPU: the run peaks at {format_bytes(need)} of "
                               f"{format_bytes(cur.gpu_memory_bytes)}, so twice the batch fits (no extra cost per sample)")
            else:
                bigger = [o for o in pricing.options if o.gpu != cur.gpu and usable_of(o.gpu_memory_bytes, h) >= 2 * need]
                if bigger:
                    best = min(bigger, key=lambda o: expected_cost_for(o, 1, pricing.spot_risk))
                    ways.append(f"a GPU with room for batch {2 * b:g} in one step: {best.gpu} "
                                f"({format_bytes(best.gpu_memory_bytes)}: twice the run's peak of {format_bytes(need)} "
                                f"fits) at {format_money(best.price_per_hour_ranked, currency)}/h")
        else:
            ways.append("more GPUs data-parallel (about half the wall time at about the same cost)")
        text += "; ".join(ways) + ". Raise the learning rate with the batch (linear scaling up to B_noise)."
        return Advice("batch_size", "A larger batch pays off", text, numbers)
    text = (f"The batch ({b:g}) is already near or above the gradient noise scale (B_noise ≈ {bn:,.0f}): doubling "
            f"it still needs {ratio2:.0%} of the steps, so twice the compute per step buys little. A bigger GPU or "
            "more GPUs for a larger batch would not pay off; to calm the loss, lower the learning rate or decay it.")
    return Advice("batch_size", "A larger batch does not pay off", text, numbers)


LR_DECAYED_FRACTION = 0.1   # a logged learning rate below this share of its peak has already been dropped


def plateau_advice(a: CurveAnalysis, pricing: Pricing, remaining_steps: int, end_reason: str,
                   lr_now: float | None = None, lr_peak: float | None = None) -> list[Advice]:
    """The flat (or slowly rising) last phase. ``lr_now``/``lr_peak``: the log's learning rate, last and highest:
    no learning-rate drop is suggested when it has already fallen below ``LR_DECAYED_FRACTION`` of its peak."""
    last = a.phases[-1]
    drop = last.drop_per_doubling
    if last.kind == RISING:
        text = (f"The loss has been rising since step {last.start_step:,} ({drop_text(-drop)} higher per doubling of "
                "the steps): slowly, not a run-away (divergence). A held-out (eval) loss that rises while the training "
                "loss falls is overfitting: stop at its best step; a training loss that creeps up often has a "
                "learning rate too high for this stage of the run.")
        title = "The loss is rising"
    else:
        loss_drop = loss_drop_per_doubling(a.steps, a.trend, last.start_step, last.end_step)
        how = flat_drop_text(drop, loss_drop) if drop >= 0.001 else "no measurable drop"
        text = (f"The loss has been flat since step {last.start_step:,} ({how}). Flat: "
                f"{flat_rule_text(a.thresholds.plateau_drop_per_doubling)}.")
        title = "Plateau"
    if a.diminishing_returns_step is not None and a.min_progress_per_hour and a.diminishing_returns_step > a.last_step:
        # the same fitted curve as the forecast: flat per doubling of the steps, yet still worth its hours until then
        text += (f" By the fitted trend it still falls by at least {_g(a.min_progress_per_hour)} per hour of "
                 f"training until step {a.diminishing_returns_step:,}, then levels off.")
    decayed = lr_now is not None and lr_peak is not None and lr_peak > 0 and lr_now < LR_DECAYED_FRACTION * lr_peak
    if decayed:
        text += (f" The logged learning rate has already decayed to {lr_now:.3g} ({_share(lr_now / lr_peak)} of its peak "
                 f"{lr_peak:.3g}): another drop buys little. This is about where this model and data level off "
                 "with this schedule; a lower loss needs more data, a larger model or a new schedule, not more steps.")
    elif last.kind != RISING:
        text += (" A plateau often ends with a learning-rate drop: if the schedule has none, try "
                 "one (×0.1) before paying for more steps.")
    numbers = {"since_step": last.start_step, "drop_per_doubling": last.drop_per_doubling}
    if last.kind != RISING:
        numbers.update(loss_drop_per_doubling=round(loss_drop, 5),
                       drop_per_doubling_is=FLAT_SHARE_OF)
    if lr_now is not None:
        numbers.update(lr_now=lr_now, lr_peak=lr_peak, lr_decayed=decayed)
    out = [Advice("plateau", title, text, numbers)]
    out += switch_advice(pricing, remaining_steps, end_reason)
    return out


def overfitting_advice(o: EvalRise) -> list[Advice]:
    """An eval loss rising while the training loss falls (``overfitting.detect_eval_rise``, ``EvalRise.train_fell``)."""
    name = f" ({o.eval_name!r})" if o.eval_name else ""
    text = (f"Overfitting: eval loss{name} rising since step {o.since_step:,} while train loss falls: the eval "
            f"loss (median of {MEDIAN_EVALS} evals) went from {_g(o.best_eval_loss)} around step {o.since_step:,} to "
            f"{_g(o.eval_loss_now)} over the last {MEDIAN_EVALS} (the last, at step {o.last_eval_step:,}: "
            f"{_g(o.last_eval_loss)}), while the training trend fell from {_g(o.train_trend_at_best)} to "
            f"{_g(o.train_trend_now)}. More steps fit the training data better and generalise worse: stop early, "
            f"keeping the checkpoint of the best eval step ({o.since_step:,}); for a lower eval loss, add data "
            "(or augmentation) or regularise (weight decay, dropout), or use a smaller model.")
    return [Advice("overfitting", "Overfitting", text, o.to_dict())]


def eval_rise_headline(o: EvalRise) -> str:
    """The one-line finding of an eval loss that rose while the training loss did not fall (no overfitting)."""
    name = f" ({o.eval_name!r})" if o.eval_name else ""
    by = f" {o.eval_rise_fraction:.0%}" if o.eval_rise_fraction is not None else ""
    return (f"the eval loss{name} has risen{by} since step {o.since_step:,} while the training loss did not fall: "
            "overfitting, or a problem with the eval data")


def eval_rising_advice(o: EvalRise) -> list[Advice]:
    """An eval loss rising while the training loss stays flat or rises too (``overfitting.detect_eval_rise``, the
    training trend not falling): not overfitting, yet the eval loss is what the run is for."""
    headline = eval_rise_headline(o)
    text = (f"{headline[0].upper()}{headline[1:]}. The eval loss (median of "
            f"{MEDIAN_EVALS} evals) went from {_g(o.best_eval_loss)} around step {o.since_step:,} to "
            f"{_g(o.eval_loss_now)} over the last {MEDIAN_EVALS} (the last, at step {o.last_eval_step:,}: "
            f"{_g(o.last_eval_loss)}); the training trend went from {_g(o.train_trend_at_best)} to "
            f"{_g(o.train_trend_now)}. Overfitting usually shows as a falling training loss; beside a flat one, check "
            "the eval data (changed, reshuffled, leaking, or drifting from the training data) and the eval itself "
            "(model.eval() around it: dropout, batch-norm statistics). Keep the checkpoint of the best eval step "
            f"({o.since_step:,}).")
    numbers = {**o.to_dict(), "eval_rise_fraction": None if o.eval_rise_fraction is None
               else round(o.eval_rise_fraction, 5)}
    return [Advice("eval_rising", "The eval loss is rising", text, numbers)]


def switch_advice(pricing: Pricing, remaining_steps: int, end_reason: str) -> list[Advice]:
    """The remaining steps on each GPU cheaper per step than the current one, with the saving after switching, where
    that saving is worth a switch (``gpu_plan.worth_switching``, as the plan judges it); else why staying is the
    answer (``no_switch_reason``); nothing where no step remains (the run ends at its last logged step)."""
    if remaining_steps <= 0:
        return []
    cur = pricing.current
    if cur is None:
        return [Advice("switch_gpu", "Prices unknown", "To compare GPUs for the rest of the run, "
                       + (pricing.note or "pass --gpu and --step-time-s (or a log with wall times)."), {})]
    if cur.fits is False:
        return memory_advice(pricing, remaining_steps, end_reason)   # never "stay on" a GPU the run does not fit
    stay = _remaining_on(cur, remaining_steps, pricing.spot_risk)
    stay_cost, currency = stay["cost"], pricing.currency
    minimum = min_switch_saving(stay_cost, currency)
    saving_rows = _saving_rows(pricing, remaining_steps)
    rows = [r for r in saving_rows if worth_switching(r["saving"], stay_cost, currency)]
    numbers = {"remaining_steps": remaining_steps, "end": end_reason, "stay": stay, "options": rows[:8],
               "min_saving": minimum, "currency": currency}
    if not rows:
        why = no_switch_reason(pricing, remaining_steps)
        return [Advice("switch_gpu", "Stay on this GPU", f"Stay on {cur.gpu} for the rest of the run "
                       f"({end_reason}): {why}.",
                       {**numbers, "no_switch": why, "best_below_min": saving_rows[0] if saving_rows else None})]
    best = rows[0]
    listed = "; ".join(f"{r['gpu']} ({_seller(r['provider'], r['spot'])}): {_hours_text(r)}, "
                       f"{format_money(r['cost'], currency)}, saves {format_money(r['saving'], currency)}"
                       + (" (memory fit not checked)" if r["fits_memory"] is None else "") for r in rows[:4])
    text = (f"The remaining {remaining_steps:,} steps ({end_reason}) cost {format_money(stay_cost, currency)} and "
            f"take {_hours_text(stay)} on {cur.gpu}. Cheaper per step, after "
            f"{format_duration(pricing.switch.overhead_s)} of switching (save, move the checkpoint, restart) at the "
            f"new price: {listed}. Best: {best['gpu']}, saving {format_money(best['saving'], currency)}.")
    return [Advice("switch_gpu", f"Finish on {best['gpu']}", text, numbers)]


def _saving_rows(pricing: Pricing, remaining_steps: int) -> list[dict]:
    """The remaining steps on each other GPU the run may fit that costs less than staying, switching counted:
    time, cost and saving, biggest saving first."""
    cur, rows = pricing.current, []
    for o in pricing.options:
        if o.gpu == cur.gpu or o.fits is False:
            continue
        saving = switch_saving(cur, o, remaining_steps, pricing.switch, pricing.spot_risk)
        if saving > 0:
            rows.append({**_remaining_on(o, remaining_steps, pricing.spot_risk, pricing.switch), "saving": saving,
                         "fits_memory": o.fits})
    return sorted(rows, key=lambda r: -r["saving"])


def no_switch_reason(pricing: Pricing, remaining_steps: int) -> str | None:
    """Why no switch is advised for the remaining steps, in words (None where one is: a switch now saves at least
    ``min_switch_saving``): no GPU finishes them for less, or the most a switch saves is less than a switch must.
    A switch now saves the most any switch can (a later one moves fewer steps, for the same switching cost), so
    this is also why the plan stays."""
    cur, currency = pricing.current, pricing.currency
    stay = _remaining_on(cur, remaining_steps, pricing.spot_risk)
    minimum = min_switch_saving(stay["cost"], currency)
    rows = _saving_rows(pricing, remaining_steps)
    if rows and worth_switching(rows[0]["saving"], stay["cost"], currency):
        return None
    staying = f"staying on {cur.gpu} ({_hours_text(stay)}, {format_money(stay['cost'], currency)})"
    if not rows:
        return (f"no GPU in the catalog finishes the remaining {remaining_steps:,} steps for less than {staying}, "
                f"counting {format_duration(pricing.switch.overhead_s)} of switching")
    best = rows[0]
    return (f"the most a switch saves on the remaining {remaining_steps:,} steps is "
            f"{format_money(best['saving'], currency, nonzero=True)}, finishing on {best['gpu']} "
            f"({_seller(best['provider'], best['spot'])}: {_hours_text(best)}, "
            f"{format_money(best['cost'], currency)}) "
            f"against {staying}, less than the {format_money(minimum, currency, nonzero=True)} a switch must save to "
            f"be worth it ({MIN_SAVING_SHARE:.0%} of staying, or "
            f"{format_money(MIN_SAVING_AMOUNT, MIN_SAVING_CURRENCY)} where that is less)")


def _remaining_on(o: Quote, steps: int, risk: SpotRisk, switch: SwitchCost | None = None) -> dict:
    """The rest of the run on ``o``: its time and cost (a spot offer's expected preemptions under ``risk``
    included, and their hours apart), with a switch to it where ``switch`` is given, priced as the plan's phase on
    ``o`` is (``gpu_plan.finish_on``)."""
    p = finish_on(o, 0, steps, risk, switch)
    return {"gpu": p.gpu_id, "provider": p.provider, "spot": p.spot, "hours": p.hours,
            "preemption_hours": p.preemption_hours, "cost": p.cost}


def _seller(provider: str | None, spot: bool) -> str:
    """'gcp, spot' for a spot offer (as recommend marks one), 'gcp' otherwise."""
    return f"{provider}, spot" if spot else str(provider)


def _hours_text(row: Mapping[str, Any]) -> str:
    """'17.6 h (21.5 min of it expected preemptions)' for a spot offer's row; '3.1 h' otherwise."""
    return format_duration(row["hours"] * 3600) + _preempted(row["preemption_hours"])


def _preempted(hours: float) -> str:
    """' (21.5 min of it expected preemptions)' after a time that includes a spot offer's, as recommend says it."""
    return f" ({format_duration(hours * 3600)} of it expected preemptions)" if hours else ""


def memory_advice(pricing: Pricing, remaining_steps: int, end_reason: str) -> list[Advice]:
    """The run's memory need does not fit the current GPU (after the headroom): say so, and which offered GPUs it
    fits with the time and cost of the remaining steps there, or that none of those offered at this count does."""
    cur, need, h = pricing.current, pricing.memory_need_bytes, pricing.headroom_fraction
    fitting = [o for o in pricing.options if o.fits]
    gpus = "GPU" if cur.count == 1 else f"{cur.count}-GPU"
    text = (f"The run needs {format_bytes(need)} of GPU memory per GPU (--peak-memory or the log's samples): it does "
            f"not fit {cur.gpu} ({format_bytes(cur.gpu_memory_bytes)}, {format_bytes(usable_of(cur.gpu_memory_bytes, h))} "
            f"usable after the {h:.0%} headroom)")
    rows = [{**_remaining_on(o, remaining_steps, pricing.spot_risk, pricing.switch), "gpu_memory_bytes": o.gpu_memory_bytes}
            for o in fitting]
    rows.sort(key=lambda r: (r["cost"], r["hours"]))   # by the totals listed (switching included), cheapest first
    if not rows:
        largest = max(pricing.options, key=lambda o: o.gpu_memory_bytes, default=cur)
        text += (f", nor any single {gpus} option offered (the largest, {largest.gpu}, has "
                 f"{format_bytes(largest.gpu_memory_bytes)}). No price is given for staying or switching. Check "
                 "--peak-memory; else shard the run over more GPUs (--num-gpus N with FSDP/ZeRO) or cut its memory "
                 "(a smaller micro-batch with gradient accumulation, activation checkpointing, an 8-bit optimizer).")
        title = f"Does not fit {cur.gpu} nor any offered GPU"
    else:
        listed = "; ".join(f"{r['gpu']} ({_seller(r['provider'], r['spot'])}, {format_bytes(r['gpu_memory_bytes'])}): "
                           f"{_hours_text(r)}, {format_money(r['cost'], pricing.currency)}"
                           for r in rows[:4])
        text += (f". The {gpus} options it fits, for the remaining {remaining_steps:,} steps ({end_reason}) with "
                 f"{format_duration(pricing.switch.overhead_s)} of switching: {listed}.")
        title = f"Does not fit {cur.gpu}: move to {rows[0]['gpu']}"
    numbers = {"memory_need_bytes": need, "gpu": cur.gpu, "gpu_memory_bytes": cur.gpu_memory_bytes,
               "headroom_fraction": h, "remaining_steps": remaining_steps, "end": end_reason,
               "options": rows[:8], "currency": pricing.currency}
    return [Advice("memory", title, text, numbers)]


def implausible_advice(a: CurveAnalysis, end_step: int, end_reason: str) -> list[Advice]:
    """A sanity note when the rest of the run (or the way to the target) at the current speed takes longer than
    any rented run lasts: the step numbers, the step time or the end are likely not what was meant."""
    if not a.step_time_s:
        return []
    far = max(end_step, a.steps_to_target.step if a.steps_to_target and a.steps_to_target.step else 0)
    seconds = (far - a.last_step) * a.step_time_s
    if seconds <= IMPLAUSIBLE_S:
        return []
    text = (f"Going on to step {far:,} takes {format_duration(seconds)} at {format_duration(a.step_time_s)} a step "
            f"({far - a.last_step:,} more steps): no rented run lasts that long, so treat the times and costs above "
            "as a sign that something is off. Check that the log's step column counts optimizer steps (not samples "
            "or tokens), the step time (--step-time-s) and where the run ends (--total-steps).")
    return [Advice("implausible", "Check the numbers", text,
                   {"to_step": far, "seconds": seconds, "step_time_s": a.step_time_s, "end": end_reason})]


IMPLAUSIBLE_S = YEAR_S   # a plan past a year of wall time is not one anybody rents for


def forecast_advice(a: CurveAnalysis, target_loss: float | None) -> list[Advice]:
    fit = a.fit
    if fit is None:
        return []
    out = []
    horizon = 2 * a.last_step if a.last_step > 0 else 100
    lo, hi = fit.band(np.array([horizon]))
    text = (f"Trend fit: {_mix(fit)}, weighed by BIC. At step {horizon:,} (twice the steps so far) the trend "
            f"reaches {_g(float(fit.predict(horizon)))} (90 % band {range_text(float(lo[0]), float(hi[0]))}).")
    text += floor_text(fit)
    numbers: dict[str, Any] = {"family": fit.best.family.name, "horizon_step": horizon,
                               "loss_at_horizon": float(fit.predict(horizon))}
    if target_loss is not None:
        if a.target_reached_step is not None:
            text += f" The target {_g(target_loss)} was reached at step {a.target_reached_step:,}."
        elif a.steps_to_target is not None and a.steps_to_target.step is not None:
            st = a.steps_to_target
            more = st.step - a.last_step
            hours = f", {format_duration(more * a.step_time_s)} more at the current speed" if a.step_time_s else ""
            band = f" (90 % band {st.low:,}–{st.high:,})" if st.low is not None and st.high is not None else \
                (f" (at least {st.low:,})" if st.low is not None else "")
            text += f" The target {_g(target_loss)} is reached near step {st.step:,}{band}{hours}."
            numbers["target_step"] = st.step
        else:
            st = a.steps_to_target
            span = fit.floor_range()
            where = (f" (the curve levels off near {_g(st.floor)})" if st is not None and st.floor is not None
                     else f" (the curve levels off near {_floor_words(span)})" if span is not None else "")
            text += (f" The target {_g(target_loss)} is not reached{where}: more steps of this run "
                     "will not reach it (a larger model, more data or another schedule may).")
    if a.plateau_forecast_step is not None and a.plateau_forecast_step > a.last_step:
        text += (f" It turns flat ({flat_rule_text(a.thresholds.plateau_drop_per_doubling)}) from step "
                 f"{a.plateau_forecast_step:,}.")
        numbers["plateau_forecast_step"] = a.plateau_forecast_step
    if a.diminishing_returns_step is not None and a.min_progress_per_hour:
        text += (f" From step {a.diminishing_returns_step:,} on, the loss falls by less than "
                 f"{_g(a.min_progress_per_hour)} per hour of training.")
        numbers["diminishing_returns_step"] = a.diminishing_returns_step
    out.append(Advice("forecast", "Forecast", text, numbers))
    return out


def floor_text(fit) -> str:
    """" It levels off at 2.24." when the families with weight level off at one level; their range when they
    differ (" It levels off at 2.19–2.25 (…)"); "" when one of them has no floor of its own (``TrendFit.floor_range``:
    it falls for ever, or only to the zero bound), never the weighted mean of a floor and such a bound."""
    span = fit.floor_range()
    if span is None:
        return ""
    agreed = fit.agreed_floor()
    if agreed is not None:
        return f" It levels off at {_g(agreed)}."
    return f" It levels off at {_floor_words(span)} (the fitted families disagree on where)."


def _floor_words(span: tuple[float, float]) -> str:
    lo, hi = span
    return _g(lo) if _g(lo) == _g(hi) else range_text(lo, hi)


def _mix(fit) -> str:
    used = [(f, w) for f, w in zip(fit.candidates, fit.weights) if w > 0]
    if len(used) == 1:
        return f"{used[0][0].family.name} ({used[0][0].family.formula})"
    return " + ".join(f"{w:.0%} {f.family.name}" for f, w in used)


def healthy_advice(a: CurveAnalysis) -> list[Advice]:
    last = a.phases[-1]
    return [Advice("healthy", "Training is progressing",
                   f"The loss is still falling ({last.kind.replace('_', ' ')}, {drop_text(last.drop_per_doubling)} lower per "
                   f"doubling of the steps since step {last.start_step:,}); noise ±{a.noise.relative_std:.1%} of the loss.",
                   {"phase": last.kind, "drop_per_doubling": last.drop_per_doubling})]


def plan_advice(plan: GpuPlan, no_switch: str | None = None) -> list[Advice]:
    """The plan in words; a "stay" plan says why no switch is advised where ``no_switch`` (``no_switch_reason``)
    does."""
    cur = plan.stay
    if plan.switch_step is None:
        return [Advice("plan", "Plan: stay", f"Staying on {cur.gpu_id} to step {plan.end_step:,} ({plan.end_reason}) "
                       f"is the plan: {format_money(cur.cost, plan.currency)}"
                       + (f", {format_duration(cur.hours * 3600)}{_preempted(cur.preemption_hours)}"
                          if cur.preemption_hours else "") + (f"; {no_switch}." if no_switch else "."),
                       {"cost": cur.cost, "saving": 0.0, "preemption_hours": cur.preemption_hours,
                        "no_switch": no_switch})]
    moved = plan.phases[-1]
    return [Advice("plan", f"Plan: move to {moved.gpu_id} now",
                   f"Now, move to {moved.gpu_id} ({_seller(moved.provider, moved.spot)}) for the steps "
                   f"to {plan.end_step:,} "
                   f"({plan.end_reason}): {format_money(plan.cost, plan.currency)} in all against "
                   f"{format_money(cur.cost, plan.currency)} staying on {cur.gpu_id}; saves "
                   f"{format_money(plan.saving, plan.currency)} (switching included), "
                   f"{format_duration(plan.hours * 3600)}{_preempted(plan.preemption_hours)} against "
                   f"{format_duration(cur.hours * 3600)}{_preempted(cur.preemption_hours)}.",
                   {"cost": plan.cost, "stay_cost": cur.cost, "saving": plan.saving, "switch_step": moved.from_step,
                    "preemption_hours": plan.preemption_hours, "stay_preemption_hours": cur.preemption_hours})]


def level_off(a: CurveAnalysis) -> tuple[int | None, str]:
    """Where the loss stops paying for its steps, and why, in words: now when the curve is flat and the fitted
    trend has no worthwhile fall left (or later, where it says that fall ends); for a falling curve, the earlier
    of the two forecast steps the Forecast gives: where it turns flat (``plateau_forecast_step``) and where its
    progress per hour gets small (``diminishing_returns_step``). (None, "") when the forecast sees no such step."""
    dim, flat_at = a.diminishing_returns_step, a.plateau_forecast_step
    per_hour = f"falls by less than {_g(a.min_progress_per_hour)} per hour of training" if a.min_progress_per_hour else ""
    flat_words = f"turns flat, {flat_rule_text(a.thresholds.plateau_drop_per_doubling)}"
    if is_flat(a):
        if dim and dim > a.last_step:
            return dim, f"where the fitted trend {per_hour}"
        return a.last_step, "the loss is flat and the fitted trend has no worthwhile fall left"
    later = {s: why for s, why in ((dim, per_hour), (flat_at, flat_words)) if s is not None and s > a.last_step}
    if not later:
        return None, ""
    step = min(later)
    why = f"where the forecast {later[step]}"
    others = [f"step {s:,}, where it {w}" for s, w in later.items() if s != step]
    if others:
        why += f"; the earlier of that and {others[0]}"
    return step, why


def stop_advice(a: CurveAnalysis, pricing: "Pricing", end_step: int, end_reason: str) -> list[Advice]:
    """The money the steps past the level-off cost on the current GPU: what stopping there saves."""
    cur = pricing.current
    stop, why = level_off(a)
    if cur is None or stop is None or stop >= end_step:
        return []
    steps = end_step - stop
    cost, hours = expected_cost_for(cur, steps, pricing.spot_risk), expected_hours_for(cur, steps, pricing.spot_risk)
    when = "now" if stop <= a.last_step else f"at step {stop:,}"
    text = f"Stopping {when} ({why}) instead of at step {end_step:,} ({end_reason}) saves {steps:,} steps: " \
           f"{format_duration(hours * 3600)} and {format_money(cost, pricing.currency)} on {cur.gpu}."
    numbers = {"stop_step": stop, "why": why, "end_step": end_step, "saved_steps": steps, "saved_hours": hours,
               "saving": cost, "currency": pricing.currency}
    if a.fit is not None:
        at_stop, at_end = (float(a.fit.predict(float(x))) for x in (max(stop, a.last_step), end_step))
        text += f" The forecast loss is {_g(at_stop)} there and {_g(at_end)} at step {end_step:,}."
        numbers.update(forecast_loss_at_stop=at_stop, forecast_loss_at_end=at_end)
    return [Advice("stop", f"Stop {when}", text, numbers)]


def is_flat(a: CurveAnalysis) -> bool:
    return a.phases[-1].kind in (PLATEAU, RISING)


def _share(x: float) -> str:
    """A share as a percentage, never "0%" for one that is not zero."""
    return "under 1%" if 0 < x < 0.01 else f"{x:.0%}"
