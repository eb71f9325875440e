"""`gpuwise advise LOG`: diagnose a loss curve (plateau, noise, no progress, divergence) and price the rest."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich import box
from rich.panel import Panel
from rich.table import Table

from gpuwise.cli import common as c
from gpuwise.cli.calibrate import NoUserCalibrationOpt, user_correction
from gpuwise.cli.workload_options import workload_options, workload_or_checked
from gpuwise.workload.model import check_precision
from gpuwise.text import clipped, for_console

_COLOURS = {"healthy": "green", "plateau": "yellow", "noisy": "yellow", "not_learning": "red", "diverged": "red"}


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


@workload_options(exclude=("num_gpus",))
def advise(
    log: Annotated[str, typer.Argument(help="Run log (gpuwise guard/run), CSV or JSONL with step and loss, HF trainer_state.json, or a TensorBoard run directory.")],
    target_loss: Annotated[Optional[float], typer.Option("--target-loss", help="Loss to reach: steps, time and cost to get there.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU the run uses (default: from the run log).")] = None,
    gpu_price: Annotated[Optional[str], typer.Option("--gpu-price", help="What you pay per GPU-hour, as report takes it: 7.5, ¥7.5, 1.29USD (default: catalog price).")] = None,
    price_per_hour: Annotated[Optional[str], typer.Option("--price-per-hour", hidden=True, help="Old name: the price per hour for all the run's GPUs (use --gpu-price).")] = None,
    step_time_s: Annotated[Optional[float], typer.Option("--step-time-s", help="Seconds per optimizer step (default: from the log's wall times).")] = None,
    provider: Annotated[Optional[str], typer.Option("--provider", help="Compare offers of this provider only.")] = None,
    num_gpus: Annotated[Optional[int], typer.Option("--num-gpus", help="GPUs the run uses (default: from the log, else 1).")] = None,
    peak_memory: Annotated[Optional[str], typer.Option("--peak-memory", help="GPU memory the run needs, e.g. 18GB (default: from the log's samples).")] = None,
    total_steps: Annotated[Optional[int], typer.Option("--total-steps", help="Where the run ends (for the remaining cost).")] = None,
    min_progress_per_hour: Annotated[Optional[float], typer.Option("--min-progress-per-hour", help="Loss drop per hour below which more steps are not worth it (default: 0.2 % of the current trend loss).")] = None,
    restart_time: Annotated[str, typer.Option("--restart-time", help="Time lost to a GPU switch on the new GPU (save, move, restart).")] = "15m",
    checkpoint_size: Annotated[str, typer.Option("--checkpoint-size", help="Checkpoint to move on a switch (at 100 MB/s).")] = "5GB",
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write a PNG: raw and smoothed loss, phases, forecast band.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="The run's model (as for estimate, with the same workload options): step times on other GPUs then come from the time predictor.")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Let spot/interruptible offers compete, priced with expected preemptions as recommend prices them.")] = False,
    preemptions_per_hour: c.PreemptionsPerHourOpt = None,
    checkpoint_every: c.CheckpointEveryOpt = None,
    currency: Annotated[Optional[str], typer.Option("--currency", help="Compare costs in this currency (default: as recommend).")] = None,
    headroom: c.HeadroomOpt = None,
    loss_tag: Annotated[Optional[str], typer.Option("--loss-tag", help="The loss series to read: a CSV/JSONL column, TensorBoard tag or run-log metric (default: the first loss-like name; the output names the others).")] = None,
    no_user_calibration: NoUserCalibrationOpt = False,
    catalog: c.CatalogOpt = None,
    json_out: c.JsonOpt = False,
    *,
    workload_kwargs: dict,
) -> None:
    """Read a loss curve and say what to do: plateau (finish on a cheaper GPU?), noisy (larger batch?),
    not learning (the GPU is not the problem), diverged; with a forecast and a GPU plan with prices."""
    from dataclasses import replace

    from gpuwise.advise import AdviseSettings, PricingRequest, SwitchCost, read_log
    from gpuwise.advise import advise as run_advise
    from gpuwise.advise.errors import AdviseError
    from gpuwise.catalog import load_catalog
    from gpuwise.plan import parse_headroom
    from gpuwise.plan.offers import check_provider
    from gpuwise.plan.scaling import time_scaling

    if plot:
        from gpuwise.plotfile import plot_format

        plot_format(plot)     # before reading the log: a path the plot cannot be written to, refused up front
    settings = AdviseSettings(target_loss=target_loss, step_time_s=step_time_s, total_steps=total_steps,
                              min_progress_per_hour=min_progress_per_hour)      # its own checks, each option named
    # --num-gpus: the workload's rule (1 to 4096), as estimate's, with or without --model
    workload = workload_or_checked(model, workload_kwargs, used_without_model=("precision",),
                                   num_gpus=1 if num_gpus is None else num_gpus)
    precision = workload_kwargs.get("precision")
    precision = check_precision(precision) if precision is not None else None
    if gpu_price is not None and price_per_hour is not None:
        raise AdviseError("give --gpu-price (per GPU-hour) or its old form --price-per-hour (for all GPUs), not both")
    currency = c.currency_option("--currency", currency) if currency is not None else None
    price, price_currency = (c.money_option("--gpu-price" if gpu_price is not None else "--price-per-hour",
                                            gpu_price if gpu_price is not None else price_per_hour,
                                            ranking_currency=currency)
                             if (gpu_price, price_per_hour) != (None, None) else (None, None))
    need_bytes = c.size_option("--peak-memory", peak_memory) if peak_memory is not None else None
    switch = SwitchCost(restart_s=c.duration_option("--restart-time", restart_time),
                        checkpoint_bytes=c.size_option("--checkpoint-size", checkpoint_size))
    spot_risk = c.spot_risk(preemptions_per_hour, checkpoint_every)     # recommend's options and rule
    c.text_option("--gpu", gpu, names="GPU", give="a GPU's name", unset="the run log's GPU")
    cat = load_catalog(catalog)
    provider = check_provider(cat, provider)     # with or without --gpu: an unknown one is refused, not ignored
    log_path = c.text_option("LOG", log, names="file", give="the loss log's path", unset=None)
    with c.progress(not json_out, f"reading {log_path}…") as report_progress:
        training_log = read_log(log_path, loss_tag, report_progress)
    # without --model, the workload a gpuwise run log records, as report takes it (--model wins)
    workload_from, workload_note = ("--model", None) if workload else (None, None)
    if workload is None:
        workload, workload_note = _recorded_workload(training_log.workload, num_gpus, precision)
        workload_from = "run log" if workload else None
    # a workload: the same calibration as estimate, recommend and report (none without: no predictor runs)
    correction, calibrated = user_correction(not no_user_calibration, cat) if workload else (None, [])
    request = PricingRequest(
        gpu_name=gpu, price_per_hour=None if gpu_price else price, price_per_gpu_hour=price if gpu_price else None,
        price_currency=price_currency, currency=currency, provider=provider, spot=spot,
        precision=precision, count=num_gpus, memory_need_bytes=need_bytes,
        headroom_fraction=parse_headroom(headroom),
        switch=switch, spot_risk=spot_risk,
        scaling=time_scaling(workload.precision, workload, correction=correction) if workload else None)
    def advise_with(scaling):
        with c.progress(not json_out, f"analysing {len(training_log.curve):,} points…"):
            return run_advise(training_log, settings, cat, replace(request, scaling=scaling))

    if workload_from != "run log":
        report = advise_with(request.scaling)
    else:   # the log's word is no option of the user's: what fails on it is a line, not an exit
        report, failure = _attempt(advise_with, request.scaling)
        if failure is not None and failure is getattr(correction, "error", None):
            # the user's calibration file refused (``Refusing``), not the log's workload: the shipped time model
            workload_note, calibrated = f"the shipped time predictor, without your calibration: {failure}", []
            report, failure = _attempt(advise_with, time_scaling(workload.precision, workload))
        if failure is not None:   # the predictor traces the model when first asked: the datasheet ratio then
            workload_note = "; ".join(filter(None, (workload_note, (
                f"no prediction for the run log's workload ({workload.model}): {clipped(str(failure), 200)}"))))
            workload, workload_from, calibrated = None, None, []
            report = advise_with(None)
    c.refuse_non_finite(report.to_dict(), _scales(step_time_s, total_steps, gpu_price or price_per_hour))
    plot_path = None
    if plot:
        from gpuwise.advise.plot import plot_report

        plot_path = str(plot_report(report, plot))
    if json_out:
        out = report.to_dict()
        out["plot"] = plot_path
        out["user_calibration"] = [cal.summary for cal in calibrated]
        out["workload"] = None if workload is None else {"from": workload_from, **workload.to_dict()}
        out["workload_note"] = workload_note
        c.print_json(out)
        return
    scaled_by = None
    if workload:
        scaled_by = f"the time predictor for {workload.model}"
        if workload_from == "run log":
            scaled_by += (f" (batch {workload.batch_size}, {workload.precision}: the workload the run log records; "
                          "--model gives another)")
        if calibrated:
            scaled_by += (f", calibrated with your runs on {', '.join(sorted(cal.gpu for cal in calibrated))} "
                          "(gpuwise calibrate; --no-user-calibration for the shipped model)")
    _render(report, plot_path, scaled_by=scaled_by)
    if workload_note:
        c.console.print(f"[dim]Workload: {for_console(workload_note)}.[/dim]")


def _recorded_workload(record, num_gpus: int | None, precision: str | None):
    """(the workload a gpuwise run log records, None) with --num-gpus and --precision, where given, over the
    record's; (None, why) when the record names a model that is not traced on the log's word (report's rule:
    ``report.measured.public_model``, a local file runs code of its own) or cannot be read; (None, None) when
    the log records no model."""
    from gpuwise.errors import GpuwiseError
    from gpuwise.report.measured import PRIVATE_MODEL, public_model
    from gpuwise.report.predicted_vs_measured import recorded_workload

    if not isinstance(record, dict) or not record.get("model"):
        return None, None
    if public_model(str(record["model"])) == PRIVATE_MODEL:
        return None, ("the run log's workload names a local model file: pass --model SPEC (with the same workload "
                      "options) for the time predictor")
    try:
        workload = recorded_workload(record, precision)      # a given --precision wins, as in report
        return (workload if num_gpus is None else workload.with_(num_gpus=num_gpus)), None
    except (GpuwiseError, TypeError, ValueError) as exc:
        return None, f"the run log's workload is not one gpuwise reads ({str(exc)[:200]}): pass --model SPEC"


def _attempt(advise_with, scaling):
    """(the report, None) with ``scaling``; (None, the error) where the time predictor failed while pricing."""
    from gpuwise.errors import GpuwiseError

    try:
        return advise_with(scaling), None
    except (GpuwiseError, TypeError, ValueError) as exc:
        return None, exc


def _scales(step_time_s: float | None, total_steps: int | None, price: str | None) -> str:
    """The options given that scale advise's times and costs, as a refusal names them (``refuse_non_finite``)."""
    given = [f"{flag} {value}" for flag, value in (("--step-time-s", step_time_s), ("--total-steps", total_steps),
                                                    ("the price", price)) if value is not None]
    return ", ".join(given) or "the log's step times and the prices"


def _render(report, plot_path: str | None, scaled_by: str | None = None) -> None:
    from gpuwise.advise.advice import eval_rise_headline
    from gpuwise.advise.wording import drop_text
    from gpuwise.units import format_duration, format_money

    d = report.to_dict()
    colour = _COLOURS[report.diagnosis]
    step_time = f", {format_duration(d['step_time_s'])}/step" if d["step_time_s"] else ""
    series = f" of {for_console(report.loss_name)!r}" if report.loss_name else ""
    thinned = d["thinned"]
    thinned = (f" (thinned on read from {thinned['rows_read']:,} rows: one per {thinned['bin_steps']:,} steps)"
               if thinned else "")
    c.console.print(f"[bold]{for_console(report.source)}[/bold]: {d['points']:,} points{series}{thinned} to step "
                    f"{d['last_step']:,}{step_time}; loss trend {d['current_trend_loss']:.4g}, "
                    f"noise ±{d['noise']['relative_std']:.1%}")
    if d["wall_times_unused"] and d["wall_times_unused"] != d["pricing_note"]:   # else the prices line says it
        c.console.print(f"[yellow]No step time[/yellow]: {for_console(d['wall_times_unused'])}.")
    if report.other_loss_names:
        c.console.print(f"Also loss-like, not used: {', '.join(repr(for_console(n)) for n in report.other_loss_names)} "
                        "(--loss-tag NAME reads another).")
    skipped = d["skipped_nonfinite"]
    if skipped["count"]:
        first = ", ".join(f"{x:,}" for x in skipped["steps"][:5]) + (", …" if skipped["count"] > 5 else "")
        c.console.print(f"Skipped {skipped['count']:,} NaN/inf loss{'es' if skipped['count'] > 1 else ''} "
                        f"(step{'s' if skipped['count'] > 1 else ''} {first}) that finite losses follow: the run "
                        "recovered (fp16 loss scaling skips such steps); diverged only when the log ends on NaN/inf.")
    end = report.run_end
    if end is not None and end.cut_short:   # first: what follows reads a curve the run's end cut short
        c.console.print(f"[bold red]The run did not finish[/bold red]: {for_console(end.words)}.")
    elif end is not None and end.finished:
        c.console.print(f"The run finished at step {end.step:,} (the guard recorded it)." if end.step is not None
                        else "The run finished (the guard recorded it).")
    cut = f" (of the steps before the run {end.how})" if end is not None and end.cut_short else ""
    c.console.print(f"Diagnosis: [bold {colour}]{report.diagnosis.replace('_', ' ')}[/bold {colour}]{cut}")
    o = d["overfitting"]
    if o is not None:
        c.console.print(f"[bold yellow]Overfitting[/bold yellow]: eval loss rising since step {o['since_step']:,} "
                        "while train loss falls.")
    if report.eval_rising is not None:
        headline = eval_rise_headline(report.eval_rising)
        c.console.print(f"[bold yellow]Eval loss rising[/bold yellow]: {for_console(headline)}.")
    phases = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Phases", title_justify="left")
    for col in ("phase", "from step", "to step", "drop per doubling"):
        phases.add_column(col, justify="left" if col == "phase" else "right")
    for p in d["phases"]:
        phases.add_row(p["kind"].replace("_", " "), f"{p['start_step']:,}", f"{p['end_step']:,}",
                       drop_text(p["drop_per_doubling"]))
    c.console.print(phases)
    ns = d["noise_scale"]
    if ns is not None and ns.get("b_simple") is not None:
        c.console.print(f"Gradient noise scale B_simple ≈ {ns['b_simple']:,.0f} (critical batch) vs batch "
                        f"{ns['batch_size']:g}: {ns['step_efficiency']:.0%} of the largest progress per step, "
                        f"{ns['sample_efficiency']:.0%} per sample.")
    for item in report.advice:
        c.console.print(Panel(item.text, title=item.title, title_align="left", border_style=_advice_colour(item.kind)))
    if report.plan is not None and report.plan.saving > 0:
        plan = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="GPU plan", title_justify="left")
        for col in ("steps", "GPU", "provider", "time", "cost"):
            plan.add_column(col, justify="right" if col in ("time", "cost") else "left")
        cur = report.plan.currency
        for p in report.plan.phases:
            plan.add_row(f"{p.from_step:,}–{p.to_step:,}", for_console(p.gpu_id), _seller(p), format_duration(p.hours * 3600),
                         format_money(p.cost, cur))
        s = report.plan.stay
        plan.add_row(f"stay: {s.from_step:,}–{s.to_step:,}", for_console(s.gpu_id), _seller(s), format_duration(s.hours * 3600),
                     format_money(s.cost, cur), style="dim")
        c.console.print(plan)
    prices = "; ".join(filter(None, (d["pricing_note"], report.pricing.spot_note)))
    if prices:
        c.console.print(f"[dim]Prices: {for_console(prices)}.[/dim]")
    from gpuwise.runtime.rates import DATASHEET_METHOD

    scaled_by = scaled_by or f"the {DATASHEET_METHOD} (--model uses the time predictor)"
    checked = f" (checked {', '.join(d['prices_checked'])})" if d["prices_checked"] else ""
    rates = (f" Costs in {d['ranking_currency']}; exchange rates indicative as of {d['exchange_rates']['checked']}."
             if d["exchange_rates"] else "")
    c.console.print(f"[dim]Step times on other GPUs are scaled by {scaled_by}; catalog prices are indicative"
                    f"{checked}.{rates}[/dim]")
    if plot_path:
        c.console.print(f"Plot: {plot_path}")


def _seller(phase) -> str:
    """A plan phase's provider, 'gcp (spot)' for a spot offer as recommend's table marks one."""
    return for_console(phase.provider) + (" (spot)" if phase.spot else "")


def _advice_colour(kind: str) -> str:
    return {"run_end": "red", "diverged": "red", "not_learning": "red", "overfitting": "yellow", "eval_rising": "yellow",
            "noisy": "yellow", "plateau": "yellow",
            "batch_size": "cyan", "switch_gpu": "green", "plan": "green", "healthy": "green"}.get(kind, "blue")
