"""What a run measured about its own job, read from a run log: the record that predictions are checked
against (``report``) and calibrated on (``gpuwise.calibrate``).

A run log carries it when the job ran under ``gpuwise run --model SPEC …`` and/or ``gpuwise.guard.Guard(…,
workload=…)``: the workload (meta ``workload``), the wall time of each optimizer step (train metric
``step_time_s``, written by the guard), PyTorch's peak allocated/reserved memory (``torch_memory`` events of
the torch hook or the guard), NVML's memory of the job's processes (``gpu_samples``), and the stack
(meta ``driver_version``, ``torch_version``, ``cuda_version``).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from gpuwise.report.errors import ReportError
from gpuwise.report.sources import UsageLog, load_usage_log
from gpuwise.report.usage import UsageSummary, summarize
from gpuwise.runlog import (CUDA_VERSION_KEY, DRIVER_VERSION_KEY, STEP_TIME_METRIC, TORCH_MEMORY_EVENT,
                            TORCH_VERSION_KEY, WORKLOAD_KEY, RunLogError, read_train_metrics)

WARMUP_STEPS = 5        # the first optimizer steps (allocator growth, cuDNN autotuning, lazy init) are not timed
MIN_TIMED_STEPS = 3     # fewer timed steps than this: no step time
PRIVATE_MODEL = "private"
_PUBLIC = re.compile(r"^(torchvision|timm):[A-Za-z0-9_.-]+$|^hf:[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$")


def public_model(spec: str) -> str:
    """``spec`` when it names a public model (torchvision:resnet50, timm:…, hf:org/name), else "private": a
    local file (file.py:factory, hf:config.json) would give a path away, and runs code of its own."""
    spec = str(spec)
    if _PUBLIC.match(spec) and not spec.endswith((".json", ".py")):
        return spec
    return PRIVATE_MODEL


@dataclass(frozen=True)
class Measurement:
    """One job measured on one GPU kind. Bytes are per GPU; None where the run did not record it."""

    gpu_name: str | None                  # as the driver (or torch) named it
    workload: Mapping[str, object] | None # Workload.to_dict()
    step_time_s: float | None             # median wall time of an optimizer step after WARMUP_STEPS
    timed_steps: int = 0
    peak_allocated_bytes: int | None = None   # torch.cuda.max_memory_allocated
    peak_reserved_bytes: int | None = None    # torch.cuda.max_memory_reserved
    process_memory_bytes: int | None = None   # NVML: the job's processes at their peak (nvidia-smi)
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    source: str = ""                      # where it was read (a path: never exported)
    logged_steps: int = 0                 # step times the log holds, warm-up included (not part of what is measured)

    @property
    def stack(self) -> dict[str, str | None]:
        """The software under the job: driver, CUDA and torch versions."""
        return {"driver": self.driver_version, "cuda": self.cuda_version, "torch": self.torch_version}

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["workload"] = dict(self.workload) if self.workload is not None else None
        return d


def median_step_time_s(step_times_s: list[float]) -> tuple[float | None, int]:
    """(median after the warm-up steps, steps timed); None when fewer than MIN_TIMED_STEPS remain."""
    timed = [t for t in step_times_s[WARMUP_STEPS:] if t is not None and t > 0]
    if len(timed) < MIN_TIMED_STEPS:
        return None, len(timed)
    return statistics.median(timed), len(timed)


def unmeasured_step_time_why(logged_steps: int, timed_steps: int) -> str:
    """Why ``median_step_time_s`` gave no step time, in words ("3 steps, all warm-up"): ``logged_steps`` step times
    in the log, ``timed_steps`` of them usable after the warm-up."""
    if logged_steps == 0:
        return "no step times in the log (a guarded job's run log has them)"
    steps = f"{logged_steps} step{'s' if logged_steps != 1 else ''}"
    if logged_steps <= WARMUP_STEPS:
        return f"{steps}, all warm-up (the first {WARMUP_STEPS} are not timed)"
    return f"{steps}, {timed_steps} timed after the {WARMUP_STEPS} warm-up ({MIN_TIMED_STEPS} needed)"


def _json(text: str | None) -> object:
    try:
        return json.loads(text) if text else None
    except (ValueError, TypeError, RecursionError):
        return None


def read_measurement(path: str | Path) -> Measurement:
    """The measurement a gpuwise run log carries (fields None where it has none); ReportError when the
    file is not a readable run log."""
    log = load_usage_log(path)
    return measurement_from(log, summarize(log) if log.samples else None)


def measurement_from(log: UsageLog, usage: UsageSummary | None) -> Measurement:
    """``read_measurement`` of a log already read and summarised (``usage``: ``summarize(log)``, None when the
    log has no samples), so a report summarises a large log once."""
    path = log.path
    if log.source != "gpuwise run log":
        raise ReportError(f"{path}: not a gpuwise run log ({log.source}): it records no workload nor step times")
    meta = log.meta
    try:
        rows = read_train_metrics(path).get(STEP_TIME_METRIC, [])
    except RunLogError as exc:
        raise ReportError(str(exc)) from None
    step_times_s = [v for _step, _t, v in sorted(rows, key=lambda r: r[1])]
    step_s, timed = median_step_time_s(step_times_s)
    workload = _json(meta.get(WORKLOAD_KEY))
    process_bytes = None
    if usage is not None:
        job = [d for d in usage.job_devices if d.memory_basis == "process" and d.peak_memory_bytes]
        process_bytes = max((d.peak_memory_bytes for d in job), default=None)
    peaks = log.torch_peaks
    versions = {}
    for e in log.events:
        data = _json(e.get("message")) if e.get("kind") == TORCH_MEMORY_EVENT else None
        if isinstance(data, dict):
            versions.update({k: data[k] for k in ("torch_version", "cuda_version", "gpu_name") if data.get(k)})
    return Measurement(
        gpu_name=(usage.gpu_name if usage else None) or meta.get("gpu_name") or versions.get("gpu_name"),
        workload=workload if isinstance(workload, dict) else None,
        step_time_s=step_s, timed_steps=timed,
        peak_allocated_bytes=max((p.max_allocated_bytes for p in peaks), default=None),
        peak_reserved_bytes=max((p.max_reserved_bytes for p in peaks), default=None),
        process_memory_bytes=process_bytes,
        driver_version=meta.get(DRIVER_VERSION_KEY) or None,
        cuda_version=meta.get(CUDA_VERSION_KEY) or versions.get("cuda_version"),
        torch_version=meta.get(TORCH_VERSION_KEY) or versions.get("torch_version"),
        source=str(path),
        logged_steps=len(step_times_s),
    )
