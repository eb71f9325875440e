"""What a job really used, from its samples: memory needed, busy share, idle stretches, power.

"Memory needed" is the memory of the job's own processes where the log has it (NVML per-process
memory: everything the process holds, CUDA context included, since the job needs its context on any GPU),
else the GPU's memory used (on a rented GPU that is the job plus the driver's few hundred MB). The peak
decides what fits (one moment over the limit is an out-of-memory error); p95 says how spiky it was.

"Busy share" is NVML's utilisation: the share of time in which at least one kernel ran, not how much of
the GPU the kernels filled (GPM SM activity tells that, on Hopper and newer).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

import numpy as np

from gpuwise.monitor.sample import GpuSample
from gpuwise.report.sources import TorchPeak, UsageLog

IDLE_BELOW_PCT = 5.0         # utilisation at or under this is idle
MIN_IDLE_STRETCH_S = 60.0    # shorter pauses are part of the job's rhythm (data loading, logging)


@dataclass(frozen=True)
class IdleStretch:
    start_s: float       # seconds after the log's start
    duration_s: float


@dataclass(frozen=True)
class DeviceUsage:
    label: str
    gpu_index: int
    mig_index: int | None
    uuid: str | None
    name: str | None
    samples: int
    duration_s: float
    memory_total_bytes: int | None
    peak_memory_bytes: int | None       # what the job needed (see memory_basis)
    p95_memory_bytes: int | None
    memory_basis: str                   # "process" or "used"
    peak_used_bytes: int | None         # the GPU's memory used, whatever held it
    mean_busy_pct: float | None
    busy_basis: str | None              # "utilization", "sm_activity" or None (not reported)
    mean_sm_activity_pct: float | None
    idle_share: float | None
    idle_stretches: tuple[IdleStretch, ...]
    mean_power_w: float | None
    peak_power_w: float | None
    energy_kwh: float | None
    lost: bool

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["idle_stretches"] = [s.__dict__ for s in self.idle_stretches]
        return d


@dataclass(frozen=True)
class UsageSummary:
    source: str
    path: str
    start_t_s: float
    duration_s: float
    devices: tuple[DeviceUsage, ...]
    job_labels: tuple[str, ...]          # the devices the job used (right-sizing is about these)
    needed_peak_bytes: int | None
    needed_p95_bytes: int | None
    busy_share: float | None             # 0..1, mean over the job's devices
    torch_peaks: tuple[TorchPeak, ...]
    notes: tuple[str, ...]
    power: "PowerSummary | None" = None  # the job's devices' power, one basis (None: no power in the log)

    @property
    def job_devices(self) -> tuple[DeviceUsage, ...]:
        return tuple(d for d in self.devices if d.label in self.job_labels)

    @property
    def gpu_name(self) -> str | None:
        names = [d.name for d in self.job_devices if d.name]
        return names[0] if names else None

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("devices", "torch_peaks")}
        d["devices"] = [dev.to_dict() for dev in self.devices]
        d["torch_peaks"] = [p.__dict__ for p in self.torch_peaks]
        d["power"] = self.power.to_dict() if self.power is not None else None
        d["job_labels"] = list(self.job_labels)
        d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True)
class PowerSummary:
    """The power of the job's GPUs on one basis: per GPU (mean of the GPUs' means, highest GPU's peak), and
    the GPUs together (sum of their means, their energy)."""

    gpu_count: int                 # GPUs with power figures
    mean_per_gpu_w: float
    peak_per_gpu_w: float          # the highest sample of any one GPU
    mean_total_w: float            # all gpu_count GPUs together
    energy_kwh: float              # all gpu_count GPUs together

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def power_summary(devices: list[DeviceUsage]) -> PowerSummary | None:
    with_power = [d for d in devices if d.mean_power_w is not None]
    if not with_power:
        return None
    total_w = sum(d.mean_power_w for d in with_power)
    return PowerSummary(gpu_count=len(with_power), mean_per_gpu_w=total_w / len(with_power),
                        peak_per_gpu_w=max(d.peak_power_w or 0.0 for d in with_power), mean_total_w=total_w,
                        energy_kwh=sum(d.energy_kwh or 0.0 for d in with_power))


def _values(samples: list[GpuSample], attr: str) -> np.ndarray:
    return np.array([getattr(s, attr) for s in samples if getattr(s, attr) is not None], dtype=float)


def idle_stretches(times_s: list[float], busy_pct: list[float | None], start_t_s: float) -> tuple[IdleStretch, ...]:
    """Runs of samples at or under IDLE_BELOW_PCT lasting at least MIN_IDLE_STRETCH_S (None ends a run)."""
    out = []
    flags = [b is not None and b <= IDLE_BELOW_PCT for b in busy_pct]
    for idle, run in groupby(range(len(flags)), key=lambda k: flags[k]):
        run = list(run)
        if idle:
            first, last = run[0], run[-1]
            # A stretch lasts until the next sample shows activity.
            end = times_s[last + 1] if last + 1 < len(times_s) else times_s[last]
            if end - times_s[first] >= MIN_IDLE_STRETCH_S:
                out.append(IdleStretch(times_s[first] - start_t_s, end - times_s[first]))
    return tuple(out)


def device_usage(samples: list[GpuSample], start_t_s: float) -> DeviceUsage:
    first = samples[0]
    live = [s for s in samples if not s.lost]
    times = [s.t_s for s in live]
    process = _values(live, "process_memory_bytes")
    used = _values(live, "memory_used_bytes")
    basis, memory = ("process", process) if process.size and process.max() > 0 else ("used", used)
    util = _values(live, "utilization_pct")
    sm_act = _values(live, "sm_activity_pct")
    busy_basis, busy = ("utilization", util) if util.size else (("sm_activity", sm_act) if sm_act.size else (None, util))
    busy_series = [s.utilization_pct if busy_basis == "utilization" else s.sm_activity_pct for s in live]
    stretches = idle_stretches(times, busy_series, start_t_s) if busy_basis else ()
    duration_s = (times[-1] - times[0]) if len(times) > 1 else 0.0
    power = _values(live, "power_w")
    energy_kwh = None
    if power.size and len(times) > 1 and power.size == len(times):
        t = np.array(times)
        energy_kwh = float(np.sum((power[1:] + power[:-1]) * np.diff(t)) / 2) / 3.6e6
    totals = _values(live, "memory_total_bytes")
    return DeviceUsage(
        label=first.label, gpu_index=first.gpu_index, mig_index=first.mig_index, uuid=first.uuid,
        name=next((s.name for s in samples if s.name), None), samples=len(live), duration_s=duration_s,
        memory_total_bytes=int(totals.max()) if totals.size else None,
        peak_memory_bytes=int(memory.max()) if memory.size else None,
        p95_memory_bytes=int(np.percentile(memory, 95)) if memory.size else None,
        memory_basis=basis, peak_used_bytes=int(used.max()) if used.size else None,
        mean_busy_pct=float(busy.mean()) if busy.size else None, busy_basis=busy_basis,
        mean_sm_activity_pct=float(sm_act.mean()) if sm_act.size else None,
        idle_share=(sum(s.duration_s for s in stretches) / duration_s) if duration_s > 0 and busy_basis else None,
        idle_stretches=stretches,
        mean_power_w=float(power.mean()) if power.size else None,
        peak_power_w=float(power.max()) if power.size else None,
        energy_kwh=energy_kwh, lost=any(s.lost for s in samples),
    )


def _job_devices(devices: list[DeviceUsage]) -> tuple[str, ...]:
    """The devices the job touched: own process memory > 0, else any kernel activity, else all of them."""
    with_process = [d.label for d in devices if d.memory_basis == "process"]
    if with_process:
        return tuple(with_process)
    active = [d.label for d in devices if d.mean_busy_pct and d.mean_busy_pct > 1.0]
    return tuple(active) if active else tuple(d.label for d in devices)


def summarize(log: UsageLog) -> UsageSummary:
    samples = sorted(log.samples, key=lambda s: (s.key[0], -1 if s.key[1] is None else s.key[1], s.t_s))
    by_label: dict[str, list[GpuSample]] = {}
    for s in samples:
        by_label.setdefault(s.label, []).append(s)
    # Under MIG the instances are the devices; the parent row only repeats their sum.
    mig_parents = {s.gpu_index for s in samples if s.mig_index is not None}
    by_label = {k: v for k, v in by_label.items() if not (v[0].mig_index is None and v[0].gpu_index in mig_parents)}
    start = min((s.t_s for s in samples), default=0.0)
    end = max((s.t_s for s in samples), default=0.0)
    devices = [device_usage(v, start) for v in by_label.values() if v]
    job = _job_devices(devices)
    job_devs = [d for d in devices if d.label in job]
    peaks = [d.peak_memory_bytes for d in job_devs if d.peak_memory_bytes is not None]
    p95s = [d.p95_memory_bytes for d in job_devs if d.p95_memory_bytes is not None]
    busy = [d.mean_busy_pct for d in job_devs if d.mean_busy_pct is not None]
    notes = list(log.notes)
    if any(d.lost for d in devices):
        notes.append("a GPU fell off the bus during the run (lost): its samples end there")
    if any(d.busy_basis is None for d in job_devs):
        notes.append("the log has no utilisation for some GPU (MIG without GPM?): its busy share is unknown")
    return UsageSummary(
        source=log.source, path=log.path, start_t_s=start, duration_s=end - start, devices=tuple(devices),
        job_labels=job, needed_peak_bytes=max(peaks) if peaks else None, needed_p95_bytes=max(p95s) if p95s else None,
        busy_share=(sum(busy) / len(busy) / 100.0) if busy else None, torch_peaks=log.torch_peaks, notes=tuple(notes),
        power=power_summary(job_devs),
    )
