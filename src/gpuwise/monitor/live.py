"""The live view: one rich table of every GPU with a short history, and one of the processes on them
(PID, user, GPU memory, command, as nvitop shows them). A thin client of the Sampler and the backend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpuwise.monitor.procs import ProcessRow
from gpuwise.monitor.sample import GpuSample, mig_profile
from gpuwise.text import clipped
from gpuwise.table_fit import table_columns, widest_fitting
from gpuwise.text import for_console, printable
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


NAME_CHARS = 22      # the name column at its widest: "A100-SXM4-80GB MIG 1g.10gb" cut keeps "1g.10gb"
_HEADERS = {c: c for c in ("GPU", "name", "busy", "memory GiB", "power", "temp", "procs")}
_COMPACT_HEADERS = {**_HEADERS, "memory GiB": "GiB", "power": "W", "temp": "C"}


def render_live(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], title: str = "",
                width: int = 16, process_counts: Mapping[tuple[int, int | None], int] | None = None,
                max_columns: int | None = None) -> Group:
    """The GPU table under its title (a line of its own: a table's title wraps at the table's width).
    ``process_counts``: the processes shown per GPU where a filter narrows them (None: NVML's count).
    ``max_columns``: the terminal's width. What gives way, in order, so that the table fits: the sparklines
    (up to ``width`` samples, down to none), then the names (down to a MIG instance's profile, ``1g.10gb``,
    or nothing for whole GPUs), then the space between columns. The GPU label (``6/mig1``) and the numbers
    are never cut: on a terminal narrower still, a cell folds onto a second line rather than lose a digit."""
    # the title quotes the backend and the driver: the caller passes it through for_console
    if max_columns is None:
        t = _gpu_table(history, width, process_counts)
    else:
        t = widest_fitting(_fits(history, width), max_columns,
                            lambda spark, name_chars, compact: _gpu_table(history, spark, process_counts,
                                                                         name_chars=name_chars, compact=compact))
    return Group(Text.from_markup(title, style="bold"), t) if title else Group(t)


def _fits(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], width: int) -> list[tuple[int, int, bool]]:
    """The layouts to try, widest first: (sparkline samples, name characters, compact). Each is no wider than
    the one before (fewer sparkline samples, fewer name characters, then less space between columns)."""
    shortest = max((len(mig_profile(v[-1].name)) for v in history.values() if v), default=0)
    return ([(spark, NAME_CHARS, False) for spark in range(width, -1, -1)]
            + [(0, name_chars, False) for name_chars in range(NAME_CHARS - 1, shortest - 1, -1)]
            + [(0, shortest, True)])


def short_name(name: str | None, max_chars: int = NAME_CHARS) -> str:
    """NVML's device name without "NVIDIA ", in at most ``max_chars``: a MIG instance's profile (``1g.10gb``)
    is kept whole and the model before it gives way ("A100-SXM4-80G… 1g.10gb", then "1g.10gb")."""
    text = (name or "").replace("NVIDIA ", "")
    if len(text) <= max_chars:
        return text
    profile = mig_profile(text)
    tail = profile if profile else ""
    room = max_chars - len(tail) - (1 if tail else 0)       # the model's characters, "…" included
    if room < 2:
        return tail if len(tail) <= max_chars else ""
    model = text[: len(text) - len(tail)].rstrip() if tail else text
    return f"{model[:room - 1]}…" + (f" {tail}" if tail else "")


def _gpu_table(history: Mapping[tuple[int, int | None], Sequence[GpuSample]], width: int,
               process_counts: Mapping[tuple[int, int | None], int] | None, *, name_chars: int = NAME_CHARS,
               compact: bool = False) -> Table:
    """The GPU table with sparklines of the last ``width`` samples (0: none), names in ``name_chars``
    (0 and no MIG instance: no name column), ``compact``: one space between columns, no lines, the units
    in the headers (power in "W", temperature in "C")."""
    def line(values: Sequence[float | None], top: float) -> str:
        return f" {sparkline(values, top, width)}" if width > 0 else ""

    if compact:
        t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1),
                  collapse_padding=True)
    else:
        t = Table(show_edge=False, pad_edge=False, header_style="bold")
    named = name_chars > 0
    # compact: the units move from the cells into the headers ("W", "C")
    headers = _COMPACT_HEADERS if compact else _HEADERS
    watts, celsius = ("", "") if compact else (" W", " C")
    for col in _HEADERS:
        if col == "name" and not named:
            continue
        # Never an ellipsis: a cell too narrow folds onto a second line, keeping every digit.
        left = ("GPU", "name", "busy") if compact else ("GPU", "name", "busy", "memory GiB")
        t.add_column(headers[col], no_wrap=col in ("GPU", "name"), overflow="fold",
                     justify="left" if col in left else "right")
    for key in sorted(history, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        samples = history[key]
        if not samples:
            continue
        s = samples[-1]
        name = [for_console(short_name(s.name, name_chars))] if named else []
        if s.lost:
            t.add_row(s.label, *name, "[red]LOST[/red]", "" if compact else "fell off the bus", "", "", "")
            continue
        busy = _fmt(s.utilization_pct, "3.0f") + ("%" if s.utilization_pct is not None else "")
        mem = "-"
        if s.memory_used_bytes is not None:
            mem = f"{s.memory_used_bytes / 2**30:4.1f}" + (f"/{s.memory_total_bytes / 2**30:.0f}" if s.memory_total_bytes else "")
        total = s.memory_total_bytes or max((x.memory_used_bytes or 0 for x in samples), default=0)
        t.add_row(
            s.label, *name,
            f"{busy:>4}{line([x.utilization_pct for x in samples], 100.0)}",
            mem if compact else f"{mem:>9}{line([x.memory_used_bytes for x in samples], float(total or 1))}",
            _fmt(s.power_w, ".0f") + (watts if s.power_w is not None else ""),
            _fmt(s.temperature_c, ".0f") + (celsius if s.temperature_c is not None else ""),
            # "-": the device lists no processes (a MIG parent, a backend that cannot), filter or not
            "-" if s.process_count is None
            else str(process_counts.get(key, 0) if process_counts is not None else s.process_count),
        )
    return t


MIN_COMMAND_CHARS = 12     # a COMMAND column narrower than this is left out rather than shown
NOT_VISIBLE = "(not visible here: a host pid, another namespace)"


def render_processes(rows: Sequence[ProcessRow], max_columns: int | None = None) -> Group:
    """One row per compute process, per GPU in order, largest memory first. A process this pid namespace
    cannot see (NVML reports host pids inside a container) says so instead of a user and command.
    ``max_columns``: the terminal's width. The GPU label, PID, USER and GPU-MEM are never cut; what gives way,
    in order: the command (cut with "…", down to MIN_COMMAND_CHARS), the lines between the columns, then the
    COMMAND column; a line under the table says which. On a terminal narrower still each process is one line
    of words that wraps between them, so no word is cut."""
    ordered = sorted(rows, key=lambda r: (r.gpu_index, -1 if r.mig_index is None else r.mig_index))
    # plain text (escape sequences removed), shown as Text: markup in a user name or command stays text
    cells = [(r.gpu_label, str(r.pid), printable(r.user or "-"),
              "-" if r.used_memory_bytes is None else format_bytes(r.used_memory_bytes),
              printable(r.command or "-") if r.user is not None or r.command is not None else NOT_VISIBLE)
             for r in ordered]
    if max_columns is None:
        return Group(_process_table(cells, None, False))
    longest = max((len(c[4]) for c in cells), default=0)
    layouts = ([(None, False)] + [(k, False) for k in range(longest - 1, MIN_COMMAND_CHARS - 1, -1)]
               + [(MIN_COMMAND_CHARS, True), (0, False), (0, True)])
    table = widest_fitting(layouts, max_columns, lambda chars, compact: _process_table(cells, chars, compact))
    if table_columns(table) > max_columns:      # even the narrowest table is too wide: words that wrap
        return Group(*(Text(f"GPU {c[0]} pid {c[1]} {c[2]} {c[3]}") for c in cells),
                     Text(f"COMMAND left out to fit {max_columns} columns (--json shows it).", style="dim"))
    headers = [str(c.header) for c in table.columns]
    if "COMMAND" not in headers:
        said = f"COMMAND left out to fit {max_columns} columns (--json shows it)."
    elif any("…" in str(cell) for cell in table.columns[-1].cells) and longest > len(str(table.columns[-1].header)):
        said = f"COMMAND cut to fit {max_columns} columns (…; --json shows it whole)."
    else:
        return Group(table)
    return Group(table, Text(said, style="dim"))


def _process_table(cells: Sequence[tuple[str, str, str, str, str]], command_chars: int | None,
                   compact: bool) -> Table:
    """``command_chars``: the command in at most that many characters (cut with "…"; None: whole; 0: no
    COMMAND column); ``compact``: one space between columns, no lines. No cell wraps or is cut but the
    command."""
    if compact:
        t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1),
                  collapse_padding=True)
    else:
        t = Table(show_edge=False, pad_edge=False, header_style="bold")
    columns = (("GPU", "left"), ("PID", "right"), ("USER", "left"), ("GPU-MEM", "right"))
    if command_chars != 0:
        columns += (("COMMAND", "left"),)
    for col, justify in columns:
        t.add_column(col, justify=justify, no_wrap=True, overflow="fold")
    for label, pid, user, memory, command in cells:
        if command_chars:
            command = clipped(command, command_chars)
        shown = Text(command, style="dim") if command.startswith(NOT_VISIBLE[:10]) else Text(command)
        t.add_row(Text(label), Text(pid), Text(user), Text(memory), *([shown] if command_chars != 0 else []))
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
    return Group(gpus, render_processes(processes, max_columns))
