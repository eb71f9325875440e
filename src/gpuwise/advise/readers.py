"""Readers: a gpuwise run log, a CSV or JSONL file, HF Trainer's trainer_state.json, or a TensorBoard event
directory -> ``TrainingLog``.

One entry point, :func:`read_log`, picks the reader from the file itself. Column and tag names are
matched tolerantly (``gpuwise.advise.names``), because every framework names them differently. A value
that cannot be read, or is out of range (a step that is not a whole number >= 0, a batch size < 1, a
negative or infinite learning rate, a time that is not finite), raises :class:`AdviseError` naming the
file and line; rows without a loss (eval rows, lr-only rows) are skipped, not errors. A loss may be NaN or
inf: that is a finding (divergence), not bad input. The one bad line tolerated is the last one of a file
that no newline ends (a log still being written, cut mid-record): skipped with a warning.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np

from gpuwise.advise.data import Curve, GradNoiseSamples, TrainingLog
from gpuwise.advise import downsample
from gpuwise.advise.downsample import StepBins, last_per_step
from gpuwise.advise.errors import AdviseError
from gpuwise.advise.failures import NonFiniteCounter
from gpuwise.advise.names import (BATCH_NAMES, LR_NAMES, TIME_NAMES, loss_like, pick_eval_loss, pick_loss,
                                  pick_name, pick_step)
from gpuwise.advise.tensorboard_events import read_tensorboard
from gpuwise.advise.wall_times import MS_PER_S, is_epoch_ms
from gpuwise.monitor.sample_checks import bad_row_message
from gpuwise.plan.constraints import MAX_STEPS, MAX_STEPS_TEXT
from gpuwise.runlog import (WORKLOAD_KEY, is_run_log, last_gpu_sample_rowid, read_gpu_usage, read_meta,
                            read_train_metrics)
from gpuwise.text import printable, printable_or_none

logger = logging.getLogger(__name__)

MAX_STEP = MAX_STEPS  # steps beyond this are not counts of optimizer steps (one cap: gpuwise.plan.constraints)
Where = int | str   # a line number, or where in a document ("log_history[4]")
Progress = Callable[[str], None] | None   # told how far a long read got (the CLI's spinner), None: silent
PROGRESS_EVERY_ROWS = 100_000   # rows between two progress reports


def read_log(path: str | Path, loss_name: str | None = None, progress: Progress = None) -> TrainingLog:
    """Reads any supported log; the format comes from the content (SQLite header, event files) or suffix.

    ``loss_name``: the column, TensorBoard tag or run-log metric to read as the loss (default: the first of
    ``names.LOSS_NAMES``, else a name with "loss" that is not an eval metric). ``progress``: told the rows read
    every ``PROGRESS_EVERY_ROWS`` rows of a CSV or JSONL log."""
    p = Path(path)
    if p.is_dir():
        return read_tensorboard(p, loss_name)
    if not p.is_file():
        raise AdviseError(f"no such log: {p}")

    if is_run_log(p):
        return read_runlog(p, loss_name)
    if "tfevents" in p.name:
        return read_tensorboard(p, loss_name)
    _check_text(p)
    suffix = p.suffix.lower()
    if suffix == ".json" and _is_one_json_document(p):
        return read_trainer_state(p, loss_name)
    if suffix in (".jsonl", ".ndjson", ".json"):
        return read_jsonl(p, loss_name, progress)
    if suffix in (".csv", ".tsv", ".txt", ".log"):
        return read_csv(p, loss_name, progress)
    head = p.read_text(encoding="utf-8", errors="replace")[:1].strip()
    return read_jsonl(p, loss_name, progress) if head == "{" else read_csv(p, loss_name, progress)


TEXT_SNIFF_BYTES = 64 * 1024


def _check_text(path: Path) -> None:
    """Refuses a file that is not text (NUL bytes, bytes that are not UTF-8, control characters) in one line
    that prints none of its bytes: read as CSV, random bytes became a header of hundreds of garbled columns."""
    with path.open("rb") as f:
        head = f.read(TEXT_SNIFF_BYTES)
    why = None
    if b"\x00" in head:
        why = "it holds NUL bytes"
    else:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as exc:
            # a multi-byte character cut by the sniffed length is text; a bad byte before that is not
            text = head[: exc.start].decode("utf-8") if exc.start >= len(head) - 3 else None
            if text is None:
                why = f"byte {exc.start:,} is not UTF-8 text"
        if text is not None and len(re.findall(r"[\x00-\x08\x0e-\x1f\x7f]", text)) > max(2, len(text) // 1000):
            why = "it holds control characters"
    if why:
        raise AdviseError(f"{path}: not a CSV, JSONL, TensorBoard or gpuwise run log ({why}: a binary file?)")


# -- run log (gpuwise.runlog, written by gpuwise.guard) ----------------------------------------------
def read_runlog(path: Path, loss_name: str | None = None) -> TrainingLog:
    metrics = read_train_metrics(path)
    _check_metric_types(path, metrics)
    meta = read_meta(path)
    if loss_name is not None:
        loss_metric, others = pick_loss(path, sorted(metrics), loss_name, "run-log metric")
    else:
        loss_metric, others = "loss", tuple(printable(n) for n in loss_like(sorted(metrics)) if n != "loss")
    if loss_metric not in metrics or not metrics[loss_metric]:
        names = ", ".join(printable(str(n))[:40] for n in sorted(metrics)[:20]) or "none"
        raise AdviseError(f"{path}: the run log has no 'loss' metric (metrics found: {names}; --loss-tag NAME reads another)")
    loss_rows = last_per_step((s, t, v) for s, t, v in metrics[loss_metric])
    steps = np.array([s for s, _, _ in loss_rows], dtype=np.int64)
    loss = np.array([math.nan if v is None else v for _, _, v in loss_rows], dtype=float)
    t_s = np.array([t for _, t, _ in loss_rows], dtype=float)

    def aligned(name: str) -> np.ndarray | None:
        rows = metrics.get(name)
        if not rows:
            return None
        by_step = {s: v for s, _, v in rows if v is not None}
        return np.array([by_step.get(int(s), math.nan) for s in steps], dtype=float)

    curve = Curve(steps=steps, loss=loss, t_s=t_s, lr=aligned("lr"), batch_size=aligned("batch_size"), source=str(path))
    eval_metric = pick_eval_loss(sorted(metrics), loss_metric)
    eval_curve = None
    if eval_metric is not None:
        rows = last_per_step((s, t, v) for s, t, v in metrics[eval_metric] if v is not None)
        eval_curve = Curve(steps=np.array([r[0] for r in rows], dtype=np.int64),
                           loss=np.array([r[2] for r in rows], dtype=float), source=str(path)) if rows else None
    noise = _noise_from_metrics(metrics)
    sampled_name, gpu_count, peak_memory_bytes = _run_gpus(_checked_gpu_usage(path))
    gpu_name = printable_or_none(meta.get("gpu") or meta.get("gpu_name") or sampled_name)
    workload = _json_or_none(meta.get(WORKLOAD_KEY))
    precision = meta.get("precision") or (workload.get("precision") if isinstance(workload, dict) else None)
    return TrainingLog(curve=curve, noise=noise, gpu_name=gpu_name, gpu_count=gpu_count,
                       peak_memory_bytes=peak_memory_bytes, precision=precision, meta=meta,
                       loss_name=printable(loss_metric), other_loss_names=others, eval_curve=eval_curve,
                       eval_name=printable(eval_metric) if eval_curve is not None else None,
                       workload=workload if isinstance(workload, dict) else None)


def _json_or_none(text: str | None) -> object:
    try:
        return json.loads(text) if text else None
    except (ValueError, TypeError, RecursionError):
        return None


def _check_metric_types(path: Path, metrics: Mapping[str, list]) -> None:
    for name, rows in metrics.items():
        for step, t_s, value in rows:
            if not _is_int(step) or not 0 <= step <= MAX_STEP:
                raise AdviseError(f"{path}: train_metrics {printable(str(name))[:40]!r}: step {printable(str(step))[:40]!r} "
                                  f"{step_problem(step)}")
            if isinstance(t_s, bool) or not isinstance(t_s, (int, float)) or not math.isfinite(t_s):
                raise AdviseError(f"{path}: train_metrics {str(name)[:40]!r} step {step}: time {str(t_s)[:40]!r} is not a finite number")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise AdviseError(f"{path}: train_metrics {str(name)[:40]!r} step {step}: value {str(value)[:40]!r} is not a number")


def _checked_gpu_usage(path: Path) -> list[dict]:
    """``read_gpu_usage`` of the run log at ``path``, of rows checked first: AdviseError, in report's words
    (``bad_row_message``), naming the first with a value of the wrong type or outside its physical range (the
    peak memory read from them must be real). Both see the rows written when the check began (a run still
    being written appends more)."""
    last_rowid = last_gpu_sample_rowid(path)
    bad = bad_row_message(path, up_to_rowid=last_rowid)
    if bad:
        raise AdviseError(bad)
    return read_gpu_usage(path, up_to_rowid=last_rowid)


def _run_gpus(usage: list[dict]) -> tuple[str | None, int, int | None]:
    """(GPU name, GPU count, peak memory in bytes) of the run from ``read_gpu_usage``'s groups. The monitor samples
    every GPU of the machine: the run's GPUs are those its processes held memory on, else all; the name is the
    first they record, the peak their processes' memory (the GPUs' used memory where no process held any)."""
    used = [g for g in usage if g["held_memory"]] or usage
    peaks = [g["peak_bytes"] for g in used if g["peak_bytes"]]
    return (next((g["name"] for g in used if g["name"]), None), max(1, len({g["gpu_index"] for g in used})),
            max(peaks) if peaks else None)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


NOISE_NAMES = ("grad_sq_norm_small", "grad_sq_norm_big", "noise_b_small", "noise_b_big")
"""The gradient-noise fields (``NoiseScaleMeter.log_fields`` writes them): run-log metrics, CSV/JSONL columns."""


def _noise_from_metrics(metrics: Mapping[str, list]) -> GradNoiseSamples | None:
    if not all(metrics.get(n) for n in NOISE_NAMES):
        return None
    series = [{s: v for s, _, v in metrics[n] if v is not None and math.isfinite(v)} for n in NOISE_NAMES]
    steps = sorted(set.intersection(*(set(d) for d in series)))
    return _noise_samples([(s, *(d[s] for d in series)) for s in steps])


def _noise_samples(rows: list[tuple]) -> GradNoiseSamples | None:
    """The samples of ``rows`` (step, |G_small|², |G_big|², B_small, B_big), in step order; None without any."""
    if not rows:
        return None
    cols = [np.array([r[i] for r in rows]) for i in range(5)]
    return GradNoiseSamples(steps=cols[0], g_small_sq=cols[1], g_big_sq=cols[2], b_small=cols[3], b_big=cols[4])


# -- CSV / JSONL --------------------------------------------------------------------------------------
def read_csv(path: Path, loss_name: str | None = None, progress: Progress = None) -> TrainingLog:
    try:
        return _read_csv(path, loss_name, progress)
    except csv.Error as exc:  # a field over the csv module's size limit, a NUL byte
        raise AdviseError(f"{path}: not a readable CSV ({exc})") from None


def _read_csv(path: Path, loss_name: str | None, progress: Progress = None) -> TrainingLog:
    """Streamed: line by line, the columns the analysis uses only, into bounded step bins (StepBins)."""
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as f:
        first = f.readline()
        if not first.strip():
            raise AdviseError(f"{path}: empty file")
        try:
            dialect = csv.Sniffer().sniff(first, delimiters=",;\t ")
        except csv.Error:
            dialect = csv.excel
        header = [h.strip() for h in next(csv.reader([first], dialect))]
        columns = _columns(path, header, loss_name)
        wanted = {*columns[:5], pick_eval_loss(header, columns[0]), *NOISE_NAMES}
        used = [i for i, name in enumerate(header) if name in wanted]

        cut, skipped = _may_end_cut(path), []

        def rows() -> Iterator[tuple[int, dict[str, str], bool]]:
            for line_no, cells, last in _with_last(enumerate(csv.reader(f, dialect), start=2)):
                if not cells or all(not c.strip() for c in cells):
                    continue
                if cut and last and len(cells) != len(header):
                    skipped.append((line_no, f"{len(cells)} fields, the header has {len(header)}"))
                    continue
                if len(cells) > len(header):
                    raise AdviseError(f"{path}:{line_no}: {len(cells)} fields, the header has {len(header)}")
                yield line_no, {header[i]: cells[i].strip() for i in used if i < len(cells)}, cut and last

        return _from_records(path, header, rows(), loss_name, skipped, progress)


def _may_end_cut(path: Path) -> bool:
    """True when the file does not end with a newline: a log still being written may end on half a line."""
    with path.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return False
        f.seek(-1, 2)
        return f.read(1) not in (b"\n", b"\r")


def _with_last(items: Iterable[tuple]) -> Iterator[tuple]:
    """Each item with one more field: whether it is the last."""
    it = iter(items)
    held = next(it, None)
    for item in it:
        yield (*held, False)
        held = item
    if held is not None:
        yield (*held, True)


def _say_skipped(path: Path, skipped: list[tuple[Where, str]]) -> None:
    """The cut last line skipped, said once the rest was read (a file that is nothing but that line is refused
    in one line, for what it lacks)."""
    for line_no, why in skipped:
        logger.warning("%s:%s: the last line is cut off (%s; no newline ends the file: a log still being written?): "
                       "skipped", path, line_no, why)


def read_jsonl(path: Path, loss_name: str | None = None, progress: Progress = None) -> TrainingLog:
    """JSON Lines, one record per line, read twice: once for the keys (the columns ``_columns`` picks from; every
    bad line is refused or, the cut last line, skipped here) and once streamed into the curve, so a log of
    millions of lines is held as its thinned curve, not as a list of its records. The second pass reads no further
    than the first did (a live log grows meanwhile)."""
    cut = _may_end_cut(path)
    names: dict[str, None] = {}
    skipped: list[tuple[Where, str]] = []
    lines_read = 0
    for line_no, obj in _jsonl_records(path, cut, skipped):
        names.update(dict.fromkeys(obj))
        lines_read = line_no
    skipped_lines = {line_no for line_no, _ in skipped}

    def rows() -> Iterator[tuple[Where, Mapping[str, object], bool]]:
        for line_no, obj in _jsonl_records(path, cut, None, stop_after=lines_read):
            if line_no not in skipped_lines:
                yield line_no, obj, False

    return _from_records(path, list(names), rows(), loss_name, skipped, progress)


def _jsonl_records(path: Path, cut: bool, skipped: list[tuple[Where, str]] | None, *,
                   stop_after: int | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, record) of each non-blank line of a JSON Lines file. A bad line is an AdviseError (one line),
    or, the last line of a file that may end ``cut`` off, added to ``skipped``; ``skipped`` None (the second pass,
    whose lines the first checked): a line that no longer parses is passed over. ``stop_after``: the last line
    number read."""
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        for line_no, line, last in _with_last(enumerate(f, start=1)):
            if stop_after is not None and line_no > stop_after:
                return
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                why = exc.args[0].split(':')[0]
                if skipped is None:
                    continue
                if cut and last:
                    skipped.append((line_no, f"not a JSON object: {why}"))
                    continue
                raise AdviseError(f"{path}:{line_no}: not a JSON object ({why})") from None
            except RecursionError:
                if skipped is None:
                    continue
                raise AdviseError(f"{path}:{line_no}: JSON nested too deeply to be a log record") from None
            if not isinstance(obj, dict):
                if skipped is None:
                    continue
                raise AdviseError(f"{path}:{line_no}: expected a JSON object per line, got {type(obj).__name__}")
            yield line_no, obj


def _is_one_json_document(path: Path) -> bool:
    """True for a file whose first line is not a whole JSON value (a pretty-printed document such as HF's
    trainer_state.json), or is one that holds a ``log_history`` (a trainer_state.json written on one line);
    False for JSON Lines, whose every line is one record."""
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        value = json.loads(first)
    except (ValueError, RecursionError):
        return first.lstrip().startswith(("{", "["))
    return isinstance(value, dict) and isinstance(value.get("log_history"), list)


def read_trainer_state(path: Path, loss_name: str | None = None) -> TrainingLog:
    """HF Trainer's ``trainer_state.json``: the rows of its ``log_history`` (``loss``, ``step``, ``learning_rate``,
    ``eval_loss``...), less the summary row the Trainer appends at the end (``train_loss``, ``train_runtime``: a
    mean over the run, not a point of the curve). ``max_steps`` goes to the meta: where the run ends."""
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as f:
            doc = json.load(f)
    except ValueError as exc:
        raise AdviseError(f"{path}: neither JSON Lines nor one JSON document ({exc})") from None
    except RecursionError:
        raise AdviseError(f"{path}: JSON nested too deeply to be a log") from None
    history = doc.get("log_history") if isinstance(doc, dict) else None
    if not isinstance(history, list):
        raise AdviseError(f"{path}: one JSON document without a 'log_history' list: advise reads HF Trainer's "
                          "trainer_state.json, or JSON Lines (one object per line)")
    rows, names = [], {}
    for i, obj in enumerate(history):
        if not isinstance(obj, dict):
            raise AdviseError(f"{path}: log_history[{i}] is a {type(obj).__name__}, not a JSON object")
        if "train_loss" in obj and "loss" not in obj:
            continue   # the end-of-training summary
        rows.append((f"log_history[{i}]", obj, False))
        names.update(dict.fromkeys(obj))
    max_steps = doc.get("max_steps")
    meta = {"max_steps": str(max_steps)} if _is_int(max_steps) and max_steps > 0 else {}
    return replace(_from_records(path, list(names), rows, loss_name), meta=meta)


def _columns(path: Path, names: list[str], loss_name: str | None = None
             ) -> tuple[str, str | None, str | None, str | None, str | None, tuple[str, ...]]:
    """The columns read: loss, step, learning rate, batch size, time (None where the log has none); then the
    other loss-like columns, not read."""
    loss_col, others = pick_loss(path, names, loss_name, "column")
    if loss_col is None:
        if any(n.startswith(("utilization.gpu", "memory.used")) for n in names):   # nvidia-smi --query-gpu
            raise AdviseError(f"{path}: an nvidia-smi log (GPU metrics, no loss): `gpuwise report` reads it; "
                              "advise reads a training log with a loss column")
        shown = ", ".join(printable(str(n))[:40] for n in names[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
        raise AdviseError(f"{path}: no loss column (columns: {shown or 'none'}); name one 'loss' or pass --loss-tag NAME")
    return (loss_col, pick_step(names), pick_name(names, LR_NAMES), pick_name(names, BATCH_NAMES),
            pick_name(names, TIME_NAMES), others)


def _from_records(path: Path, names: list[str], rows: Iterable[tuple[Where, Mapping[str, object], bool]],
                  loss_name: str | None = None, skipped: list[tuple[Where, str]] | None = None,
                  progress: Progress = None) -> TrainingLog:
    """The curve of ``rows`` (read once, in order), at most about ``2 * MAX_CURVE_POINTS`` points (StepBins).
    Each row: (where, record, whether it is a last line that may be cut off: skipped, not an error, when bad);
    ``skipped``: the cut lines the caller skipped already (filled while ``rows`` is read), said at the end."""
    skipped = [] if skipped is None else skipped
    loss_col, step_col, lr_col, batch_col, time_col, others = _columns(path, names, loss_name)
    eval_col = pick_eval_loss(names, loss_col)
    bins, eval_bins = StepBins(downsample.MAX_CURVE_POINTS), StepBins(downsample.MAX_CURVE_POINTS)
    noise_bins = StepBins(downsample.MAX_CURVE_POINTS) if set(NOISE_NAMES) <= set(names) else None
    nonfinite = NonFiniteCounter()   # NaN/inf losses counted as read, before the bins thin them away
    for index, (line_no, row, may_be_cut) in enumerate(rows):
        if progress is not None and index and index % PROGRESS_EVERY_ROWS == 0:
            progress(f"reading {path.name}: {index:,} rows")
        try:
            record = _record(path, line_no, row, index, (loss_col, step_col, lr_col, batch_col, time_col))
        except AdviseError as exc:
            if not may_be_cut:
                raise
            skipped.append((line_no, str(exc).removeprefix(f"{path}:{line_no}: ")))
            continue
        if eval_col is not None:
            point = _eval_point(path, line_no, row, index, step_col, eval_col)
            if point is not None:
                eval_bins.add(point)
        if noise_bins is not None:
            sample = _noise_point(path, line_no, row, index, step_col)
            if sample is not None:
                noise_bins.add(sample)
        if record is None:
            continue
        nonfinite.add(record[0], math.isfinite(record[2]))
        bins.add(record)
    records = bins.rows()
    if not records:
        raise AdviseError(f"{path}: no rows with a value in column {loss_col!r}")
    _say_skipped(path, skipped)
    if bins.width > 1:
        logger.info("%s: %d rows thinned to %d points (one per %d steps)", path, bins.rows_read, len(records), bins.width)
    # every read log's NaN/inf losses by the one rule, thinned or not (a resumed run that stops short of the first
    # attempt's end: its later rows no longer count, whatever the log's length)
    tally = nonfinite.tally()

    def col(i: int) -> np.ndarray | None:
        vals = [r[i] for r in records]
        if all(v is None for v in vals):
            return None
        return np.array([math.nan if v is None else v for v in vals], dtype=float)

    curve = Curve(steps=np.array([r[0] for r in records]), loss=col(2), t_s=_seconds(path, time_col, col(1)), lr=col(3),
                  batch_size=col(4), source=str(path), nonfinite=tally)
    evals = eval_bins.rows()
    eval_curve = (Curve(steps=np.array([r[0] for r in evals], dtype=np.int64), loss=np.array([r[1] for r in evals]),
                        source=str(path)) if evals else None)
    return TrainingLog(curve=curve, loss_name=printable(loss_col), other_loss_names=others, eval_curve=eval_curve,
                       eval_name=printable(eval_col) if eval_curve is not None else None,
                       noise=_noise_samples(noise_bins.rows()) if noise_bins is not None else None,
                       rows_read=bins.rows_read, thinned_bin_steps=bins.width)


def _seconds(path: Path, time_col: str | None, times: np.ndarray | None) -> np.ndarray | None:
    """``times`` (column ``time_col``, as written) in seconds: Unix milliseconds (MLflow's ``timestamp``) divided,
    and said once; any other times as they are (seconds from any origin, ISO times already read as seconds)."""
    if times is None or not is_epoch_ms(times):
        return times
    logger.warning("%s: column %r holds Unix times in milliseconds (as MLflow's 'timestamp'): read as seconds",
                   path, printable(str(time_col))[:40])
    return times / MS_PER_S


def _eval_point(path: Path, line_no: Where, row: Mapping[str, object], index: int, step_col: str | None,
                eval_col: str) -> tuple[int, float] | None:
    """(step, eval loss) of a row with a finite eval loss, else None. The eval series only adds a finding (the
    overfitting check): a value in it that is not a finite number is left out, never an error."""
    try:
        value = _number(row.get(eval_col), path, line_no, eval_col)
    except AdviseError:
        return None
    step = _lenient_step(path, line_no, row, index, step_col)
    if value is None or step is None or not math.isfinite(value):
        return None
    return step, value


def _lenient_step(path: Path, line_no: Where, row: Mapping[str, object], index: int, step_col: str | None
                  ) -> int | None:
    """The step of a row that only adds a finding (an eval loss, a noise sample): None where it is not a whole
    number from 0 to MAX_STEP, never an error (the training loss's own rows are checked, in ``_record``)."""
    try:
        step = _number(row.get(step_col), path, line_no, step_col) if step_col else float(index)
    except AdviseError:
        return None
    if step is None or not math.isfinite(step) or step != int(step) or not 0 <= step <= MAX_STEP:
        return None
    return int(step)


def _noise_point(path: Path, line_no: Where, row: Mapping[str, object], index: int, step_col: str | None
                 ) -> tuple[int, float, float, float, float] | None:
    """(step, |G_small|², |G_big|², B_small, B_big) of a row that holds all four, finite, with B_big > B_small >= 1,
    else None. Like the eval series, the noise scale only adds a finding: a value that cannot serve (an fp16
    overflow's NaN norm) leaves the row out, never an error."""
    step = _lenient_step(path, line_no, row, index, step_col)
    try:
        values = [_number(row.get(name), path, line_no, name) for name in NOISE_NAMES]
    except AdviseError:
        return None
    if step is None or any(v is None or not math.isfinite(v) for v in values):
        return None
    g_small_sq, g_big_sq, b_small, b_big = values
    return (step, g_small_sq, g_big_sq, b_small, b_big) if 1 <= b_small < b_big else None


def _record(path: Path, line_no: Where, row: Mapping[str, object], index: int,
            columns: tuple[str, str | None, str | None, str | None, str | None]) -> tuple | None:
    """(step, time, loss, lr, batch) of one row, None for a row without a loss (eval, lr only); AdviseError for a
    value out of range."""
    loss_col, step_col, lr_col, batch_col, time_col = columns
    loss = _number(row.get(loss_col), path, line_no, loss_col)
    if loss is None:
        return None
    step = _number(row.get(step_col), path, line_no, step_col) if step_col else float(index)
    if step is None or not math.isfinite(step):
        raise AdviseError(f"{path}:{line_no}: {step_col!r} is empty or not a number")
    if step != int(step) or not 0 <= step <= MAX_STEP:
        raise AdviseError(f"{path}:{line_no}: {printable(step_col)!r} is {step:g}: {step_problem(step)}")
    t = _time_s(row.get(time_col), path, line_no, time_col) if time_col else None
    if t is not None and not math.isfinite(t):
        raise AdviseError(f"{path}:{line_no}: {time_col!r} is {t}, not a finite time")
    lr = _number(row.get(lr_col), path, line_no, lr_col) if lr_col else None
    if lr is not None and not (math.isfinite(lr) and lr >= 0):
        raise AdviseError(f"{path}:{line_no}: {lr_col!r} is {lr:g}, not a learning rate >= 0")
    batch = _number(row.get(batch_col), path, line_no, batch_col) if batch_col else None
    if batch is not None and not (math.isfinite(batch) and batch >= 1):
        raise AdviseError(f"{path}:{line_no}: {batch_col!r} is {batch:g}, not a batch size >= 1")
    return int(step), t, loss, lr, batch


def step_problem(step: object) -> str:
    """Why a logged step is refused, naming the limit it breaks."""
    if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step) and step > MAX_STEP:
        return f"above {MAX_STEPS_TEXT}"
    return "not a whole number of steps >= 0"


def _number(value: object, path: Path, line_no: Where, column: str | None) -> float | None:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    if isinstance(value, bool):
        raise AdviseError(f"{path}:{line_no}: {column!r} is {value!r}, not a number")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer beyond floats (JSON allows any size)
            raise AdviseError(f"{path}:{line_no}: {column!r} is a number too large to be real") from None
    if not isinstance(value, str):
        raise AdviseError(f"{path}:{line_no}: {column!r} is a {type(value).__name__}, not a number")
    try:
        return float(value.strip())  # accepts 'nan', 'inf', '1e-3'
    except ValueError:
        raise AdviseError(f"{path}:{line_no}: {column!r} is {value[:40]!r}, not a number") from None


def _time_s(value: object, path: Path, line_no: Where, column: str | None) -> float | None:
    if isinstance(value, str) and value.strip() and not re.fullmatch(r"[-+0-9.eE]+", value.strip()):
        try:
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise AdviseError(f"{path}:{line_no}: {column!r} is {value[:40]!r}, neither seconds nor an ISO time") from None
    return _number(value, path, line_no, column)
