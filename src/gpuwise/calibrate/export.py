"""The anonymous measurement row: one JSON object a user may share (``gpuwise calibrate LOG --export FILE``)
and ``benchmarks/contributed/`` collects. docs/calibrate.md documents it.

What it holds: the GPU (catalog id and driver name), the stack (driver, CUDA, torch versions), the
workload (gpuwise's fields; a model that is not a public torchvision/timm/Hub name becomes "private"),
the figures (median step time, timed steps, peak allocated/reserved, NVML process memory) and how the process
memory was matched to the job (``process_match``: ``own_memory``; null: not said). What it
never holds: paths, host names, user names, process ids, times of day, the command line.

What ``export_rows`` writes, ``gpuwise calibrate`` reads back, with one exception it says at export: a
"private" row cannot calibrate, since gpuwise cannot trace a model the row does not carry (``rows.check_usable``
says so on import). A workload that does not read as a ``Workload`` is not exported at all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuwise import __version__
from gpuwise.atomic import write_new_text_atomic
from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.own_memory import MATCHES, MatchedMeasurement, process_match
from gpuwise.calibrate.ranges import step_time_s
from gpuwise.errors import GpuwiseError
from gpuwise.report.measured import PRIVATE_MODEL, Measurement, public_model
from gpuwise.workload import Workload

ROW_FORMAT = "gpuwise-measurement/1"
# What `gpuwise calibrate` reads (``learn.read_measurements``), said where a file is none of them
JSON_INPUTS = f"a measure.py result (JSON) or exported rows (JSON lines, one {ROW_FORMAT} object a line)"
INPUTS = f"a run log (SQLite, from `gpuwise run` or the guard), {JSON_INPUTS}"
FIGURES = ("step_time_s", "timed_steps", "peak_allocated_bytes", "peak_reserved_bytes", "process_memory_bytes")


@dataclass(frozen=True)
class RowMeasurement(MatchedMeasurement):
    """A measurement read from an exported row, which names its GPU twice: ``gpu_id``, the catalog id the row
    was exported for (authoritative: the id its calibration is keyed by, resolved as ``--gpu`` is), and
    ``gpu_name``, the driver's name, checked against it (``rows.measured_gpu``); a row without ``gpu_name`` has
    its id there too."""

    gpu_id: str | None = None


def export_row(m: Measurement, gpu_id: str) -> dict:
    workload = dict(m.workload or {})
    if "model" in workload:
        workload["model"] = public_model(workload["model"])
    return {"format": ROW_FORMAT, "gpu": gpu_id, "gpu_name": m.gpu_name,
            "stack": {"driver": m.driver_version, "cuda": m.cuda_version, "torch": m.torch_version},
            "workload": workload, "figures": {k: getattr(m, k) for k in FIGURES},
            "process_match": process_match(m), "gpuwise_version": __version__}


PRIVATE_ROW_NOTE = ("a local model file (file.py:factory, a local config.json) is exported as \"private\" so that no "
                    "path travels; gpuwise cannot trace a model the row does not carry, so such a row cannot "
                    "calibrate: calibrate the run log itself (`gpuwise calibrate LOG`) where the model file is")


def export_rows(measurements: Sequence[Measurement], gpu_id: str) -> list[dict]:
    """The rows of ``measurements`` (``export_row``); CalibrateError naming the first whose workload does not read
    as a ``Workload`` (it could not be read back). Warns (logging) once when some rows name a private model."""
    for m in measurements:
        try:
            Workload.from_dict(m.workload or {})
        except (GpuwiseError, TypeError, ValueError) as exc:
            raise CalibrateError(f"{m.source}: its workload cannot be exported ({str(exc)[:150]}): fix the log's "
                                 "workload (`gpuwise run --model …` records a checked one)") from None
    rows = [export_row(m, gpu_id) for m in measurements]
    private = sum(1 for r in rows if r["workload"].get("model") == PRIVATE_MODEL)
    if private:
        logging.getLogger(__name__).warning("%d of the %d row(s) name a private model: %s", private, len(rows),
                                            PRIVATE_ROW_NOTE)
    return rows


def check_target(path: str | Path, inputs: Sequence[str | Path] = ()) -> Path:
    """``path`` as a new file for rows; CalibrateError (one line) when something is there (above all one of the
    ``inputs`` read: an export never overwrites), or a directory, or when its folder is missing."""
    p = Path(path)
    if any(p.resolve() == Path(i).resolve() for i in inputs):
        raise CalibrateError(f"--export {p} is one of the logs read: name a new file for the rows")
    if p.is_dir():
        raise CalibrateError(f"--export {p} is a directory: name a new file for the rows")
    if p.exists() or p.is_symlink():
        raise CalibrateError(f"--export {p} already exists: name a new file (an export never overwrites)")
    if not p.parent.is_dir():
        raise CalibrateError(f"--export {p}: there is no folder {p.parent} to write it in")
    return p


def write_rows(path: str | Path, rows: Sequence[Mapping], inputs: Sequence[str | Path] = ()) -> Path:
    """``rows`` as JSON lines into ``path``, a new file (``check_target``) written whole; CalibrateError (one line,
    nothing written) when it cannot be."""
    p = check_target(path, inputs)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    try:
        return write_new_text_atomic(p, text)
    except FileExistsError:      # made since check_target looked
        raise CalibrateError(f"--export {p} already exists: name a new file (an export never overwrites)") from None
    except OSError as exc:
        raise CalibrateError(f"--export {p}: cannot write the rows ({exc.strerror or exc})") from None


def checked_figures(figures: Mapping, said: Mapping[str, str] | None = None) -> dict:
    """A measurement's ``FIGURES`` as ``Measurement`` holds them (absent: None; timed steps: 0); ValueError naming the
    first out of its range (by its name in ``said``, where the input names it otherwise): the step time a finite
    number of seconds > 0 (``ranges.step_time_s``), the others whole numbers >= 0. The one check of an exported row's
    figures and of measure.py's."""
    def name(k: str) -> str:
        return (said or {}).get(k, k)

    step = figures.get("step_time_s")
    if step is not None:
        step_time_s(step, name("step_time_s"))   # checked; kept as written, so its fingerprint stays the same
    out = {"step_time_s": step}
    for k in FIGURES[1:]:
        v = figures.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{name(k)} {v!r} is not a whole number >= 0")
        out[k] = v
    out["timed_steps"] = out["timed_steps"] or 0
    return out


def parse_row(row: Mapping, source: str) -> Measurement:
    """The measurement of one exported row; CalibrateError naming ``source`` when it is not one."""
    try:
        if row.get("format") != ROW_FORMAT:
            raise ValueError(f"format {row.get('format')!r}, expected {ROW_FORMAT!r}")
        figures, stack = row["figures"], row.get("stack") or {}
        workload = row["workload"]
        if not isinstance(workload, Mapping) or not isinstance(figures, Mapping):
            raise TypeError("workload and figures must be objects")
        checked = checked_figures(figures)
        gpu_id, gpu_name = (row.get(k) or None for k in ("gpu", "gpu_name"))    # "" is no name
        if gpu_id is None and gpu_name is None:
            raise KeyError("gpu")
        for key, value in (("gpu", gpu_id), ("gpu_name", gpu_name)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{key} {value!r} is not a GPU name")
        match = row.get("process_match")           # absent (a row exported before it was kept): not said
        if match is not None and match not in MATCHES:
            raise ValueError(f"process_match {str(match)[:40]!r}, expected one of {', '.join(MATCHES)} or null")
        return RowMeasurement(
            gpu_id=gpu_id, gpu_name=gpu_name or gpu_id, workload=dict(workload), **checked,
            driver_version=stack.get("driver"), cuda_version=stack.get("cuda"), torch_version=stack.get("torch"),
            source=source, process_match=match)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CalibrateError(f"{source}: not a {ROW_FORMAT} row ({str(exc)[:150]})") from None


def read_rows(path: str | Path) -> list[Measurement]:
    """Rows of a JSON-lines file (blank lines and lines starting with # skipped). The last reader ``gpuwise
    calibrate`` tries: a file whose first row is not JSON is none of its ``INPUTS`` (``not_an_input``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrateError(f"{p}: cannot read ({exc})") from None
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            if not out:
                raise not_an_input(p, text, no) from None
            raise CalibrateError(f"{p}:{no}: not JSON ({str(exc)[:100]})") from None
        if not isinstance(row, Mapping):
            raise CalibrateError(f"{p}:{no}: not a {ROW_FORMAT} row (not an object)")
        out.append(parse_row(row, f"{p}:{no}"))
    return out


def not_an_input(path: Path, text: str, line_no: int) -> CalibrateError:
    """The error of a file none of whose rows reads (its first, at ``line_no``, is not JSON): one of none of the
    ``INPUTS``, not a damaged rows file (whose later bad line is named as such)."""
    try:
        json.loads(text)
    except ValueError:
        return CalibrateError(f"{path}: not {INPUTS}: line {line_no} is not JSON")
    return CalibrateError(f"{path}: JSON, but not {JSON_INPUTS}")
