"""The user calibration file: plain TOML at ``~/.config/gpuwise/calibration.toml`` (the directory of the
user catalog: GPUWISE_CONFIG_DIR or XDG_CONFIG_HOME move it). Written by ``gpuwise calibrate``, read by
``estimate``/``recommend``/``report``; ``gpuwise calibrate --reset`` removes it (a damaged one is moved aside,
whole), ``--forget RUN`` drops one run and refits its GPU on the others. docs/calibrate.md.

One table per GPU: the fitted factors, host term and memory offset, and the runs they were fitted on
(the shipped model's per-class prediction and the measured figures: no paths, hosts or model names), so
that the next ``calibrate`` refits on old and new runs together without tracing the old ones again.
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from gpuwise.atomic import write_text_atomic
from gpuwise.calibrate.calibration import GpuCalibration
from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.evidence import fitted_classes
from gpuwise.calibrate.fit import fit_gpu, fit_memory_offset
from gpuwise.calibrate.ranges import finite_number, step_time_s
from gpuwise.calibrate.step import LAUNCH, MEMORY_FIGURES, OFFLOAD, FitRow
from gpuwise.catalog import Catalog, CatalogError, resolve_gpu
from gpuwise.catalog.loader import user_config_dir

FILE_NAME = "calibration.toml"
DAMAGED_SUFFIX = ".damaged"     # a damaged file is kept beside it under this name (then -2, -3, …) by --reset
LAST = "last"                   # --forget's name for the newest run
MIN_FINGERPRINT_PREFIX = 4      # --forget takes a fingerprint's first characters, at least these many
# 2: the host term and the launch factor sit on the host's side of the step's smooth maximum (step.compose);
# 1 added the host term to every step and scaled the launch wait: such a file is refitted on its runs as read.
FORMAT_VERSION = 2
READS = (1, 2)
HEADER = ("# gpuwise user calibration, written by `gpuwise calibrate` from your measured runs (docs/calibrate.md).\n"
          "# estimate, recommend and report apply it unless --no-user-calibration; "
          "`gpuwise calibrate --reset` removes it.\n")


def user_calibration_path() -> Path:
    """Where the user's calibration lives: ``calibration.toml`` in the user config dir (GPUWISE_CONFIG_DIR,
    else $XDG_CONFIG_HOME/gpuwise, else ~/.config/gpuwise); it need not exist."""
    return user_config_dir() / FILE_NAME


def _row_to_toml(r: FitRow) -> dict:
    d = {"fingerprint": r.fingerprint, "predicted_by_class_s": dict(r.predicted_by_class_s),
         "predicted_other_s": r.predicted_other_s, "measured_step_time_s": r.measured_step_time_s,
         "stack": {k: v for k, v in r.stack.items() if v}}
    for key in ("predicted_outside_allocator_bytes", "measured_outside_allocator_bytes", "predicted_host_s",
                "measured_peak_bytes", "job_key"):
        if getattr(r, key) is not None:         # TOML has no null: absent means not measured
            d[key] = getattr(r, key)
    if r.unmeasured_memory:
        d["unmeasured_memory"] = list(r.unmeasured_memory)
    return d


def _whole(value: object, name: str) -> int | None:
    """A byte count as stored (None when absent); ValueError when it is not a whole number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} {str(value)[:40]!r} is not a whole number of bytes")
    return value


def _class_name(stored: object) -> str:
    """A stored run's class as the fit keys it now: an offloaded step's CPU part is ``offload`` whatever the precision
    (a run stored before it was kept apart from the GPU's classes names it ``offload/bf16``)."""
    name = str(stored)
    return OFFLOAD if name.split("/")[0] == OFFLOAD else name


def _keyed_offload(t: Mapping) -> bool:
    """Whether a stored GPU table's runs name the offload part by precision (``offload/bf16``): fitted when it was
    the GPU's work, so its factors are refitted on its runs as read."""
    return any(str(k).split("/")[0] == OFFLOAD and str(k) != OFFLOAD
               for r in t.get("run", []) for k in r.get("predicted_by_class_s", {}))


def _row_from_toml(d: Mapping, where: str) -> FitRow:
    """A stored run; ValueError naming ``where`` and the key when a figure is out of its range (times: finite,
    the measured step > 0, the predicted ones >= 0)."""
    def seconds(key: str, value: object) -> float:
        return finite_number(value, f"{where}.{key}", positive=False)

    return FitRow(
        fingerprint=str(d["fingerprint"]),
        predicted_by_class_s={_class_name(k): seconds(f"predicted_by_class_s.{k}", v)
                              for k, v in d["predicted_by_class_s"].items()},
        predicted_other_s=seconds("predicted_other_s", d["predicted_other_s"]),
        measured_step_time_s=step_time_s(d["measured_step_time_s"], f"{where}.measured_step_time_s"),
        predicted_outside_allocator_bytes=_whole(d.get("predicted_outside_allocator_bytes"),
                                                 f"{where}.predicted_outside_allocator_bytes"),
        measured_outside_allocator_bytes=_whole(d.get("measured_outside_allocator_bytes"),
                                                f"{where}.measured_outside_allocator_bytes"),
        stack={str(k): str(v) for k, v in d.get("stack", {}).items()},
        predicted_host_s=seconds("predicted_host_s", d["predicted_host_s"]) if "predicted_host_s" in d else None,
        unmeasured_memory=tuple(str(k) for k in d.get("unmeasured_memory", ()) if k in MEMORY_FIGURES),
        measured_peak_bytes=_whole(d.get("measured_peak_bytes"), f"{where}.measured_peak_bytes"),
        job_key=str(d["job_key"]) if "job_key" in d else None,
    )


def to_toml(calibrations: Mapping[str, GpuCalibration]) -> str:
    doc = {"format_version": FORMAT_VERSION, "gpu": {
        gpu: {"label": c.label, "fitted": c.fitted, "global_factor": c.global_factor,
              "class_factors": dict(c.class_factors), "host_s": c.host_s,
              **({"memory_offset_bytes": c.memory_offset_bytes} if c.memory_offset_bytes is not None else {}),
              "stack": {k: v for k, v in c.stack.items() if v},
              "run": [_row_to_toml(r) for r in c.runs]}
        for gpu, c in sorted(calibrations.items())}}
    return HEADER + tomli_w.dumps(doc)


def from_toml(text: str, source: str = FILE_NAME) -> dict[str, GpuCalibration]:
    try:
        doc = tomllib.loads(text)
        version = doc.get("format_version")
        if version not in READS:
            raise ValueError(f"format_version {version!r}, this gpuwise reads {' and '.join(map(str, READS))}")
        out = {}
        for gpu, t in doc.get("gpu", {}).items():
            runs = tuple(_row_from_toml(r, f"gpu.{gpu}.run[{i}]") for i, r in enumerate(t.get("run", []), start=1))
            fitted = str(t.get("fitted", ""))
            # fitted with the host term in series (format 1), or with an offloaded step's CPU part as the GPU's
            # work: refit its runs as they are now
            if runs and (version == 1 or _keyed_offload(t)):
                out[gpu] = fit_gpu(gpu, runs, today=fitted)
                continue
            factors = {str(k): finite_number(v, f"gpu.{gpu}.class_factors.{k}", positive=True)
                       for k, v in t["class_factors"].items()}
            offset = _whole(t.get("memory_offset_bytes"), f"gpu.{gpu}.memory_offset_bytes")   # absent: not measured
            host_s = finite_number(t["host_s"], f"gpu.{gpu}.host_s", positive=False)
            global_factor = finite_number(t["global_factor"], f"gpu.{gpu}.global_factor", positive=True)
            if version == 1:                   # no runs to refit: the host-side figures meant something else
                factors.pop(LAUNCH, None)
                host_s = 0.0
            if runs:      # a file written before the evidence rule: its runs say what it may scale and measured
                factors = {k: v for k, v in factors.items() if k in fitted_classes(runs)}
                offset = offset if fit_memory_offset(runs) is not None else None
            out[gpu] = GpuCalibration(
                gpu=gpu, class_factors=factors,
                global_factor=global_factor, host_s=host_s,
                memory_offset_bytes=int(offset) if offset is not None else None, runs=runs,
                stack={str(k): str(v) for k, v in t.get("stack", {}).items()}, fitted=fitted)
        return out
    except (tomllib.TOMLDecodeError, CalibrateError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CalibrateError(f"{source}: not a gpuwise calibration file ({str(exc)[:150]}); "
                             "`gpuwise calibrate --reset` moves it aside, kept whole beside it "
                             f"({Path(source).name}{DAMAGED_SUFFIX}); --no-user-calibration ignores it") from None


def unknown_gpus(calibrations: Mapping[str, GpuCalibration], catalog: Catalog) -> dict[str, str]:
    """GPU table -> why it applies to no GPU of ``catalog``: estimates look a calibration up by the GPU's catalog
    id, so a table under another name (a hand-edited file, a GPU of a ``--catalog`` file not given now) is never
    applied. An alias says which id it names. A MIG slice's id (``a100-40gb-sxm4-mig-3g.20gb``: what a run on a
    slice calibrates) is known though no table of the catalog lists it: the resolver makes the slice, under that id."""
    ids = {g.id for g in catalog.gpus}
    out = {}
    for gpu in calibrations:
        if gpu in ids:
            continue
        try:
            named = resolve_gpu(catalog, gpu).id
            if named == gpu:
                continue
            out[gpu] = f"names {named} by another name than its id: the table must be [gpu.{named}]"
        except CatalogError as exc:
            out[gpu] = str(exc)
    return out


def applicable(calibrations: Mapping[str, GpuCalibration], catalog: Catalog,
               path: Path | None = None) -> dict[str, GpuCalibration]:
    """The calibrations of GPUs ``catalog`` knows by id; each other table is warned about (logging, one line) and
    left out of what applies, not out of the file."""
    unknown = unknown_gpus(calibrations, catalog)
    for gpu, why in unknown.items():
        logging.getLogger(__name__).warning(
            "%s: [gpu.%s] is no GPU of the catalog (%s): its calibration applies to nothing (`gpuwise calibrate "
            "--reset --gpu %s` removes it)", path or user_calibration_path(), gpu, why, gpu)
    return {gpu: c for gpu, c in calibrations.items() if gpu not in unknown}


def load(path: Path | None = None) -> dict[str, GpuCalibration]:
    """The user's calibrations by GPU id; empty when there is no file."""
    p = path or user_calibration_path()
    if not p.is_file():
        return {}
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrateError(f"{p}: cannot read the calibration file ({str(exc)[:150]}); `gpuwise calibrate --reset` "
                             f"moves it aside, kept whole beside it ({p.name}{DAMAGED_SUFFIX}); --no-user-calibration "
                             "ignores it") from None
    return from_toml(text, str(p))


def save(calibrations: Mapping[str, GpuCalibration], path: Path | None = None) -> Path:
    """Write the file whole or not at all (a temporary file renamed over it)."""
    p = path or user_calibration_path()
    text = to_toml(calibrations)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(p, text)
    except OSError as exc:
        raise CalibrateError(f"{p}: cannot write the calibration file ({exc})") from None
    return p


@dataclass(frozen=True)
class Reset:
    """What ``reset`` did: ``removed`` something; ``backup``, where a file it could not read was moved (whole, all
    GPUs' tables in it) and ``damage``, why it could not be read; ``kept``, the GPUs whose tables stay in the file
    (one GPU's removed: the file stays while another's is in it). True when something was removed."""

    removed: bool
    backup: Path | None = None
    damage: str = ""
    kept: tuple[str, ...] = ()

    def words(self, path: Path, gpu: str | None) -> str:
        """What was done, in one line: the file removed, or only ``gpu``'s table from it (the file stays)."""
        if self.backup is not None:
            return (f"{path} could not be read as a calibration: moved it, whole, to {self.backup} (every GPU's "
                    "calibration was in it, and none applies now: repair it and move it back, or calibrate again)")
        if gpu is None:
            return f"removed {path}" if self.removed else f"nothing to remove: {path} does not exist"
        if not self.removed:
            return f"no calibration of {gpu} in {path}: nothing removed"
        if self.kept:
            return f"removed the calibration of {gpu} from {path} (kept there: {', '.join(self.kept)})"
        return f"removed the calibration of {gpu}, the last in it: removed {path}"

    def __bool__(self) -> bool:
        return self.removed


def reset(gpu: str | None = None, path: Path | None = None) -> Reset:
    """Remove the file (or only ``gpu``'s table). A file that cannot be read as a calibration is moved aside whole
    (``DAMAGED_SUFFIX``), whichever was asked: one GPU's table cannot be told from the damage, and nothing of the
    user's is deleted."""
    p = path or user_calibration_path()
    if not p.is_file():
        return Reset(False)
    try:
        calibrations = load(p)
    except CalibrateError as exc:
        return Reset(True, backup=_move_aside(p), damage=str(exc))
    if gpu is None:
        p.unlink()
        return Reset(True)
    if gpu not in calibrations:
        return Reset(False)
    del calibrations[gpu]
    if calibrations:
        save(calibrations, p)
    else:
        p.unlink()
    return Reset(True, kept=tuple(sorted(calibrations)))


def _move_aside(p: Path) -> Path:
    """``p`` renamed to the first free ``p.damaged``, ``p.damaged-2``, …; that path."""
    for n in range(1, 1000):
        backup = p.with_name(p.name + DAMAGED_SUFFIX + (f"-{n}" if n > 1 else ""))
        if not backup.exists():
            try:
                p.rename(backup)
            except OSError as exc:
                raise CalibrateError(f"{p}: cannot move the damaged calibration file aside ({exc})") from None
            return backup
    raise CalibrateError(f"{p}: cannot move the damaged calibration file aside (999 earlier copies beside it)")


@dataclass(frozen=True)
class Forgotten:
    """What ``forget`` did: the GPU, the run dropped, and that GPU's calibration refitted on its other runs (None
    when it had no other: its table is removed)."""

    gpu: str
    run: FitRow
    calibration: GpuCalibration | None


def forget(run: str, gpu: str | None = None, path: Path | None = None) -> Forgotten:
    """Drop one stored run and refit its GPU on the others. ``run``: ``LAST`` (the newest run of ``gpu``, or of the
    only calibrated GPU) or a fingerprint (at least ``MIN_FINGERPRINT_PREFIX`` of its first characters, naming one
    run), as ``gpuwise calibrate`` lists them. CalibrateError when no run or more than one matches."""
    p = path or user_calibration_path()
    calibrations = load(p)
    if gpu is not None and gpu not in calibrations:
        raise CalibrateError(f"no calibration of {gpu} in {p}: nothing to forget")
    pool = {gpu: calibrations[gpu]} if gpu is not None else calibrations
    if not pool:
        raise CalibrateError(f"no calibration of yours ({p}): nothing to forget")
    if run == LAST:
        if len(pool) > 1:
            raise CalibrateError(f"--forget {LAST}: runs on {len(pool)} GPUs ({', '.join(sorted(pool))}): name one "
                                 "with --gpu")
        [(gpu_id, cal)] = pool.items()
        if not cal.runs:
            raise CalibrateError(f"no stored run of {gpu_id} in {p}: nothing to forget (--reset --gpu {gpu_id})")
        found = [(gpu_id, cal.runs[-1])]
    else:
        key = run.strip().lower()
        if len(key) < MIN_FINGERPRINT_PREFIX:
            raise CalibrateError(f"--forget {run!r}: give '{LAST}' or a run's fingerprint (at least "
                                 f"{MIN_FINGERPRINT_PREFIX} of its characters; `gpuwise calibrate` lists them)")
        found = [(g, r) for g, c in sorted(pool.items()) for r in c.runs if r.fingerprint.startswith(key)]
        if not found:
            raise CalibrateError(f"--forget {run}: no stored run has that fingerprint (`gpuwise calibrate` lists them)")
        if len(found) > 1:
            raise CalibrateError(f"--forget {run}: {len(found)} runs start so ("
                                 f"{', '.join(r.fingerprint for _, r in found)}): give more of the fingerprint")
    [(gpu_id, dropped)] = found
    rest = [r for r in calibrations[gpu_id].runs if r.fingerprint != dropped.fingerprint]
    refitted = fit_gpu(gpu_id, rest) if rest else None
    if refitted is not None:
        calibrations[gpu_id] = refitted
    else:
        del calibrations[gpu_id]
    if calibrations:
        save(calibrations, p)
    else:
        p.unlink()
    return Forgotten(gpu=gpu_id, run=dropped, calibration=refitted)
