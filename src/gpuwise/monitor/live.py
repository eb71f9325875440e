"""The live view: one rich table of every GPU with a short history, and one of the processes on them
(PID, user, GPU memory, command, as nvitop shows them). A thin client of the Sampler and the backend."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence

from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gpuwise.monitor.procs import ProcessRow
from gpuwise.monitor.sample import GpuSample
from gpuwise.text import for_console
from gpuwise.units import format_bytes

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], top: float, width: int = 30) -> str:
    """Unicode blocks scaled to ``top``; a gap where the value is unknown."""
    out = []
    for v in list(values)[-width:]:
        if v is None or top <= 0:
            out.append(" ")
        else:
            out.append(BLOCKS[min(len(BLOCKS) - 1, max(0, int(v / top * (len(BLOCKS) - 1) + 0.5)))])
    return "".join(out)


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render_live(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], title: str = "",
                width: int = 16, process_counts: Mapping[tuple[int, int | None], int] | None = None,
                max_columns: int | None = None) -> Group:
    """The GPU table under its title (a line of its own: a table's title wraps at the table's width).
    ``process_counts``: the processes shown per GPU where a filter narrows them (None: NVML's count).
    ``max_columns``: the terminal's width; the sparklines (up to ``width`` samples) shrink, down to none, so
    that the table fits it and the numbers (power, temperature) are never squeezed."""
    # the title quotes the backend and the driver: the caller passes it through for_console
    t = _gpu_table(history, width, process_counts)
    if max_columns is not None:
        spark = width
        while spark > 0 and _columns(t) > max_columns:
            spark -= 1
            t = _gpu_table(history, spark, process_counts)
    return Group(Text.from_markup(title, style="bold"), t) if title else Group(t)


def _columns(table: Table) -> int:
    """The columns ``table`` takes with no cell wrapped."""
    return Measurement.get(_MEASURE, _MEASURE.options, table).maximum


_MEASURE = Console(width=10_000, file=io.StringIO())   # only measures: never prints


def _gpu_table(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], width: int,
               process_counts: Mapping[tuple[int, int | None], int] | None) -> Table:
    """The GPU table with sparklines of the last ``width`` samples (0: none)."""
    def line(values: Sequence[float | None], top: float) -> str:
        return f" {sparkline(values, top, width)}" if width > 0 else ""

    t = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col in ("GPU", "name", "busy", "memory GiB", "power", "temp", "procs"):
        t.add_column(col, no_wrap=True, justify="left" if col in ("GPU", "name", "busy", "memory GiB") else "right")
    for key in sorted(history, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        samples = history[key]
        if not samples:
            continue
        s = samples[-1]
        name = for_console((s.name or "").replace("NVIDIA ", "")[:22])
        if s.lost:
            t.add_row(s.label, name, "[red]LOST[/red]", "fell off the bus", "", "", "")
            continue
        busy = _fmt(s.utilization_pct, "3.0f") + ("%" if s.utilization_pct is not None else "")
        mem = "-"
        if s.memory_used_bytes is not None:
            mem = f"{s.memory_used_bytes / 2**30:4.1f}" + (f"/{s.memory_total_bytes / 2**30:.0f}" if s.memory_total_bytes else "")
        total = s.memory_total_bytes or max((x.memory_used_bytes or 0 for x in samples), default=0)
        t.add_row(
            s.label, name,
            f"{busy:>4}{line([x.utilization_pct for x in samples], 100.0)}",
            f"{mem:>9}{line([x.memory_used_bytes for x in samples], float(total or 1))}",
            _fmt(s.power_w, ".0f") + (" W" if s.power_w is not None else ""),
            _fmt(s.temperature_c, ".0f") + (" C" if s.temperature_c is not None else ""),
            str(process_counts.get(key, 0)) if process_counts is not None
            else ("-" if s.process_count is None else str(s.process_count)),
        )
    return t


def render_processes(rows: Sequence[ProcessRow]) -> Table:
    """One row per compute process, per GPU in order, largest memory first. A process this pid namespace
    cannot see (NVML reports host pids inside a container) says so instead of a user and command."""
    t = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col, justify in (("GPU", "left"), ("PID", "right"), ("USER", "left"), ("GPU-MEM", "right"),
                         ("COMMAND", "left")):
        # The command wraps (folds) on a narrow terminal rather than losing its end.
        t.add_column(col, justify=justify, no_wrap=col != "COMMAND", overflow="fold")
    for r in sorted(rows, key=lambda r: (r.gpu_index, -1 if r.mig_index is None else r.mig_index)):
        visible = r.user is not None or r.command is not None
        t.add_row(r.gpu_label, str(r.pid), for_console(r.user or "-"),
                  "-" if r.used_memory_bytes is None else format_bytes(r.used_memory_bytes),
                  for_console(r.command or "-") if visible else "[dim](not visible here: a host pid, another namespace)[/dim]")
    return t


def render_watch(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], processes: Sequence[ProcessRow] | None,
                 title: str = "", width: int = 16, *, hidden: int | None = None, narrowed_to: str = "",
                 max_columns: int | None = None) -> Group:
    """The GPU table and, below it, the process table (or one line saying there is none to show).
    ``hidden``: processes a filter left out (None: no filter), so the GPU table counts the ones shown
    and an empty table says that processes are there but do not match (``narrowed_to``, in words)."""
    counts = (Counter((r.gpu_index, r.mig_index) for r in processes)
              if hidden is not None and processes is not None else None)
    gpus = render_live(history, title, width, process_counts=counts, max_columns=max_columns)
    if processes is None:
        return gpus
    if not processes:
        if hidden:
            return Group(gpus, f"[dim]no process matches ({for_console(narrowed_to)}); {hidden} other(s) on "
                               "these GPUs[/dim]")
        return Group(gpus, "[dim]no compute processes on these GPUs[/dim]")
    return Group(gpus, render_processes(processes))
