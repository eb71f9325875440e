"""``gpuwise calibrate``'s work: read measured runs, refuse any that cannot calibrate, fit their GPU.

Every input is read and checked before anything is fitted, so a bad or partial log (no workload, no
step times, another GPU than the others or than ``--gpu``) refuses the whole call and the calibration
file stays as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from gpuwise.calibrate.calibration import GpuCalibration
from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.export import read_rows
from gpuwise.calibrate.fit import fit_gpu
from gpuwise.calibrate.gpu_kind import on_trained_kind
from gpuwise.calibrate.measure_json import is_measure_json, measurements_from_measure_json
from gpuwise.calibrate.own_memory import matched, run_log_process_match
from gpuwise.calibrate.ranges import step_time_s
from gpuwise.calibrate.rows import check_usable, fit_row, measured_gpu
from gpuwise.catalog import GPU, Catalog, load_catalog, resolve_gpu
from gpuwise.report.errors import ReportError
from gpuwise.report.measured import STEP_TIME_METRIC, Measurement, measurement_from
from gpuwise.report.sources import load_usage_log
from gpuwise.report.usage import summarize
from gpuwise.runlog import RunLogError, is_run_log, read_train_metrics


def read_measurements(path: str | Path, catalog: Catalog | None = None, gpu: GPU | None = None) -> list[Measurement]:
    """A run log (one), a measure.py JSON (one per workload) or exported rows (JSON lines). ``catalog`` and
    ``gpu`` (``--gpu``) pick the GPU of a run log whose job's GPUs differ in kind (``read_run_log``)."""
    p = Path(path)
    if p.is_dir():
        raise CalibrateError(f"{p} is a directory: give the run logs, measure.py JSON or exported rows in it")
    if not p.is_file():
        raise CalibrateError(f"no such file: {p}")
    if is_run_log(p):
        found = read_run_log(p, catalog, gpu)
        check_step_times(p)
        return [found]
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        unreadable(p, exc)
    if not text:
        unreadable(p, None)
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None                         # JSON lines: one row per line
    if is_measure_json(doc):
        return measurements_from_measure_json(doc, str(p))
    return read_rows(p)


def unreadable(path: Path, exc: Exception | None) -> NoReturn:
    """CalibrateError in the run-log reader's words (``report.sources.load_usage_log``: "is empty (0 bytes)", "not a
    text log nor a gpuwise run log"), for a file that is empty or not text; ``exc``: why it could not be read."""
    try:
        load_usage_log(path)
    except ReportError as error:
        raise CalibrateError(str(error)) from None
    raise CalibrateError(f"{path}: cannot read ({exc or 'empty'})")


def read_run_log(path: Path, catalog: Catalog | None, gpu: GPU | None) -> Measurement:
    """The measurement of a run log (``report.measured``), with how its process memory was matched to the job
    (``own_memory``); where its job's GPUs differ in kind, of the one the job trained on (``gpu_kind.on_trained_kind``:
    the torch record's GPU, else ``gpu``), its process memory that kind's alone. ``catalog`` None: the default one,
    read only for such a log."""
    try:
        log = load_usage_log(path)
        usage = summarize(log) if log.samples else None
        found = measurement_from(log, usage)
        if usage is not None and usage.mixed_gpus:
            # a job on several kinds names no one GPU (usage.gpu_name): the torch record's name is the training's
            one_kind = on_trained_kind(usage, found.workload, found.gpu_name, gpu,
                                       catalog if catalog is not None else load_catalog(), str(path))
            found = measurement_from(log, one_kind)
        return matched(found, run_log_process_match(path))
    except (ReportError, RunLogError) as exc:
        raise CalibrateError(str(exc)) from None


def check_step_times(path: Path) -> None:
    """CalibrateError naming the first step time of a run log that is not a step time (``ranges.step_time_s``, as
    an exported row's is refused): the guard writes wall times, so such a value is a damaged or hand-made log, and
    the median (which skips it) would not be what the run measured."""
    try:
        rows = read_train_metrics(path).get(STEP_TIME_METRIC, [])
    except RunLogError as exc:
        raise CalibrateError(str(exc)) from None
    for step, _t_s, value in rows:
        if value is None:                  # not recorded (a NaN is stored as NULL): skipped, as the median does
            continue
        try:
            step_time_s(value, STEP_TIME_METRIC)
        except ValueError as exc:
            raise CalibrateError(f"{path}: {exc} at step {step}: not a step's wall time (the guard writes those); "
                                 "fix or drop the log") from None


def checked(paths: Sequence[str | Path], catalog: Catalog, gpu: str | None = None) -> tuple[GPU, list[Measurement]]:
    """(their one GPU, the measurements) of ``paths``; CalibrateError on the first that cannot calibrate."""
    chosen = resolve_gpu(catalog, gpu) if gpu else None
    expected = chosen
    out: list[Measurement] = []
    for path in paths:
        found = read_measurements(path, catalog, chosen)
        if not found:
            raise CalibrateError(f"{path}: no measured workload in it")
        for m in found:
            check_usable(m)
            on = measured_gpu(m, catalog)
            if expected is None:
                expected = on
            elif on.id != expected.id:
                raise CalibrateError(f"{m.source}: measured on {on.id}, not {expected.id}: calibrate one GPU at "
                                     "a time (--gpu NAME)")
            out.append(m)
    if expected is None:
        raise CalibrateError("no run log given")
    return expected, out


def calibrate(
    paths: Sequence[str | Path], catalog: Catalog, *, gpu: str | None = None,
    existing: Mapping[str, GpuCalibration] | None = None, progress: Callable[[str], None] | None = None,
) -> GpuCalibration:
    """The GPU's calibration refitted on its earlier runs (``existing``) and the runs in ``paths``."""
    target, measurements = checked(paths, catalog, gpu)
    rows = [fit_row(m, target, progress) for m in measurements]
    earlier = existing.get(target.id) if existing else None
    return fit_gpu(target.id, [*(earlier.runs if earlier else ()), *rows],
                   names={r.fingerprint: m.source for r, m in zip(rows, measurements)})
