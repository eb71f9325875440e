"""Readers: a gpuwise run log, a CSV or JSONL file, or a TensorBoard event directory -> ``TrainingLog``.

One entry point, :func:`read_log`, picks the reader from the file itself. Column and tag names are
matched tolerantly (``loss``, ``train_loss``, ``train/loss``, ``Loss``...), because every framework
names them differently. A value that cannot be read, or is out of range (a step that is not a whole
number >= 0, a batch size < 1, a negative or infinite learning rate, a time that is not finite), raises
:class:`AdviseError` naming the file and line; rows without a loss (eval rows, lr-only rows) are skipped,
not errors. A loss may be NaN or inf: that is a finding (divergence), not bad input.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

import numpy as np

from gpuwise.advise.data import Curve, GradNoiseSamples, TrainingLog
from gpuwise.advise import downsample
from gpuwise.advise.downsample import StepBins
from gpuwise.advise.errors import AdviseError
from gpuwise.monitor.sample import sample_from_row
from gpuwise.monitor.sample_checks import sample_problem
from gpuwise.runlog import is_run_log, read_gpu_samples, read_meta, read_train_metrics
from gpuwise.text import printable, printable_or_none

logger = logging.getLogger(__name__)

MAX_STEP = 2**53  # steps beyond this are not counts of optimizer steps (and lose precision as floats)

# Normalised column/tag names, most specific first. Normalising: lower case, '/', '-', ' ', '.' -> '_'.
STEP_NAMES = ("step", "global_step", "steps", "iteration", "iter", "it", "optimizer_step", "train_step", "trainer_global_step")
LOSS_NAMES = ("loss", "train_loss", "training_loss", "loss_train", "train_train_loss", "train_loss_step",
              "trainer_loss", "train_lm_loss", "lm_loss", "loss_step", "train_loss_epoch")
LR_NAMES = ("lr", "learning_rate", "train_lr", "train_learning_rate", "lr_0", "lr_group0", "lr_adamw")
BATCH_NAMES = ("batch_size", "batch", "bs", "global_batch_size", "train_batch_size", "effective_batch_size")
TIME_NAMES = ("t_s", "time_s", "wall_time", "walltime", "wall_time_s", "time", "timestamp", "elapsed_s", "elapsed",
              "_timestamp", "relative_time")
_EVAL_WORDS = ("val", "eval", "test", "valid", "validation")


def normalise_name(name: str) -> str:
    return re.sub(r"[/\-\s.]+", "_", name.strip().lower()).strip("_")


def pick_name(names: Iterable[str], preferred: tuple[str, ...], *, fallback_word: str | None = None) -> str | None:
    """The first of ``names`` whose normalised form is in ``preferred`` (in that order of preference);
    else, with ``fallback_word``, the first name containing that word that is not an eval metric."""
    by_norm = {normalise_name(n): n for n in names}
    for p in preferred:
        if p in by_norm:
            return by_norm[p]
    if fallback_word:
        for norm, original in by_norm.items():
            parts = set(norm.split("_"))
            if fallback_word in norm and not parts & set(_EVAL_WORDS):
                return original
    return None


def read_log(path: str | Path, loss_name: str | None = None) -> TrainingLog:
    """Reads any supported log; the format comes from the content (SQLite header, event files) or suffix.

    ``loss_name``: the column, TensorBoard tag or run-log metric to read as the loss (default: the first of
    ``LOSS_NAMES``, else a name with "loss" that is not an eval metric)."""
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
    if suffix in (".jsonl", ".ndjson", ".json"):
        return read_jsonl(p, loss_name)
    if suffix in (".csv", ".tsv", ".txt", ".log"):
        return read_csv(p, loss_name)
    head = p.read_text(encoding="utf-8", errors="replace")[:1].strip()
    return read_jsonl(p, loss_name) if head == "{" else read_csv(p, loss_name)


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


def loss_like(names: Iterable[str]) -> list[str]:
    """The names that look like a training loss: one of ``LOSS_NAMES``, or any with "loss" that is not an eval
    metric (val/eval/test)."""
    out = []
    for name in names:
        norm = normalise_name(name)
        if norm in LOSS_NAMES or ("loss" in norm and not set(norm.split("_")) & set(_EVAL_WORDS)):
            out.append(name)
    return out


def pick_loss(path: Path, names: list[str], wanted: str | None, what: str) -> tuple[str | None, tuple[str, ...]]:
    """(the loss series to read, the other loss-like ones: said to be ignored). ``wanted`` (--loss-tag) must be
    one of ``names``, exactly or as normalised; None when the log has no loss-like name and none was asked."""
    if wanted is not None:
        exact = [n for n in names if n == wanted] or [n for n in names if normalise_name(n) == normalise_name(wanted)]
        if not exact:
            shown = ", ".join(repr(printable(n)[:60]) for n in (loss_like(names) or names)[:10]) or "none"
            raise AdviseError(f"{path}: no {what} {printable(wanted)[:60]!r} (--loss-tag); "
                              f"{'loss-like ones' if loss_like(names) else 'there are'}: {shown}")
        chosen = exact[0]
    else:
        chosen = pick_name(names, LOSS_NAMES, fallback_word="loss")
    return chosen, tuple(printable(n) for n in loss_like(names) if n != chosen)


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
    loss_rows = _last_per_step((s, t, v) for s, t, v in metrics[loss_metric])
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
    noise = _noise_from_metrics(metrics)
    samples = _checked_samples(path, read_gpu_samples(path))
    # the monitor samples every GPU of the machine: the run's GPUs are those its processes held memory on
    used = [s for s in samples if s.get("process_memory_bytes")] or samples
    gpu_name = printable_or_none(meta.get("gpu") or meta.get("gpu_name") or next((s["name"] for s in used if s.get("name")), None))
    indices = {s["gpu_index"] for s in used}
    mem = [s.get("process_memory_bytes") or s.get("memory_used_bytes") for s in used]
    mem = [m for m in mem if m]
    workload = _json_or_none(meta.get("workload"))
    precision = meta.get("precision") or (workload.get("precision") if isinstance(workload, dict) else None)
    return TrainingLog(curve=curve, noise=noise, gpu_name=gpu_name, gpu_count=max(1, len(indices)),
                       peak_memory_bytes=max(mem) if mem else None, precision=precision, meta=meta,
                       loss_name=printable(loss_metric), other_loss_names=others)


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


def _checked_samples(path: Path, rows: list[dict]) -> list[dict]:
    """The gpu_samples rows, each within its physical range (the peak memory read from them must be real)."""
    for i, row in enumerate(rows, start=1):
        try:
            problem = sample_problem(sample_from_row(row))
        except (TypeError, ValueError) as exc:
            problem = str(exc)[:100]
        if problem:
            raise AdviseError(f"{path}: gpu_samples row {i}: {problem}")
    return rows


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _noise_from_metrics(metrics: Mapping[str, list]) -> GradNoiseSamples | None:
    names = ("grad_sq_norm_small", "grad_sq_norm_big", "noise_b_small", "noise_b_big")
    if not all(metrics.get(n) for n in names):
        return None
    series = [{s: v for s, _, v in metrics[n] if v is not None and math.isfinite(v)} for n in names]
    steps = sorted(set.intersection(*(set(d) for d in series)))
    if not steps:
        return None
    cols = [np.array([d[s] for s in steps]) for d in series]
    return GradNoiseSamples(steps=np.array(steps), g_small_sq=cols[0], g_big_sq=cols[1], b_small=cols[2], b_big=cols[3])


def _last_per_step(rows: Iterable[tuple]) -> list[tuple]:
    """One row per step; a step logged twice (a resumed run re-doing steps) keeps its latest value."""
    by_step: dict[int, tuple] = {}
    for row in rows:
        by_step[int(row[0])] = row
    return [by_step[s] for s in sorted(by_step)]


# -- CSV / JSONL --------------------------------------------------------------------------------------
def read_csv(path: Path, loss_name: str | None = None) -> TrainingLog:
    try:
        return _read_csv(path, loss_name)
    except csv.Error as exc:  # a field over the csv module's size limit, a NUL byte
        raise AdviseError(f"{path}: not a readable CSV ({exc})") from None


def _read_csv(path: Path, loss_name: str | None) -> TrainingLog:
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
        used = [i for i, name in enumerate(header) if name in set(_columns(path, header, loss_name)[:5])]

        def rows() -> Iterator[tuple[int, dict[str, str]]]:
            for line_no, cells in enumerate(csv.reader(f, dialect), start=2):
                if not cells or all(not c.strip() for c in cells):
                    continue
                if len(cells) > len(header):
                    raise AdviseError(f"{path}:{line_no}: {len(cells)} fields, the header has {len(header)}")
                yield line_no, {header[i]: cells[i].strip() for i in used if i < len(cells)}

        return _from_records(path, header, rows(), loss_name)


def read_jsonl(path: Path, loss_name: str | None = None) -> TrainingLog:
    rows, names = [], {}
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise AdviseError(f"{path}:{line_no}: not a JSON object ({exc.args[0].split(':')[0]})") from None
            except RecursionError:
                raise AdviseError(f"{path}:{line_no}: JSON nested too deeply to be a log record") from None
            if not isinstance(obj, dict):
                raise AdviseError(f"{path}:{line_no}: expected a JSON object per line, got {type(obj).__name__}")
            rows.append((line_no, obj))
            names.update(dict.fromkeys(obj))
    return _from_records(path, list(names), rows, loss_name)


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
    return (loss_col, pick_name(names, STEP_NAMES), pick_name(names, LR_NAMES), pick_name(names, BATCH_NAMES),
            pick_name(names, TIME_NAMES), others)


def _from_records(path: Path, names: list[str], rows: Iterable[tuple[int, Mapping[str, object]]],
                  loss_name: str | None = None) -> TrainingLog:
    """The curve of ``rows`` (read once, in order), at most about ``2 * MAX_CURVE_POINTS`` points (StepBins)."""
    loss_col, step_col, lr_col, batch_col, time_col, others = _columns(path, names, loss_name)
    bins = StepBins(downsample.MAX_CURVE_POINTS)
    for index, (line_no, row) in enumerate(rows):
        loss = _number(row.get(loss_col), path, line_no, loss_col)
        if loss is None:
            continue  # a row that logs something else (eval, lr only)
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
        bins.add((int(step), t, loss, lr, batch))
    records = bins.rows()
    if not records:
        raise AdviseError(f"{path}: no rows with a value in column {loss_col!r}")
    if bins.width > 1:
        logger.info("%s: %d rows thinned to %d points (one per %d steps)", path, bins.rows_read, len(records), bins.width)

    def col(i: int) -> np.ndarray | None:
        vals = [r[i] for r in records]
        if all(v is None for v in vals):
            return None
        return np.array([math.nan if v is None else v for v in vals], dtype=float)

    curve = Curve(steps=np.array([r[0] for r in records]), loss=col(2), t_s=col(1), lr=col(3), batch_size=col(4),
                  source=str(path))
    return TrainingLog(curve=curve, loss_name=printable(loss_col), other_loss_names=others)


def step_problem(step: object) -> str:
    """Why a logged step is refused, naming the limit it breaks."""
    if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step) and step > MAX_STEP:
        return f"above 2^53 = {MAX_STEP:,}, the largest step count a float holds exactly"
    return "not a whole number of steps >= 0"


def _number(value: object, path: Path, line_no: int, column: str | None) -> float | None:
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


def _time_s(value: object, path: Path, line_no: int, column: str | None) -> float | None:
    if isinstance(value, str) and value.strip() and not re.fullmatch(r"[-+0-9.eE]+", value.strip()):
        try:
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise AdviseError(f"{path}:{line_no}: {column!r} is {value[:40]!r}, neither seconds nor an ISO time") from None
    return _number(value, path, line_no, column)


# -- TensorBoard ----------------------------------------------------------------------------------------
class _TruncatedRecords(logging.Handler):
    """Collects the event files tensorboard's loader stopped reading at a bad record. The loader swallows
    the DataLossError and says so only at DEBUG level ("Truncated record in PATH"): listened to here, while
    a Reload runs, without letting its debug output through anywhere else."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.files: list[str] = []
        self._logger = logging.getLogger("tensorboard")

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("Truncated record in") and record.args:
            self.files.append(str(record.args[0]))

    def __enter__(self) -> "_TruncatedRecords":
        self._saved = self._logger.level, self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]


def read_tensorboard(path: Path, loss_name: str | None = None) -> TrainingLog:
    """A directory of event files (one run), or one event file. Uses tensorboard's own reader."""
    from tensorboard.backend.event_processing import event_accumulator

    run_dir = path
    if path.is_dir() and not any("tfevents" in f.name for f in path.iterdir() if f.is_file()):
        runs = sorted({f.parent for f in path.rglob("*tfevents*") if f.is_file()})
        if not runs:
            raise AdviseError(f"{path}: no TensorBoard event files (events.out.tfevents.*) in this directory")
        if len(runs) > 1:
            listed = ", ".join(str(r.relative_to(path)) for r in runs[:5])
            raise AdviseError(f"{path}: holds {len(runs)} TensorBoard runs ({listed}); pass one of them")
        run_dir = runs[0]
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.SCALARS: 0})
    damaged = _TruncatedRecords()
    try:
        with damaged:
            acc.Reload()
    except Exception as exc:  # tensorboard raises several types for corrupt files
        raise AdviseError(f"{run_dir}: cannot read TensorBoard events ({type(exc).__name__}: {exc})") from None
    for name in damaged.files:
        logger.warning("%s: damaged or cut off mid-file (a record fails its check): using the events before it",
                       name)
    tags = acc.Tags().get("scalars", [])
    loss_tag, others = pick_loss(run_dir, list(tags), loss_name, "TensorBoard scalar tag")
    if loss_tag is None:
        shown = ", ".join(printable(t)[:40] for t in tags[:20]) or "none"
        raise AdviseError(f"{run_dir}: no loss scalar among the TensorBoard tags ({shown}); --loss-tag NAME reads one")
    events = _last_per_step((e.step, e.wall_time, e.value) for e in acc.Scalars(loss_tag))
    steps = np.array([e[0] for e in events])

    def aligned(tag: str | None) -> np.ndarray | None:
        if tag is None:
            return None
        by_step = {e.step: e.value for e in acc.Scalars(tag)}
        return np.array([by_step.get(int(s), math.nan) for s in steps], dtype=float)

    curve = Curve(steps=steps, loss=np.array([e[2] for e in events], dtype=float),
                  t_s=np.array([e[1] for e in events], dtype=float), lr=aligned(pick_name(tags, LR_NAMES)),
                  batch_size=aligned(pick_name(tags, BATCH_NAMES)), source=str(run_dir))
    return TrainingLog(curve=curve, loss_name=printable(loss_tag), other_loss_names=others)
