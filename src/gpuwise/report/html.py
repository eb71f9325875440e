"""The report as one self-contained HTML file: plots are matplotlib PNGs embedded as base64."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from gpuwise.atomic import write_text_atomic
from gpuwise.plan.fit import usable_of
from gpuwise.report.build import Report
from gpuwise.report.decimate import min_max_decimate
from gpuwise.report.errors import ReportError
from gpuwise.report.predicted_vs_measured import comparison_lines
from gpuwise.report.run_end import run_end_line
from gpuwise.report.sample_table import sample_table
from gpuwise.report.text import kind_line
from gpuwise.report.usage import gpu_labels, spans
from gpuwise.units import format_bytes, format_duration, format_money

GIB = 2**30
MAX_BARS = 20   # GPUs the chart draws (the cheapest for the work, and the rented one); the table lists every one
NAN = float("nan")
SECONDS_AXIS_BELOW_S = 120.0   # a shorter run is drawn on an axis of seconds, a longer one of minutes
LEGEND_MAX_GPUS = 8   # more of the job's GPUs share one colour and one legend entry per line kind
MANY_GPUS_COLORS = {"memory used": "tab:blue", "job's processes": "tab:orange", "": "tab:blue"}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def time_axis(run_s: float) -> tuple[float, str]:
    """(seconds per unit, unit name) of the timeline's axis, scaled to the run: seconds for a run under
    SECONDS_AXIS_BELOW_S, else minutes."""
    return (1.0, "seconds") if run_s < SECONDS_AXIS_BELOW_S else (60.0, "minutes")


def has_lone_point(y: np.ndarray) -> bool:
    """Whether the line ``y`` (NaN a break) has a reading with a break or an end on both sides: a line draws
    nothing there, so it needs a marker (a sample alone between gaps, readings missing every other sample)."""
    known = np.r_[False, ~np.isnan(y), False]
    return bool(np.any(known[1:-1] & ~known[:-2] & ~known[2:]))


def line_style(label: str, kind: str, job_labels: tuple[str, ...], kind_named: bool) -> dict:
    """The plot keywords of GPU ``label``'s line of ``kind`` ("memory used", "job's processes", "" for its busy
    share). Up to LEGEND_MAX_GPUS GPUs, each line is its own entry ("GPU 3 memory used"); more would make a legend
    taller than the plot, so each kind gets one colour and one entry naming every GPU ("GPUs 0-63 memory used"), on
    the first line drawn of that kind (``kind_named``: one was drawn already)."""
    if len(job_labels) <= LEGEND_MAX_GPUS:
        return {"label": f"{gpu_labels([label])} {kind}".strip()}
    return {"color": MANY_GPUS_COLORS[kind], "alpha": 0.5,
            "label": "_nolegend_" if kind_named else f"{gpu_labels(job_labels)} {kind}".strip()}


def _timeline_png(report: Report) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u, r = report.usage, report.right_sizing
    fig, (ax_mem, ax_busy) = plt.subplots(2, 1, figsize=(9, 5.2), sharex=True)
    table = sample_table(report.samples)
    devices = {d.label: d for d in table.devices() if d.label in u.job_labels}
    last_s = max((d.last_t_s - u.start_t_s for d in devices.values()), default=0.0)
    unit_s, unit_name = time_axis(last_s)
    drawn: set[str] = set()   # the kinds of line drawn so far
    for label in u.job_labels:
        own = devices[label]
        # A gap (usage.spans) breaks the line, as a missing reading does.
        breaks = [b for _, b in spans(own.t_s)]

        def plot(ax, column: str, kind: str, unit: float = 1.0, lw: float = 1.0) -> None:
            t = np.insert((own.t_s - u.start_t_s) / unit_s, breaks, NAN)
            y = np.insert(own.values[column] / unit, breaks, NAN)
            t, y = min_max_decimate(t, y)     # a long log: what a pixel column shows, not every sample
            dots = {"marker": "o", "markersize": 3} if has_lone_point(y) else {}
            ax.plot(t.tolist(), y.tolist(), lw=lw, **line_style(label, kind, u.job_labels, kind in drawn), **dots)
            drawn.add(kind)

        if own.reported("memory_used_bytes").size:
            plot(ax_mem, "memory_used_bytes", "memory used", GIB)
        if own.reported("process_memory_bytes").any():
            plot(ax_mem, "process_memory_bytes", "job's processes", GIB)
        if own.reported("utilization_pct").size:
            plot(ax_busy, "utilization_pct", "", lw=0.8)
    for ax, what in ((ax_mem, "memory use"), (ax_busy, "utilisation")):
        if not ax.lines:
            ax.text(0.5, 0.5, f"no {what} in the log", transform=ax.transAxes, ha="center", va="center", color="grey")
    right = last_s / unit_s if last_s > 0 else 1.0      # a single sample still gets an axis, from 0
    ax_busy.set_xlim(-0.02 * right, 1.02 * right)
    if u.mixed_gpus:        # each kind's memory, named: no one GPU was rented
        for k in u.gpu_kinds:
            if k.memory_total_bytes:
                ax_mem.axhline(k.memory_total_bytes / GIB, color="grey", ls="--", lw=1,
                               label=f"memory of {k.name or 'a GPU'} ({gpu_labels(k.labels)})")
    elif (total := u.gpu_kinds[0].memory_total_bytes if u.gpu_kinds else None):
        ax_mem.axhline(total / GIB, color="grey", ls="--", lw=1, label="memory of the rented GPU")
        if r is not None:
            ax_mem.axhline(usable_of(total, r.headroom_fraction) / GIB, color="tab:red", ls=":", lw=1.2,
                           label=f"usable ({r.headroom_fraction:.0%} kept free, as every command)")
    ax_mem.set_ylabel("GiB")
    ax_mem.set_ylim(bottom=0)
    if ax_mem.get_legend_handles_labels()[0]:    # beside the plot, never over its lines
        ax_mem.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax_mem.set_title("Memory")
    ax_busy.set_ylabel("busy %")
    ax_busy.set_ylim(0, 105)
    ax_busy.set_xlabel(unit_name)
    ax_busy.set_title("Busy share (time in which any kernel ran)")
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def _options_png(report: Report) -> str | None:
    r = report.right_sizing
    if r is None or r.currency is None:
        return None
    rows = _bars(r)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows[::-1]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    colors = ["tab:orange" if o.rented else ("tab:green" if (o.saving_per_hour or 0) > 0 else "tab:grey") for o in rows]
    ax.barh([o.gpu_name for o in rows], [o.cost_per_job_hour for o in rows], color=colors)
    if r.rented_price_per_gpu_hour is not None:
        ax.axvline(r.rented_price_per_gpu_hour * r.gpu_count, color="tab:red", ls="--", lw=1, label="paid per hour")
        ax.legend(fontsize=8)
    ax.set_xlabel(f"{r.currency} for the work of one measured hour (price × time factor)")
    ax.set_title("GPUs that would have held the job")
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def _money(x: float | None, currency: str | None) -> str:
    return "-" if x is None or currency is None else html.escape(format_money(x, currency))


def _rows(r) -> list:
    """The GPUs the table lists: every one that would have held the job, cheapest for the work first, and
    the rented one."""
    rows = [o for o in r.options if o.fits and o.cost_per_job_hour is not None]
    return rows + [o for o in r.options if o.rented and o.cost_per_job_hour is not None and o not in rows]


def _bars(r) -> list:
    """The GPUs the chart draws: the table's first MAX_BARS (the cheapest for the work), and the rented one."""
    rows = _rows(r)
    return rows[:MAX_BARS] + [o for o in rows[MAX_BARS:] if o.rented]


def _chart_caption(r) -> str:
    listed, drawn = len(_rows(r)), len(_bars(r))
    if drawn == listed:
        return "GPUs that would have held the job"
    return f"GPUs that would have held the job: the {MAX_BARS} cheapest for the work of the {listed} the table lists"


def render_html(report: Report) -> str:
    u, r = report.usage, report.right_sizing
    e = html.escape
    facts = [
        ("Log", f"{u.path} ({u.source})"),
        ("GPU", u.gpus_words(u.gpu_name or "unknown")
                + (f"; compared as {report.compared_as} (--gpu)" if report.compared_as else "")),
        ("Duration", format_duration(u.duration_s)),
    ]
    end_line = run_end_line(report.run_end)
    if end_line is not None:
        facts.insert(1, ("Ended", end_line))
    if u.mixed_gpus:
        facts.extend(("" if i else "Each kind's use", kind_line(k)) for i, k in enumerate(u.gpu_kinds))
    elif u.needed_peak_bytes is not None:
        facts.append(("Memory needed", f"peak {format_bytes(u.needed_peak_bytes)}, p95 {format_bytes(u.needed_p95_bytes or 0)}"))
    if u.busy_share is not None:
        facts.append(("Busy", f"{u.busy_share:.0%} of the time (any kernel running)"))
    if u.power_words is not None:
        facts.append(("Power", u.power_words))
    for p in u.torch_peaks:
        facts.append((f"PyTorch pid {p.pid}", f"max allocated {format_bytes(p.max_allocated_bytes)}, "
                                              f"max reserved {format_bytes(p.max_reserved_bytes)}"))
    if report.predicted_vs_measured is not None:
        title, *lines = comparison_lines(report.predicted_vs_measured)
        facts.extend((title if i == 0 else "", line.strip()) for i, line in enumerate(lines))
    rows_html = ""
    verdict = ""
    if r is not None:
        facts.append(("Fits where", f"{format_bytes(r.needed_bytes)} ≤ the GPU's memory as nvidia-smi reports it, "
                                    f"{r.headroom_fraction:.0%} kept free"))
        if r.rented_price_per_gpu_hour is not None:
            idle = (f"; the {r.idle_gpu_count} idle GPU(s)' {format_money(r.idle_gpus_cost_per_hour, r.currency or '')}/h "
                    f"comes on top of every saving" if r.idle_gpu_count else "")
            facts.append(("Paid", f"{format_money(r.rented_price_per_gpu_hour, r.currency or '')}/h per GPU "
                                  f"({r.price_source}){idle}"))
        for o in _rows(r):
            cls = "rented" if o.rented else ("cheaper" if (o.saving_per_hour or 0) > 0 else "")
            rows_html += (
                f"<tr class='{cls}'><td>{e(o.gpu_name)}{' (rented)' if o.rented else ''}</td>"
                f"<td>{format_bytes(o.memory_bytes, 'GiB')}</td><td>{o.time_factor:.2f}</td>"
                f"<td>{_money(o.price_per_hour_all_gpus, r.currency)}</td><td>{_money(o.cost_per_job_hour, r.currency)}</td>"
                f"<td>{_money(o.saving_per_hour, r.currency)}</td><td>{_money(o.saving_per_month, r.currency)}</td>"
                f"<td>{_money(o.saving_for_run, r.currency)}</td><td>{e(o.provider or '')}</td></tr>"
            )
        if r.cheaper:
            b = r.cheaper[0]
            verdict = ("Too short to judge (see the notes): " if u.too_short else
                       f"Of {report.run_end.run_words} (see Ended): " if end_line is not None else "") + (
                       f"{len(r.cheaper)} cheaper GPU(s) would have held this job. Best: <b>{e(b.gpu_name)}</b>, "
                       f"saving {_money(b.saving_per_hour, r.currency)}/h, {_money(b.saving_per_month, r.currency)} "
                       f"per month, {_money(b.saving_for_run, r.currency)} on this run.")
    timeline = _timeline_png(report)
    options = _options_png(report)
    facts_html = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in facts)
    notes_html = "".join(f"<li><b>warning</b>: {e(w)}</li>" for w in report.warnings)
    notes_html += "".join(f"<li>{e(n)}</li>" for n in report.notes)
    price_head = f"price/h ({r.gpu_count} GPUs)" if r is not None and r.gpu_count > 1 else "price/h"
    method = f"<p class='method'>Time on other GPUs: {e(r.method)} ({e(r.method_basis)}).</p>" if r else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuwise report: {e(u.path)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }}
h1 {{ font-size: 1.5em; }} table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: left; }}
tr.cheaper td {{ color: #1a7f37; }} tr.rented td {{ font-weight: bold; }}
.verdict {{ font-size: 1.15em; background: #eef8ee; padding: 0.8em; border-left: 4px solid #1a7f37; }}
.method, li {{ color: #555; font-size: 0.9em; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>gpuwise report</h1>
<table class="facts">{facts_html}</table>
{f'<p class="verdict">{verdict}</p>' if verdict else ''}
<h2>Over time</h2><img alt="memory and busy share over time" src="data:image/png;base64,{timeline}">
{f'<h2>{e(_chart_caption(r))}</h2><img alt="cost of the work per GPU" src="data:image/png;base64,{options}">' if options else ''}
{method}
{'<table class="options"><tr><th>GPU</th><th>memory</th><th>time ×</th><th>' + price_head + '</th><th>cost of 1 h of work</th><th>saving/h</th><th>per month</th><th>this run</th><th>offer</th></tr>' + rows_html + '</table>' if rows_html else ''}
{f'<ul>{notes_html}</ul>' if notes_html else ''}
</body></html>
"""


def write_html(report: Report, path: str | Path) -> Path:
    """Whole or not at all; a path that cannot be written (a directory, a missing parent, a full disk)
    is a ReportError naming it."""
    text = render_html(report)
    try:
        return write_text_atomic(path, text)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write the HTML report ({exc.strerror or exc})") from None
