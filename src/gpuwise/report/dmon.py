"""``nvidia-smi dmon`` logs -> GpuSamples.

dmon prints a two-line comment header (names, then units) and repeats it every screenful::

    # gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
    # Idx      W      C      C      %      %      %      %    MHz    MHz
        0     43     48      -      0      0      0      0    877   1530

With ``-o DT`` two columns ``Date Time`` come first; with ``-s m`` the frame-buffer use ``fb`` (MB, meaning
MiB). '-' is a field the GPU does not report (None). dmon prints no GPU name and no memory total: the
report needs ``--gpu`` to compare GPUs. Without date/time columns samples are taken 1 s apart (dmon's
default ``-d 1``) and a new sample starts when the GPU index does not grow. A value outside its physical
range (NaN, 500 %, negative power) raises ReportError naming the line and the column (``pwr``).
"""

from __future__ import annotations

from datetime import datetime, timezone

from gpuwise.monitor.sample import GpuSample
from gpuwise.monitor.sample_checks import sample_problem
from gpuwise.report.errors import ReportError
from gpuwise.report.smi_csv import cut_off_note, in_log_terms

MIB = 2**20

_COLUMNS: dict[str, tuple[str, float]] = {
    "pwr": ("power_w", 1.0),
    "gtemp": ("temperature_c", 1.0),
    "sm": ("utilization_pct", 1.0),
    "mem": ("memory_util_pct", 1.0),
    "mclk": ("mem_clock_mhz", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
    "fb": ("memory_used_bytes", MIB),
    "rxpci": ("pcie_rx_bytes_per_s", MIB),
    "txpci": ("pcie_tx_bytes_per_s", MIB),
}


def looks_like_dmon(text: str) -> bool:
    for line in text.splitlines():
        if line.strip():
            words = line.lstrip("#").split()
            return line.startswith("#") and bool(words) and words[0].lower() in ("gpu", "date")
    return False


def parse_dmon(text: str, path: str) -> tuple[list[GpuSample], list[str]]:
    names: list[str] | None = None
    expect_units = False
    samples: list[GpuSample] = []
    notes: list[str] = []
    group, previous_index = -1, None
    lines = text.splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            words = [w.lower() for w in line.lstrip("#").split()]
            if expect_units:
                expect_units = False
                continue
            names, expect_units = words, True
            continue
        if names is None:
            raise ReportError(f"{path}:{lineno}: nvidia-smi dmon data before its '# gpu ...' header")
        cells = line.split()
        if len(cells) != len(names):
            if cut := cut_off_note(path, lineno, text, len(cells), len(names)):
                notes.append(cut)
                continue
            raise ReportError(
                f"{path}:{lineno}: expected {len(names)} fields ({' '.join(names)}), found {len(cells)}: "
                f"{line.strip()[:80]!r}"
            )
        row = dict(zip(names, cells))
        try:
            index = int(row["gpu"])
        except (KeyError, ValueError):
            raise ReportError(f"{path}:{lineno}: GPU index is not a number: {row.get('gpu')!r}") from None
        t_s = None
        if "date" in row and "time" in row:
            try:
                t_s = datetime.strptime(f"{row['date']} {row['time']}", "%Y%m%d %H:%M:%S").replace(
                    tzinfo=timezone.utc).timestamp()
            except ValueError:
                raise ReportError(f"{path}:{lineno}: date/time not understood: {row['date']} {row['time']}") from None
        if previous_index is None or index <= previous_index:
            group += 1
        previous_index = index
        values: dict[str, float | int] = {}
        for key, cell in row.items():
            if key not in _COLUMNS or cell == "-":
                continue
            try:
                number = float(cell)
            except ValueError:
                raise ReportError(f"{path}:{lineno}: {key} is not a number: {cell!r}") from None
            name, scale = _COLUMNS[key]
            values[name] = int(round(number * scale)) if name.endswith("_bytes") else number * scale
        sample = GpuSample(t_s=t_s if t_s is not None else float(group), gpu_index=index, **values)  # type: ignore[arg-type]
        problem = sample_problem(sample)
        if problem:
            raise ReportError(f"{path}:{lineno}: "
                              f"{in_log_terms(problem, {k: _COLUMNS[k][0] for k in names if k in _COLUMNS})}")
        samples.append(sample)
    if not samples:
        raise ReportError(f"{path}: no samples in this nvidia-smi dmon log")
    if "date" not in (names or []):
        notes.append(f"{path}: no date/time columns (dmon without -o DT): assumed 1 s between samples")
    return samples, notes
