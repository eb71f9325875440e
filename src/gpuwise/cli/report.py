"""`gpuwise report LOG`: what a job really used and which cheaper GPU would have served (thin CLI)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpuwise.cli.common import CatalogOpt, ImageSizeOpt, JsonOpt, SeqLenOpt, build_workload, console, print_json

GpuPriceOpt = Annotated[Optional[str], typer.Option(
    "--gpu-price", help="What you paid per GPU-hour for the rented GPU: 15, ¥15, 1.29USD (default: catalog price).")]
ProviderOpt = Annotated[Optional[str], typer.Option("--provider", help="Compare prices of this provider only (autodl, aws, ...).")]


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        log: Annotated[str, typer.Argument(help="A gpuwise run log, an nvidia-smi --query-gpu CSV log, or nvidia-smi dmon output.")],
        gpu_price: GpuPriceOpt = None,
        provider: ProviderOpt = None,
        gpu: Annotated[Optional[str], typer.Option("--gpu", help="The rented GPU, when the log does not name it (dmon).")] = None,
        headroom: Annotated[Optional[str], typer.Option("--headroom", help="Memory kept free on top of the need: 10%, 2GB (default 10%, at least 1 GiB).")] = None,
        precision: Annotated[str, typer.Option("--precision", help="Peak rate used to scale busy time between GPUs: fp32, tf32, fp16, bf16.")] = "fp16",
        columns: Annotated[Optional[str], typer.Option("--columns", help="The --query-gpu list of a CSV log written with noheader.")] = None,
        html: Annotated[Optional[str], typer.Option("--html", help="Also write an HTML report with plots to this file.")] = None,
        model: Annotated[Optional[str], typer.Option("--model", help="The job's model (as for estimate): time on other GPUs then comes from the time predictor.")] = None,
        batch_size: Annotated[int, typer.Option("--batch-size", help="With --model: the micro-batch per GPU.")] = 32,
        seq_len: SeqLenOpt = None,
        image_size: ImageSizeOpt = None,
        catalog: CatalogOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """What a job really used, and which cheaper GPU would have served it, with the saving.

        Reads a gpuwise run log, an nvidia-smi --query-gpu CSV log or nvidia-smi dmon output: peak/p95 memory
        needed, busy share, idle stretches, power; the catalog GPUs that would have held the job, how long it
        would have taken there (busy-share scaling, or the time predictor with --model), and the saving per hour, month (730 h) and for the run.
        """
        from gpuwise.catalog import PRECISIONS, load_catalog
        from gpuwise.errors import did_you_mean
        from gpuwise.report.build import build_report
        from gpuwise.report.errors import ReportError
        from gpuwise.report.rightsize import parse_headroom
        from gpuwise.units import parse_money

        if precision not in PRECISIONS:
            raise ReportError(f"unknown --precision {precision!r}{did_you_mean(precision, PRECISIONS)}")
        predicted = {}
        if model:
            from gpuwise.report.predicted import method_label, predicted_step_time

            workload = build_workload(model, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                                      precision={"fp16": "amp-fp16", "bf16": "amp-bf16"}.get(precision, precision))
            predicted = {"step_time_s": predicted_step_time(workload), "method": method_label(workload)}
        report = build_report(
            log, load_catalog(catalog), gpu=gpu, gpu_price=parse_money(gpu_price) if gpu_price else None,
            provider=provider, headroom=parse_headroom(headroom), precision=precision,
            columns=[c for c in columns.split(",") if c.strip()] if columns else None, **predicted,
        )
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
