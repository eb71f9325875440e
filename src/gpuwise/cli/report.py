"""`gpuwise report LOG`: what a job really used and which cheaper GPU would have served (thin CLI)."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import typer

from gpuwise.cli.common import (CatalogOpt, HeadroomOpt, JsonOpt, console, currency_option, print_json,
                                text_option)
from gpuwise.cli.calibrate import NoUserCalibrationOpt, user_correction
from gpuwise.cli.workload_options import workload_options, workload_or_checked
from gpuwise.workload.model import check_precision

GpuPriceOpt = Annotated[Optional[str], typer.Option(
    "--gpu-price", help="What you paid per GPU-hour for the rented GPU: 15, ¥15, 1.29USD (default: catalog price).")]
ProviderOpt = Annotated[Optional[str], typer.Option("--provider", help="Compare prices of this provider only (autodl, aws, ...).")]


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)


@workload_options(exclude=("num_gpus",))
def report_cmd(
    log: Annotated[str, typer.Argument(help="A gpuwise run log, an nvidia-smi --query-gpu CSV log, or nvidia-smi dmon output.")],
    gpu_price: GpuPriceOpt = None,
    provider: ProviderOpt = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="The rented GPU, when the log does not name it (dmon) or names it wrongly.")] = None,
    headroom: HeadroomOpt = None,
    spot: Annotated[bool, typer.Option("--spot", help="Let spot/interruptible offers compete.")] = False,
    currency: Annotated[Optional[str], typer.Option("--currency", help="Compare costs in this currency (default: as recommend).")] = None,
    columns: Annotated[Optional[str], typer.Option("--columns", help="The --query-gpu list of a CSV log written with noheader.")] = None,
    html: Annotated[Optional[str], typer.Option("--html", help="Also write an HTML report with plots to this file.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="The job's model (as for estimate, with the same workload options): time on other GPUs then comes from the time predictor.")] = None,
    catalog: CatalogOpt = None,
    no_user_calibration: NoUserCalibrationOpt = False,
    json_out: JsonOpt = False,
    *,
    workload_kwargs: dict,
) -> None:
    """What a job really used, and which cheaper GPU would have served it, with the saving.

    Reads a gpuwise run log, an nvidia-smi --query-gpu CSV log or nvidia-smi dmon output: peak/p95 memory
    needed, busy share, idle stretches, power; the catalog GPUs that would have held the job (the same fit
    rule and headroom as estimate and recommend), how long it would have taken there (the time predictor
    with --model, else a datasheet ratio), and the saving per hour, month (730 h) and for the run.
    """
    from gpuwise.catalog import load_catalog
    from gpuwise.plan import parse_headroom
    from gpuwise.plan.scaling import time_scaling
    from gpuwise.report.build import build_report, price_options

    text_option("LOG", log, names="file", give="the log's path", unset=None)
    text_option("--gpu", gpu, names="GPU", give="a GPU's name", unset="the log's GPU")
    currency = currency_option("--currency", currency) if currency is not None else None
    cat = load_catalog(catalog)
    money, provider = price_options(cat, gpu_price=gpu_price, provider=provider, currency=currency)
    correction, calibrations = user_correction(not no_user_calibration, cat)
    # the workload options, checked with or without --model; without, --precision alone sets the datasheet ratio
    workload = workload_or_checked(model, workload_kwargs, used_without_model=("precision",))
    # without --model, the precision named wins over the one a gpuwise run log's workload records (build_report),
    # else an unknown job's
    given = workload_kwargs.get("precision")
    precision = check_precision(given) if given and workload is None else None
    scaling = time_scaling(workload.precision, workload, correction=correction) if workload else None
    report = build_report(
        log, cat, gpu=gpu, gpu_price=money,
        provider=provider, spot=spot, currency=currency, headroom_fraction=parse_headroom(headroom),
        columns=[c for c in columns.split(",") if c.strip()] if columns else None,
        scaling=scaling, workload=workload, correction=correction,
        is_calibration_run=calibration_runs(calibrations), precision=precision,
    )
    if columns:
        _warn_unused_columns(log)
    if html:
        from gpuwise.report.html import write_html

        write_html(report, html)
    if json_out:
        out = report.to_dict()
        out["html"] = html
        print_json(out)
        return
    from gpuwise.report.text import render_report

    console.print(render_report(report))
    if html:
        console.print(f"HTML report: {html}")


def calibration_runs(calibrations):
    """``is_calibration_run(measurement, gpu_id)`` for build_report: whether one of ``calibrations`` (the user's
    ``GpuCalibration`` of each GPU) was fitted on that measurement on that GPU, by the fingerprint `gpuwise
    calibrate` stores and lists for each run. None without a calibration."""
    if not calibrations:
        return None
    from gpuwise.calibrate.rows import fingerprint

    stored = {(c.gpu, r.fingerprint) for c in calibrations for r in c.runs}
    return lambda measurement, gpu_id: (gpu_id, fingerprint(measurement, gpu_id)) in stored


def _warn_unused_columns(path: str) -> None:
    """--columns names the fields of a CSV log written with ``noheader``: a log that names its own (a header, a
    run log, dmon output) is read by those, and the user is told that --columns changed nothing."""
    from gpuwise.report.dmon import looks_like_dmon
    from gpuwise.report.smi_csv import looks_like_header
    from gpuwise.runlog import is_run_log

    if is_run_log(path):
        own = "is a gpuwise run log"
    else:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = next((line for line in f if line.strip()), "")
        own = ("is nvidia-smi dmon output" if looks_like_dmon(first) else
               "has a header of its own" if looks_like_header(first) else None)
    if own:
        logging.getLogger("gpuwise.cli").warning(
            f"--columns has no effect: {path} {own}, which names its fields (--columns is for a CSV log written "
            "with noheader)")
