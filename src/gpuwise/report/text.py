"""The report for a terminal (rich renderables). Knows nothing of how the numbers were made."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpuwise.table_fit import widest_fitting
from gpuwise.report.build import Report
from gpuwise.report.predicted_vs_measured import comparison_footer, comparison_rows, comparison_title
from gpuwise.report.run_end import run_end_line
from gpuwise.report.usage import gpu_labels
from gpuwise.units import format_bytes, format_duration, format_money
from gpuwise.text import for_console

MAX_ROWS = 10


def _money(x: float | None, currency: str | None) -> str:
    """Every amount of the report, table and verdict alike, by the one money rule (``format_money``), so that a
    saving reads the same wherever it is said; a table too wide for the terminal gives way column by column."""
    return "-" if x is None or currency is None else format_money(x, currency)


def rows_shown(r) -> list:
    """The rows the table shows: the GPUs that fit and save, biggest saving first, up to MAX_ROWS, and the
    rented GPU when it holds the job; where no saving can be computed (``no_saving_line``: the rented GPU is
    not in the catalog or has no price) or there are no such rows (the rented GPU does not hold the job), the
    GPUs that hold the job, cheapest for the work first."""
    if no_saving_line(r) is not None:
        return holding(r)[:MAX_ROWS]
    rows = list(r.cheaper[:MAX_ROWS])
    rows += [o for o in r.options if o.rented and o.fits]
    return rows or holding(r)[:MAX_ROWS]


def holding(r) -> list:
    """The GPUs that would have held the job: cheapest for the work first, then (no time× without the rented
    GPU) cheapest to rent, GPUs without a price last."""
    return sorted((o for o in r.options if o.fits), key=lambda o: (
        o.cost_per_job_hour is None, o.cost_per_job_hour or 0.0,
        o.price_per_hour_all_gpus is None, o.price_per_hour_all_gpus or 0.0))


def no_saving_line(r) -> str | None:
    """Why the table of GPUs that hold the job has no savings, when the rented GPU gives no price to save on."""
    if r.cheaper or r.rented_price_per_gpu_hour is not None:
        return None
    held = f"{len(holding(r))} GPU(s) of the catalog hold {format_bytes(r.needed_bytes)}"
    if r.rented_gpu_id is None:
        return f"{held}; the rented GPU is not in the catalog, so no time× or saving can be computed (--gpu NAME)."
    return f"{held}; the rented GPU has no price, so no saving can be computed (--gpu-price)."


def render_report(report: Report) -> Group:
    u, r = report.usage, report.right_sizing
    job = u.job_devices
    parts: list = []
    parts.append(Text.assemble(
        ("gpuwise report", "bold"), f": {u.path} ({u.source}), {format_duration(u.duration_s)}, {_gpus(report)}"))
    end_line = run_end_line(report.run_end)
    if end_line is not None:
        failed = report.run_end.ended in ("failed", "killed")   # stopped and preempted runs did not fail
        parts.append(Text(end_line, style="bold red" if failed else "bold yellow"))
    basis = "the job's processes" if job and job[0].memory_basis == "process" else "GPU memory used"
    if u.mixed_gpus:
        parts.append(Text(f"The job's GPUs differ in kind; each kind's use  [memory: {basis}]:"))
        parts.extend(Text(f"  {kind_line(k)}") for k in u.gpu_kinds)
    elif u.needed_peak_bytes is not None:
        parts.append(Text(f"Memory needed  peak {format_bytes(u.needed_peak_bytes)}, p95 "
                          f"{format_bytes(u.needed_p95_bytes or 0)}{_share(u.needed_peak_bytes, u.gpu_kinds[0])}"
                          f"  [{basis}]"))
    for p in u.torch_peaks:
        parts.append(Text(f"PyTorch        pid {p.pid} cuda:{p.device}: max allocated "
                          f"{format_bytes(p.max_allocated_bytes)} (needed by tensors), max reserved "
                          f"{format_bytes(p.max_reserved_bytes)} (allocator cache "
                          f"{format_bytes(p.max_reserved_bytes - p.max_allocated_bytes)})"))
    if report.predicted_vs_measured is not None:
        parts.extend(_comparison(report.predicted_vs_measured))
    if u.busy_share is not None:
        parts.append(Text(f"Busy           {u.busy_share:.0%} of the time (share of time any kernel ran)"
                          f"{_idle_words(u)}"))
    if u.power_words is not None:
        parts.append(Text(f"Power          {u.power_words}"))
    for warning in report.warnings:
        parts.append(Text(f"warning: {for_console(warning)}", style="bold yellow"))
    if r is not None:
        n = r.gpu_count
        gpus = f"{n} GPUs together, as in the run" if n > 1 else "one GPU"
        parts.append(Text(""))
        parts.append(Text.from_markup(
            f"Needed [bold]{format_bytes(r.needed_bytes)}[/bold] per GPU; a GPU holds it when that is within its "
            f"memory as nvidia-smi reports it, {r.headroom_fraction:.0%} kept free (as estimate and recommend). "
            f"Time elsewhere by {r.method} ({r.method_basis}); price/h: {gpus}; work/h: what the work of one "
            f"measured hour costs there (price/h × time×); savings against what was paid, per month = 730 h; "
            f"money in {r.currency}."))
        if r.rented_price_per_gpu_hour is not None:
            paid = _money(r.rented_price_per_gpu_hour, r.currency)
            rented = u.gpus_rented
            all_gpus = (f" = {_money(r.rented_price_per_gpu_hour * rented, r.currency)}/h for {rented} GPUs"
                        if rented > 1 else "")
            idle_paid = _money(r.idle_gpus_cost_per_hour, r.currency)
            idle = (f"; {r.idle_gpu_count} of them idle (their {idle_paid}/h comes on top of every saving): "
                    f"compared as the {n} the job used") if r.idle_gpu_count else ""
            parts.append(Text(f"Rented: {rented} × {r.rented_gpu_name or '?'} at {paid}/h per GPU{all_gpus} "
                              f"({r.price_source}){idle}"))
        shown = rows_shown(r)
        said = no_saving_line(r)
        if shown:
            if said:
                parts.append(Text(said))
            parts.append(_FittedTable(r, shown))
        else:
            parts.append(Text(f"No GPU in the catalog holds {format_bytes(r.needed_bytes)} with "
                              f"{r.headroom_fraction:.0%} of its memory kept free."))
        cheaper = r.cheaper
        listed = cheaper or (holding(r) if said or not any(o.rented for o in shown) else [])
        if len(listed) > MAX_ROWS:
            kind, where = ("cheaper GPU(s)", "--json or --html lists") if cheaper else ("GPU(s) that hold it", "--json lists")
            parts.append(Text(f"{len(listed) - MAX_ROWS} more {kind} not shown ({where} every one).", style="dim"))
        guess = (" (too short to judge: see the note)" if u.too_short else
                 f" (of {report.run_end.run_words}: see the first line)" if end_line is not None else "")
        if cheaper:
            best = cheaper[0]
            parts.append(Text.from_markup(
                f"[bold green]Verdict[/bold green]{guess}: {len(cheaper)} cheaper GPU(s) would have held this job; "
                f"the best, {best.gpu_name}, saves {_money(best.saving_per_hour, r.currency)}/h, "
                f"{_money(best.saving_per_month, r.currency)} per month (730 h), "
                f"{_money(best.saving_for_run, r.currency)} on this run."))
        elif r.rented_price_per_gpu_hour is not None:
            parts.append(Text.from_markup(f"[bold]Verdict[/bold]{guess}: no cheaper GPU in the catalog would have done this work."))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def _share(peak_bytes: int, kind) -> str:
    total = kind.memory_total_bytes
    return f" of {format_bytes(total)} ({peak_bytes / total:.0%})" if total else ""


def kind_line(kind) -> str:
    """One kind of the job's GPUs and what it used: "1 × NVIDIA A100-SXM4-80GB (GPU 1): peak 58.6 GiB, p95 …"."""
    head = f"{kind.count} × {for_console(kind.name or 'unknown GPU')} ({gpu_labels(kind.labels)}): "
    memory = ("memory unknown" if kind.needed_peak_bytes is None else
              f"peak {format_bytes(kind.needed_peak_bytes)}, p95 {format_bytes(kind.needed_p95_bytes or 0)}"
              f"{_share(kind.needed_peak_bytes, kind)}")
    busy = "busy unknown" if kind.busy_share is None else f"busy {kind.busy_share:.0%}"
    return f"{head}{memory}, {busy}"


def _gpus(report: Report) -> str:
    """The header's GPUs: the count and the name the log gives, and the GPU --gpu named when it is another."""
    u = report.usage
    if u.mixed_gpus:
        compared = f"; compared as {report.compared_as} (--gpu)" if report.compared_as else ""
        names = ", ".join(for_console(k.name or "unknown GPU") for k in u.gpu_kinds)
        return f"{u.gpus_words()}: {names}{compared}"
    logged = u.gpu_name
    if report.compared_as is None:
        return u.gpus_words(logged)
    if logged is None:
        return u.gpus_words(f"{report.compared_as} (--gpu)")
    return f"{u.gpus_words(logged)} in the log; compared as {report.compared_as} (--gpu)"


def _idle_words(u) -> str:
    """The job's idle stretches: "; 2 idle stretch(es), 23.2 min in all, longest …" on one GPU; on several, in GPU
    time and per GPU (a sum over 8 GPUs is not the job's time): "; 72 idle stretch(es) on 8 GPUs, 12.0 h of GPU time
    in all (1.5 h per GPU on average), longest …"; "" without any."""
    stretches = u.idle_stretches
    if not stretches:
        return ""
    longest = max(stretches, key=lambda s: s.duration_s)
    gpus = u.idle_judged_count
    total = (f"{format_duration(u.idle_gpu_s)} in all" if gpus <= 1 else
             f"on {gpus} GPUs, {format_duration(u.idle_gpu_s)} of GPU time in all "
             f"({format_duration(u.idle_s_per_gpu)} per GPU on average)")
    return (f"; {len(stretches)} idle stretch(es){',' if gpus <= 1 else ''} {total}, longest "
            f"{format_duration(longest.duration_s)} {_from(longest.start_s)}")


def _from(start_s: float) -> str:
    """Where an idle stretch starts, in words: "from the start", or "from 12.0 min in"."""
    return "from the start" if start_s < 0.5 else f"from {format_duration(start_s)} in"


def _comparison(c) -> list:
    """Predicted vs measured: a title, a table of the figures (cells never wrap mid-phrase), the footer."""
    t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("  figure", "predicted", "measured", "error"):
        t.add_column(col, justify="left" if col == "  figure" else "right", no_wrap=True)
    for name, predicted, measured, err in comparison_rows(c):
        t.add_row(f"  {name}", predicted, measured, err)
    return [Text(comparison_title(c)), t, *(Text(f"  {line}") for line in comparison_footer(c))]


_COLUMNS = ("GPU", "GiB", "time×", "price/h", "work/h", "save/h", "save/month", "save/run")
# What gives way on a narrow terminal, in order (watch's rule, monitor.live): these columns, then the space
# between columns; on a terminal narrower still a cell folds onto a second line. A number is never cut.
_GIVE_WAY = ("save/month", "save/run", "GiB", "work/h")
_LAYOUTS = [(_GIVE_WAY[:k], False) for k in range(len(_GIVE_WAY) + 1)] + [(_GIVE_WAY, True)]


class _FittedTable:
    """The GPU table at the widest of ``_LAYOUTS`` that fits the console, its footnote (``*``: the rented GPU,
    when its row is shown), and a line naming the columns left out."""

    def __init__(self, r, rows) -> None:
        self.r, self.rows = r, rows

    def __rich_console__(self, console, options):
        width = options.max_width
        table = widest_fitting(_LAYOUTS, width,
                                lambda left_out, compact: _table(self.r, self.rows, left_out, compact))
        yield table
        if any(o.rented for o in self.rows):
            yield Text("* the rented GPU", style="dim")
        shown = {str(c.header) for c in table.columns}
        left_out = [c for c in _COLUMNS if c not in shown]
        if left_out:
            yield Text(f"{', '.join(left_out)} left out to fit {width} columns (a wider terminal or --json shows "
                       f"{'them' if len(left_out) > 1 else 'it'}).", style="dim")


def _table(r, rows, left_out: tuple[str, ...] = (), compact: bool = False) -> Table:
    # Narrow enough for an 80-column terminal: ids, not full names; the offer goes into --json/--html.
    # Every money column is for the run's GPU count (a GPU ×N): work/h = price/h × time× can be checked.
    # ``left_out``: columns not shown; ``compact``: one space between columns. Cells fold, never cut.
    t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", collapse_padding=compact)
    columns = [c for c in _COLUMNS if c not in left_out]
    for col in columns:
        t.add_column(col, justify="left" if col == "GPU" else "right", overflow="fold")
    times = f" ×{r.gpu_count}" if r.gpu_count > 1 else ""
    for o in rows:
        style = "bold" if o.rented else ("green" if (o.saving_per_hour or 0) > 0 else None)
        cells = {
            "GPU": for_console(o.gpu_id) + times + (" *" if o.rented else ""), "GiB": f"{o.memory_bytes / 2**30:.0f}",
            "time×": f"{o.time_factor:.2f}" if o.time_factor is not None else "-",
            "price/h": _money(o.price_per_hour_all_gpus, r.currency), "work/h": _money(o.cost_per_job_hour, r.currency),
            "save/h": _money(o.saving_per_hour, r.currency), "save/month": _money(o.saving_per_month, r.currency),
            "save/run": _money(o.saving_for_run, r.currency),
        }
        t.add_row(*(cells[c] for c in columns), style=style)
    return t
