"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -l N`` logs -> GpuSamples.

nvidia-smi prints memory in MiB, power in W, clocks in MHz, and ``[N/A]`` / ``[Not Supported]`` for
fields a GPU lacks (read as None). The header (``memory.used [MiB]``) may repeat when logs are appended;
repeats are skipped, and a header naming other columns takes over from its line on, with a note. nvidia-smi
says a GPU is lost in a line of its own (``Unable to determine the device handle for GPU0000:3B:00.0: GPU
is lost...``): the GPU with that bus id (a ``pci.bus_id`` column) is marked lost from there, and one note
per GPU says so, or that the log does not say which GPU it is. Without a header the columns must be given
(``columns``). A last line cut off mid-write (no newline, too few fields: a log still being written) is
skipped with a note; any other line that does not parse, or holds a value outside its physical range
(``sample_problem``, in the log's column names), raises ReportError naming file and line. Names lose
control characters and escape sequences.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from gpuwise.errors import did_you_mean
from gpuwise.monitor.sample import GpuSample
from gpuwise.monitor.sample_checks import sample_problem
from gpuwise.report.errors import ReportError
from gpuwise.text import printable_or_none

MIB = 2**20

# nvidia-smi query field -> (GpuSample field, multiplier to our unit)
_FIELDS: dict[str, tuple[str, float]] = {
    "utilization.gpu": ("utilization_pct", 1.0),
    "utilization.memory": ("memory_util_pct", 1.0),
    "memory.used": ("memory_used_bytes", MIB),
    "memory.total": ("memory_total_bytes", MIB),
    "memory.free": ("memory_free", MIB),
    "power.draw": ("power_w", 1.0),
    "power.draw.instant": ("power_w", 1.0),
    "power.draw.average": ("power_w", 1.0),
    "temperature.gpu": ("temperature_c", 1.0),
    "clocks.sm": ("sm_clock_mhz", 1.0),
    "clocks.current.sm": ("sm_clock_mhz", 1.0),
    "clocks.mem": ("mem_clock_mhz", 1.0),
    "clocks.current.memory": ("mem_clock_mhz", 1.0),
}
_TEXT_FIELDS = ("timestamp", "name", "index", "uuid", "pci.bus_id", "gpu_name", "gpu_uuid", "gpu_bus_id")
_MISSING = {"[n/a]", "n/a", "[not supported]", "[unknown error]", "[insufficient permissions]", ""}
_LOST = "[gpu is lost]"
_UNITS = {"", "%", "mib", "w", "mhz", "c"}
_NUMBER = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+)\s*([A-Za-z%]*)\s*")
_BUS_ID = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S",
                 "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S")


def field_key(header_cell: str) -> str:
    """'memory.used [MiB]' -> 'memory.used'."""
    return re.sub(r"\s*\[.*\]\s*$", "", header_cell.strip()).strip().lower()


def bus_id(text: str | None) -> tuple[int, int, int, int] | None:
    """The PCI address in ``text`` as numbers: nvidia-smi writes ``00000000:3B:00.0`` in ``pci.bus_id`` and
    ``GPU0000:3B:00.0`` in its messages."""
    m = _BUS_ID.search(text or "")
    return tuple(int(g, 16) for g in m.groups()) if m else None  # type: ignore[return-value]


def in_log_terms(problem: str, field_of: dict[str, str]) -> str:
    """``sample_problem``'s words with the log's column names (``memory.used``), not the sample's fields
    (``memory_used_bytes``); ``field_of``: the log's column -> the sample's field."""
    for column, name in field_of.items():
        problem = re.sub(rf"\b{name}\b", column, problem)
    return problem


def cut_off_note(path: str, lineno: int, text: str, found: int, expected: int) -> str | None:
    """The note that skips line ``lineno`` of ``text`` when it is the log's last, unfinished (no line break after
    it) and short of fields (``found`` < ``expected``): a logger stopped mid-write. None: a malformed line."""
    last = lineno == len(text.splitlines()) and not text.endswith("\n")
    return f"{path}:{lineno}: last line cut off mid-write, skipped" if last and found < expected else None


def looks_like_header(line: str) -> bool:
    keys = {field_key(c) for c in line.split(",")}
    return bool(keys & (set(_FIELDS) | set(_TEXT_FIELDS)))


_last_format = [_TIME_FORMATS[0]]


def parse_timestamp(text: str) -> float | None:
    # The format that worked last is tried first: a log uses one format throughout.
    for fmt in (_last_format[0], *_TIME_FORMATS):
        try:
            # nvidia-smi prints local time without a zone: only differences matter to the report.
            value = datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
        _last_format[0] = fmt
        return value
    return None


def check_columns(columns: list[str]) -> list[str]:
    """``--columns`` (the --query-gpu list of a log written with ``noheader``) as field keys. A field this reader
    does not know that resembles one it knows (``utilization.gpus``) is a typo that would silently lose a
    column: ReportError (one line, naming it and the closest known fields); another unknown field (nvidia-smi
    has many the report does not use: ``fan.speed``) only holds its place, and a note says it is not read."""
    keys = [field_key(c) for c in columns]
    known = [*_FIELDS, *_TEXT_FIELDS[:5]]
    for key in keys:
        if key not in _FIELDS and key not in _TEXT_FIELDS and (hint := did_you_mean(key, known)):
            raise ReportError(f"--columns: unknown field {key!r}{hint}; the fields read are {', '.join(known)}")
    return keys


def parse_smi_csv(text: str, path: str, columns: list[str] | None = None) -> tuple[list[GpuSample], list[str]]:
    lines = text.splitlines()
    notes: list[str] = []
    if columns and (unread := [k for k in check_columns(columns) if k not in _FIELDS and k not in _TEXT_FIELDS]):
        notes.append(f"--columns: {', '.join(unread)} not read (the report does not use "
                     f"{'it' if len(unread) == 1 else 'them'})")
    header: list[str] | None = [field_key(c) for c in columns] if columns else None
    header_line: str | None = None
    samples: list[GpuSample] = []
    ids: dict[str, int] = {}
    previous_time: float | None = None
    position = 0
    group = -1
    index_of_bus: dict[tuple[int, ...], int] = {}
    lost_from: dict[tuple[int, ...] | None, tuple[int, int]] = {}   # bus id (None: none) -> (first line, lines)
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if "gpu is lost" in line.lower() and "," not in line:
            bus = bus_id(line)
            first, count = lost_from.get(bus, (lineno, 0))
            lost_from[bus] = (first, count + 1)
            if bus in index_of_bus:
                samples.append(GpuSample(t_s=previous_time if previous_time is not None else float(group),
                                         gpu_index=index_of_bus[bus], lost=1))
            continue
        if looks_like_header(line):
            keys = [field_key(c) for c in line.split(",")]
            if header_line is not None and keys != header:
                notes.append(f"{path}:{lineno}: the columns change here (an appended log with another "
                             f"--query-gpu?): read from here on as {', '.join(keys)}")
            if header_line is None or keys != header:  # the file's own header wins over --columns
                header, header_line = keys, line.strip()
            continue
        if header is None:
            loss_log = any(w in line.lower() for w in ("loss", "step", "epoch")) or line.lstrip().startswith("{")
            raise ReportError(
                f"{path}:{lineno}: no nvidia-smi CSV header (log written with 'noheader'?): "
                f"pass --columns with the --query-gpu list"
                + ("; a training (loss) log goes to `gpuwise advise`" if loss_log else "")
            )
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            if cut := cut_off_note(path, lineno, text, len(cells), len(header)):
                notes.append(cut)
                continue
            raise ReportError(
                f"{path}:{lineno}: expected {len(header)} comma-separated fields ({', '.join(header)}), "
                f"found {len(cells)}: {line.strip()[:80]!r}"
            )
        row = dict(zip(header, cells))
        t_s = None
        if "timestamp" in row:
            t_s = parse_timestamp(row["timestamp"])
            if t_s is None:
                raise ReportError(f"{path}:{lineno}: timestamp is not a date: {row['timestamp']!r}")
        if t_s is None or t_s != previous_time:
            group, position = group + 1, 0
        else:
            position += 1
        previous_time = t_s
        values: dict[str, object] = {}
        lost = 0
        for key, cell in row.items():
            if key not in _FIELDS:
                continue
            if cell.lower() == _LOST:
                lost = 1
                continue
            if cell.lower() in _MISSING:
                continue
            m = _NUMBER.fullmatch(cell)
            if not m:
                raise ReportError(f"{path}:{lineno}: {key} is not a number: {cell!r}")
            if m.group(2).lower() not in _UNITS:
                raise ReportError(f"{path}:{lineno}: {key} has a unit nvidia-smi does not print: {cell!r}")
            name, scale = _FIELDS[key]
            value = float(m.group(1)) * scale
            values[name] = int(round(value)) if name.endswith("_bytes") or name == "memory_free" else value
        free = values.pop("memory_free", None)
        if "memory_used_bytes" not in values and free is not None and "memory_total_bytes" in values:
            values["memory_used_bytes"] = int(values["memory_total_bytes"]) - int(free)
        ident = row.get("index") or row.get("uuid") or row.get("pci.bus_id")
        if ident is not None and row.get("index", "").isdigit():
            index = int(row["index"])
        elif ident is not None:
            index = ids.setdefault(ident, len(ids))
        else:
            index = position
        if (bus := bus_id(row.get("pci.bus_id"))) is not None:
            index_of_bus[bus] = index
        sample = GpuSample(
            t_s=t_s if t_s is not None else float(group), gpu_index=index,
            uuid=printable_or_none(row.get("uuid")), name=printable_or_none(row.get("name")), lost=lost,
            **values,  # type: ignore[arg-type]
        )
        problem = sample_problem(sample)
        if problem:
            raise ReportError(f"{path}:{lineno}: "
                              f"{in_log_terms(problem, {k: _FIELDS[k][0] for k in header if k in _FIELDS})}")
        samples.append(sample)
    if header is None or not samples:
        raise ReportError(f"{path}: no samples in this nvidia-smi log")
    if "memory.used" not in header and not {"memory.total", "memory.free"} <= set(header):
        raise ReportError(f"{path}: no memory columns (memory.used, or memory.total and memory.free): the report "
                          f"is about the memory the job needed; log with --query-gpu=...,memory.used,memory.total")
    if "timestamp" not in header:
        notes.append(f"{path}: no timestamp column: assumed 1 s between samples")
    for bus, (first, count) in lost_from.items():
        said = f"{path}:{first}: nvidia-smi reported a GPU lost from here on ({count} \"GPU is lost\" line(s)"
        if bus in index_of_bus:
            notes.append(f"{said}, bus %04X:%02X:%02X.%X): GPU {index_of_bus[bus]}, marked lost" % bus)
        elif bus is not None:
            notes.append(f"{said}, bus %04X:%02X:%02X.%X): the log does not say which GPU that is (no "
                         f"pci.bus_id column, or none with that bus id)" % bus)
        else:
            notes.append(f"{said}): the log does not say which GPU")
    return samples, notes
