"""What a job really used, from its samples: memory needed, busy share, idle stretches, power.

"Memory needed" is the memory of the job's own processes where the log has it (NVML per-process
memory: everything the process holds, CUDA context included, since the job needs its context on any GPU),
else the GPU's memory used (on a rented GPU that is the job plus the driver's few hundred MB). The peak
decides what fits (one moment over the limit is an out-of-memory error); p95 says how spiky it was.

"Run time" is the time the samples cover: a step between two samples of a GPU longer than both
GAP_OVER_MEDIAN times its median step (the log's sampling interval) and GAP_MIN_S is a gap (two logs appended,
or the logger stopped while the job ran: the log cannot tell which), counted as not run: it counts in no
duration, energy or saving, and a note says how long it was. Shorter pauses barely move a rental's cost and
are common logger behaviour (a logger polling faster while busy, logs appended at another interval).
A gpuwise run log (one run, its meta's ``start_t_s``) is the exception: its run time is the meta's start to end
(or to its last sample when it records no end), a logger stall included (still rented time); a gap only
breaks its timeline's line.
Energy is the power integrated over the run time (trapezoids between readings, the first and last reading
held to the edges of each stretch of samples); a stretch without power readings longer than a gap leaves it
unknown, never 0.

Power is NVML's, per physical GPU: a MIG instance has none of its own (the monitor records its GPU's), so the
instances of one GPU count it once, and the report says it is the whole GPU's, shared by its instances.

"Busy share" is NVML's utilisation: the share of time in which at least one kernel ran, not how much of
the GPU the kernels filled (GPM SM activity tells that, on Hopper and newer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuwise.monitor.sample import MIG_LABEL
from gpuwise.report.sample_table import DeviceColumns, sample_table
from gpuwise.report.sources import RUN_LOG_SOURCE, TorchPeak, UsageLog
from gpuwise.report.visible import job_visible_labels
from gpuwise.runlog import END_T_S_KEY, START_T_S_KEY, VISIBLE_DEVICES_ENV, read_visible_devices
from gpuwise.units import format_bytes, format_duration

IDLE_BELOW_PCT = 5.0         # utilisation at or under this is idle
MIN_IDLE_STRETCH_S = 60.0    # shorter pauses are part of the job's rhythm (data loading, logging)
ACTIVE_ABOVE_PCT = 1.0       # a GPU busier than this on average ran the job; at or under, nothing ran on it
GAP_OVER_MEDIAN = 10.0       # a step between samples over this many median steps (and GAP_MIN_S) is a gap
GAP_MIN_S = 300.0            # a step between samples of 5 min or less is never a gap (see gap_limit_s)
MIN_SAMPLES_TO_JUDGE = 10    # fewer samples on every job GPU: too short to judge (the peak may fall between them)
CUDA_CONTEXT_MAX_BYTES = 2**30   # memory used over this is more than a CUDA context: something ran and held it


@dataclass(frozen=True)
class IdleStretch:
    start_s: float       # seconds after the log's start
    duration_s: float


@dataclass(frozen=True)
class Gap:
    """Time no GPU's samples cover, between two samples of a GPU further apart than ``gap_limit_s``: not run time."""

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
class GpuKind:
    """The job's GPUs of one kind (one NVML name: a model, or a MIG profile of one) and what they used."""

    name: str | None
    labels: tuple[str, ...]
    memory_total_bytes: int | None       # the largest of the kind's GPUs
    needed_peak_bytes: int | None        # the most any one of them needed
    needed_p95_bytes: int | None
    busy_share: float | None             # 0..1, mean over those of them that report it

    @property
    def count(self) -> int:
        return len(self.labels)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["labels"] = list(self.labels)
        d["count"] = self.count
        return d


def gpu_kinds(devices: tuple["DeviceUsage", ...] | list["DeviceUsage"]) -> tuple[GpuKind, ...]:
    """``devices`` grouped by their name (the order of first appearance); a device without a name joins no
    kind of its own when others have one (dmon logs name none: one kind, None)."""
    groups: dict[str | None, list[DeviceUsage]] = {}
    for d in devices:
        groups.setdefault(d.name, []).append(d)
    if None in groups and len(groups) > 1:
        unnamed = groups.pop(None)
        next(iter(groups.values())).extend(unnamed)
    out = []
    for name, group in groups.items():
        peaks = [d.peak_memory_bytes for d in group if d.peak_memory_bytes is not None]
        p95s = [d.p95_memory_bytes for d in group if d.p95_memory_bytes is not None]
        totals = [d.memory_total_bytes for d in group if d.memory_total_bytes]
        busy = [d.mean_busy_pct for d in group if d.mean_busy_pct is not None]
        out.append(GpuKind(name=name, labels=tuple(d.label for d in group),
                           memory_total_bytes=max(totals) if totals else None,
                           needed_peak_bytes=max(peaks) if peaks else None,
                           needed_p95_bytes=max(p95s) if p95s else None,
                           busy_share=sum(busy) / len(busy) / 100.0 if busy else None))
    return tuple(out)


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
    busy_share: float | None             # 0..1, mean over the job's devices; None when they differ in kind
    torch_peaks: tuple[TorchPeak, ...]
    notes: tuple[str, ...]
    power: "PowerSummary | None" = None  # the job's devices' power, one basis (None: no power in the log)
    gaps: tuple[Gap, ...] = ()           # left out of duration_s (run time), energy and savings
    idle_labels: tuple[str, ...] = ()    # GPUs of the log on which nothing ran while the job ran on others
    unseen_labels: tuple[str, ...] = ()  # devices outside the job's CUDA_VISIBLE_DEVICES: neither its nor idle

    @property
    def job_devices(self) -> tuple[DeviceUsage, ...]:
        return tuple(d for d in self.devices if d.label in self.job_labels)

    @property
    def most_samples(self) -> int:
        """The most samples any job GPU has: how much of the job the log saw (a GPU lost early or joining late
        does not make the log short)."""
        return max((d.samples for d in self.job_devices), default=0)

    @property
    def too_short(self) -> bool:
        """Fewer than MIN_SAMPLES_TO_JUDGE samples on every job GPU: the figures may miss what the job did."""
        return self.most_samples < MIN_SAMPLES_TO_JUDGE

    @property
    def nothing_ran(self) -> bool:
        """Nothing ran on any GPU of the job (``ran`` false for each, its busy share known: the job's GPUs are then
        every GPU of the log it could see): there is no job to right-size."""
        job = self.job_devices
        return bool(job) and all(not ran(d) and d.mean_busy_pct is not None for d in job)

    @property
    def job_gpus(self) -> tuple[str, ...]:
        """The physical GPUs the job used (``physical_gpus``): MIG instances of one GPU are that one GPU."""
        return physical_gpus(self.job_devices)

    @property
    def gpus_rented(self) -> int:
        """The GPUs of the log that were paid for: the physical GPUs the job used and the idle ones beside them."""
        return len(self.job_gpus) + len(self.idle_labels)

    @property
    def mig_words(self) -> str | None:
        """The job's MIG instances under their GPUs: "GPU 7 as 2 MIG instances"; None when it used none."""
        instances = [d for d in self.job_devices if d.mig_index is not None]
        if not instances:
            return None
        parents = physical_gpus(instances)
        return f"{gpu_labels(parents)} as {len(instances)} MIG instance{'s' if len(instances) > 1 else ''}"

    @property
    def gpu_count_words(self) -> str:
        """The job's physical GPU count, with the rented and idle ones when some were idle: "4 (of 8; 4 idle)"."""
        idle = len(self.idle_labels)
        return f"{len(self.job_gpus)}" + (f" (of {self.gpus_rented}; {idle} idle)" if idle else "")

    def gpus_words(self, name: str | None = None) -> str:
        """The job's GPUs as a report's header says them: "8 GPUs of 2 kinds (GPU 7 as 2 MIG instances)" when they
        differ in kind (``name`` unused: each kind is said apart); else "4 (of 8; 4 idle) × ``name``", where a
        MIG profile's ``name`` counts its instances: "2 × … MIG 3g.40gb (GPU 0 as 2 MIG instances)"."""
        mig = f" ({self.mig_words})" if self.mig_words else ""
        if self.mixed_gpus:
            return f"{self.gpu_count_words} GPUs of {len(self.gpu_kinds)} kinds{mig}"
        count = str(len(self.job_labels)) if mig else self.gpu_count_words
        return f"{count} × {name or 'unknown GPU'}{mig}"

    @property
    def busy_share_any_kind(self) -> float | None:
        """0..1, the mean over the job's devices that report it, whatever their kinds (``busy_share`` is None
        for GPUs of different kinds; comparing them as one kind, --gpu, takes this)."""
        busy = [d.mean_busy_pct for d in self.job_devices if d.mean_busy_pct is not None]
        return sum(busy) / len(busy) / 100.0 if busy else None

    @property
    def gpu_kinds(self) -> tuple[GpuKind, ...]:
        """The job's GPUs by kind (``gpu_kinds``): one kind on a plain run; several when the job ran on GPUs
        of different models or MIG profiles, which no one rented GPU (nor N of one) stands for."""
        return gpu_kinds(self.job_devices)

    @property
    def mixed_gpus(self) -> bool:
        """The job's GPUs differ in model or MIG profile."""
        return len(self.gpu_kinds) > 1

    @property
    def gpu_name(self) -> str | None:
        """The name of the job's GPUs; None when the log names none or they differ (``gpu_kinds`` has each)."""
        kinds = self.gpu_kinds
        return kinds[0].name if len(kinds) == 1 else None

    @property
    def gpu_kinds_words(self) -> str:
        """"1 × NVIDIA GeForce RTX 4090 (GPU 0), 1 × NVIDIA A100-SXM4-80GB (GPU 1)"."""
        return ", ".join(f"{k.count} × {k.name or 'unknown GPU'} ({gpu_labels(k.labels)})" for k in self.gpu_kinds)

    @property
    def idle_stretches(self) -> tuple[IdleStretch, ...]:
        """The idle stretches of every job GPU: each GPU's own, so stretches of GPUs idle at once overlap."""
        return tuple(s for d in self.job_devices for s in d.idle_stretches)

    @property
    def idle_gpu_s(self) -> float:
        """GPU-seconds idle: the idle stretches' durations summed over the job's GPUs (8 GPUs idle 1 h each: 8 h)."""
        return sum(s.duration_s for s in self.idle_stretches)

    @property
    def idle_judged_count(self) -> int:
        """The job's GPUs whose busy share is known: those that can have idle stretches."""
        return sum(d.busy_basis is not None for d in self.job_devices)

    @property
    def idle_s_per_gpu(self) -> float | None:
        """``idle_gpu_s`` over ``idle_judged_count``: the time one GPU of the job idled, on average; None where none
        of them reports its busy share."""
        return self.idle_gpu_s / self.idle_judged_count if self.idle_judged_count else None

    @property
    def power_words(self) -> str | None:
        """The job's power in words (``PowerSummary.words``), as the text and the HTML say it; None without power."""
        return None if self.power is None else self.power.words(mixed=self.mixed_gpus)

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("devices", "torch_peaks")}
        d["devices"] = [dev.to_dict() for dev in self.devices]
        d["torch_peaks"] = [p.__dict__ for p in self.torch_peaks]
        d["power"] = self.power.to_dict() if self.power is not None else None
        d["job_labels"] = list(self.job_labels)
        d["job_gpus"] = list(self.job_gpus)
        d["idle_labels"] = list(self.idle_labels)
        d["unseen_labels"] = list(self.unseen_labels)
        d["gaps"] = [g.__dict__ for g in self.gaps]
        d["idle_stretch_count"] = len(self.idle_stretches)
        d["idle_gpu_s"] = self.idle_gpu_s
        d["idle_s_per_gpu"] = self.idle_s_per_gpu
        d["notes"] = list(self.notes)
        d["gpu_kinds"] = [k.to_dict() for k in self.gpu_kinds]
        d["mixed_gpus"] = self.mixed_gpus
        return d


MIG_POWER_BASIS = "NVML measures power per physical GPU, not per MIG instance"


@dataclass(frozen=True)
class PowerSummary:
    """The power of the job's GPUs on one basis: per physical GPU (mean of the GPUs' means, highest GPU's peak),
    and the GPUs together (sum of their means, their energy). A GPU whose MIG instances the job used counts once,
    as a whole (``mig_gpu_labels``): its power is shared by all its instances, the job's and any other's."""

    gpu_count: int                 # physical GPUs with power figures
    mean_per_gpu_w: float
    peak_per_gpu_w: float          # the highest sample of any one GPU
    mean_total_w: float            # all gpu_count GPUs together
    energy_kwh: float | None       # all gpu_count GPUs together; None: some GPU's power readings cannot say
    mig_gpu_labels: tuple[str, ...] = ()   # the physical GPUs among them that stand for the job's MIG instances

    def words(self, *, mixed: bool = False) -> str:
        """Per GPU, and for several GPUs their sum and energy said as such; GPUs of different kinds (``mixed``)
        only together (a mean over different GPUs is no GPU's); a whole GPU standing for MIG instances named."""
        energy = "energy unknown" if self.energy_kwh is None else f"{self.energy_kwh:.2f} kWh"
        if mixed and self.gpu_count > 1:
            said = (f"{self.gpu_count} GPUs together: mean {self.mean_total_w:.0f} W, peak of one "
                    f"{self.peak_per_gpu_w:.0f} W, {energy}")
        elif self.gpu_count == 1:
            said = f"mean {self.mean_per_gpu_w:.0f} W, peak {self.peak_per_gpu_w:.0f} W, {energy}"
        else:
            said = (f"per GPU: mean {self.mean_per_gpu_w:.0f} W, peak {self.peak_per_gpu_w:.0f} W; "
                    f"{self.gpu_count} GPUs together: mean {self.mean_total_w:.0f} W, {energy}")
        if not self.mig_gpu_labels:
            return said
        whose = "its" if len(self.mig_gpu_labels) == 1 else "their"
        return (f"{said} (the whole of {gpu_labels(self.mig_gpu_labels)}, shared by {whose} MIG instances: "
                f"{MIG_POWER_BASIS})")

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["mig_gpu_labels"] = list(self.mig_gpu_labels)
        return d


def physical_gpu(d: DeviceUsage) -> str:
    """The label of the physical GPU ``d`` is: its own, or its parent GPU's for a MIG instance ("7" for "7/mig0")."""
    return str(d.gpu_index) if d.mig_index is not None else d.label


def physical_gpus(devices: Sequence[DeviceUsage]) -> tuple[str, ...]:
    """The physical GPUs of ``devices`` (``physical_gpu``), each once, in order of first appearance: what a GPU
    count counts and a price per GPU is paid for (a MIG instance is a slice of its GPU, not a GPU)."""
    return tuple(dict.fromkeys(physical_gpu(d) for d in devices))


def power_summary(devices: list[DeviceUsage]) -> PowerSummary | None:
    """The MIG instances of one GPU report that GPU's power (MIG_POWER_BASIS): counted once, as the GPU."""
    measured = [d for d in devices if d.mean_power_w is not None]
    first_of_gpu = {physical_gpu(d): d for d in reversed(measured)}
    with_power = [first_of_gpu[g] for g in physical_gpus(measured)]
    if not with_power:
        return None
    mig_parents = physical_gpus([d for d in with_power if d.mig_index is not None])
    total_w = sum(d.mean_power_w for d in with_power)
    return PowerSummary(gpu_count=len(with_power), mean_per_gpu_w=total_w / len(with_power),
                        peak_per_gpu_w=max(d.peak_power_w or 0.0 for d in with_power), mean_total_w=total_w,
                        energy_kwh=None if any(d.energy_kwh is None for d in with_power)
                        else sum(d.energy_kwh for d in with_power),
                        mig_gpu_labels=mig_parents)


def missed_steps_s(times_s: Sequence[float] | np.ndarray) -> float | None:
    """GAP_OVER_MEDIAN × the median step of ``times_s`` (sorted): longer without a sample, the logger missed
    samples; None with fewer than two distinct times."""
    steps = np.diff(np.asarray(times_s, dtype=float))
    steps = steps[steps > 0]
    return float(np.median(steps)) * GAP_OVER_MEDIAN if steps.size else None


def gap_limit_s(times_s: Sequence[float] | np.ndarray) -> float | None:
    """The longest step between samples that is still run time: ``missed_steps_s``, at least GAP_MIN_S;
    None with fewer than two distinct times."""
    missed = missed_steps_s(times_s)
    return None if missed is None else max(missed, GAP_MIN_S)


def spans(times_s: Sequence[float] | np.ndarray) -> list[tuple[int, int]]:
    """The stretches of ``times_s`` (sorted) with no gap inside, as index ranges [first, end)."""
    times = np.asarray(times_s, dtype=float)
    limit = gap_limit_s(times)
    if limit is None:
        return [(0, times.size)] if times.size else []
    cuts = (np.flatnonzero(np.diff(times) > limit) + 1).tolist()
    edges = [0, *cuts, times.size]
    return list(zip(edges[:-1], edges[1:]))


def _energy_kwh(times_s: np.ndarray, power_w: np.ndarray, stretches: list[tuple[int, int]]) -> float | None:
    """Energy over the run time: trapezoids between power readings (``power_w`` NaN: none), the first and last
    reading of each stretch held to its edges; None where a stretch of run time longer than a gap has no reading."""
    limit = gap_limit_s(times_s)
    if limit is None:
        return None
    joules = 0.0
    for first, end in stretches:
        t, p = times_s[first:end], power_w[first:end]
        known = ~np.isnan(p)
        known_t, known_w = t[known], p[known]
        if not known_t.size:
            if t[-1] > t[0]:
                return None
            continue
        edges = [float(known_t[0] - t[0]), float(t[-1] - known_t[-1])]
        steps = np.diff(known_t)
        if max(edges + steps.tolist()) > limit:
            return None
        joules += float(known_w[0]) * edges[0] + float(known_w[-1]) * edges[1]
        # summed in time order, one trapezoid after another (a pairwise sum differs in the last digits)
        joules += sum(((known_w[:-1] + known_w[1:]) * steps / 2).tolist())
    return joules / 3.6e6


def idle_stretches(times_s: np.ndarray, busy_pct: np.ndarray, start_t_s: float) -> tuple[IdleStretch, ...]:
    """Runs of samples at or under IDLE_BELOW_PCT (``busy_pct`` NaN: not reported, ends a run) lasting at least
    MIN_IDLE_STRETCH_S; a stretch lasts until the next sample shows activity (the last sample: to itself)."""
    idle = np.r_[False, busy_pct <= IDLE_BELOW_PCT, False].astype(np.int8)
    changes = np.flatnonzero(np.diff(idle))
    firsts, lasts = changes[0::2], changes[1::2] - 1
    ends_t = times_s[np.minimum(lasts + 1, times_s.size - 1)]
    durations = ends_t - times_s[firsts]
    kept = durations >= MIN_IDLE_STRETCH_S
    return tuple(IdleStretch(float(t0 - start_t_s), float(d))
                 for t0, d in zip(times_s[firsts][kept].tolist(), durations[kept].tolist()))


def device_usage(device: DeviceColumns, start_t_s: float, *, one_run: bool = False) -> DeviceUsage:
    """What ``device`` (``SampleTable.devices``) used. ``one_run``: the samples are of one run (a gpuwise run log):
    a gap is run time too (duration, energy)."""
    times = device.t_s
    process, used = device.reported("process_memory_bytes"), device.reported("memory_used_bytes")
    basis, memory = ("process", process) if process.size and process.max() > 0 else ("used", used)
    util, sm_act = device.reported("utilization_pct"), device.reported("sm_activity_pct")
    busy_basis, busy = ("utilization", util) if util.size else (("sm_activity", sm_act) if sm_act.size else (None, util))
    runs = spans(times)
    stretches = ()
    if busy_basis:
        busy_series = device.values["utilization_pct" if busy_basis == "utilization" else "sm_activity_pct"]
        stretches = tuple(x for a, b in runs for x in idle_stretches(times[a:b], busy_series[a:b], start_t_s))
    counted = [(0, times.size)] if one_run and times.size else runs
    duration_s = sum(float(times[b - 1] - times[a]) for a, b in counted)
    power = device.reported("power_w")
    energy_kwh = _energy_kwh(times, device.values["power_w"], counted) if power.size else None
    totals = device.reported("memory_total_bytes")
    return DeviceUsage(
        label=device.label, gpu_index=device.gpu_index, mig_index=device.mig_index, uuid=device.uuid,
        name=device.name, samples=int(times.size), duration_s=duration_s,
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
        energy_kwh=energy_kwh, lost=device.lost,
    )


def ran(d: DeviceUsage) -> bool:
    """Something ran on ``d``: a process of the job held memory, it was busier than ACTIVE_ABOVE_PCT on
    average, or its memory used went over CUDA_CONTEXT_MAX_BYTES (more than a CUDA context: e.g. a server's
    weights loaded, waiting; its low busy share is then the finding)."""
    return (d.memory_basis == "process" or (d.mean_busy_pct or 0.0) > ACTIVE_ABOVE_PCT
            or (d.peak_used_bytes or 0) > CUDA_CONTEXT_MAX_BYTES)


def _job_devices(devices: list[DeviceUsage],
                 visible: frozenset[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the devices the job touched, the idle GPUs left out), among the devices the job could see (``visible``, the
    labels ``job_visible_labels`` gives; None: the log does not say, every one): own process memory > 0, else those
    something ran on (``ran``), else all it could see. The whole GPUs it could see on which nothing ran, their busy
    share known, are the idle ones (paid for beside the job's); a GPU another job ran on (its memory or busy share,
    no process of this job) is neither, and an idle MIG instance is another slice, not one the job rented. A run log
    that lists the job's processes but not what it could see (written before ``cuda_visible_devices``) has none
    idle: NVML lists every GPU of the node, and on a shared one the others are another user's."""
    with_process = [d.label for d in devices if d.memory_basis == "process"]
    seen = [d for d in devices if visible is None or d.label in visible]
    active = with_process or [d.label for d in seen if ran(d)]
    if not active:
        return tuple(d.label for d in seen), ()
    if with_process and visible is None:
        return tuple(active), ()
    idle = [d.label for d in seen if d.mig_index is None and not ran(d) and d.mean_busy_pct is not None]
    return tuple(active), tuple(idle)


def _unseen_note(unseen: list[DeviceUsage], log: UsageLog) -> str:
    """Says the log's GPUs outside the job's CUDA_VISIBLE_DEVICES once: neither its own nor idle, and not priced."""
    n = len(physical_gpus(unseen))
    _, value = read_visible_devices(log.meta)
    labels = gpu_labels([d.label for d in unseen])
    return (f"the log holds {n} GPU{'s' if n > 1 else ''} the job could not see ({labels}: outside "
            f"{VISIBLE_DEVICES_ENV}={value}): another job's or no one's, neither the job's nor idle, and not priced")


def gpu_labels(labels: list[str] | tuple[str, ...]) -> str:
    """Devices by their labels, in words: "GPU 3", "GPUs 4-7", "GPUs 0, 2, 5" (consecutive whole-GPU indices as a
    range); MIG instances under their GPU, "GPU 7's MIG instances 0, 1"; both, "GPUs 0-6 and GPU 7's MIG
    instance 0"."""
    whole = [x for x in labels if not MIG_LABEL.fullmatch(x)]
    instances: dict[str, list[str]] = {}
    for match in filter(None, map(MIG_LABEL.fullmatch, labels)):
        instances.setdefault(match["gpu"], []).append(match["instance"])
    parts = [_whole_gpu_labels(whole)] if whole else []
    parts += [f"GPU {gpu}'s MIG instance{'s' if len(own) > 1 else ''} {', '.join(own)}" for gpu, own in instances.items()]
    return " and ".join(parts)


def _whole_gpu_labels(labels: list[str]) -> str:
    """"GPU 3", "GPUs 4-7", "GPUs 0, 2, 5": consecutive whole-GPU indices as a range."""
    if len(labels) == 1:
        return f"GPU {labels[0]}"
    if all(x.isdigit() for x in labels):
        n = sorted(int(x) for x in labels)
        if n == list(range(n[0], n[-1] + 1)):
            return f"GPUs {n[0]}-{n[-1]}"
    return "GPUs " + ", ".join(labels)


def _covered(times: dict[str, np.ndarray], start_s: float) -> tuple[float, tuple[Gap, ...]]:
    """(run time, gaps) of the GPUs' sample times: the time some GPU's stretches without a gap (``spans``)
    cover; a gap is time none covers."""
    stretches = sorted((float(t[a]), float(t[b - 1])) for t in times.values() for a, b in spans(t))
    run_s, gaps, end = 0.0, [], None
    for a, b in stretches:
        if end is not None and a > end:
            gaps.append(Gap(end - start_s, a - end))
        run_s += max(0.0, b - max(a, end if end is not None else a))
        end = b if end is None else max(end, b)
    return run_s, tuple(gaps)


def _gap_note(gaps: tuple[Gap, ...], log_s: float) -> str:
    """``log_s``: the log's first to last sample, gaps included."""
    longest = max(gaps, key=lambda g: g.duration_s)
    where = f"from {format_duration(longest.start_s)} in"
    said = (f"the log has no samples for {format_duration(longest.duration_s)} ({where})" if len(gaps) == 1 else
            f"the log has {len(gaps)} gaps with no samples, {format_duration(sum(g.duration_s for g in gaps))} in "
            f"all (the longest {format_duration(longest.duration_s)}, {where})")
    return (f"{said}: two logs appended may be the reason, or the logger stopped while the job ran (the log cannot "
            f"tell which); counted as not run: the duration, energy and saving on this run leave "
            f"{'it' if len(gaps) == 1 else 'them'} out. If the GPU was rented through "
            f"{'it' if len(gaps) == 1 else 'them'}, the saving is per hour of log ({format_duration(log_s)})")


def _stopped_note(times: dict[str, np.ndarray], devices: list[DeviceUsage], start_s: float) -> str | None:
    """Says which GPUs' samples stop before the log ends by more than ``missed_steps_s``, though not lost."""
    last = max((float(t[-1]) for t in times.values() if t.size), default=0.0)
    stopped = [(d.label, float(times[d.label][-1])) for d in devices if not d.lost
               and (limit := missed_steps_s(times[d.label])) is not None and last - times[d.label][-1] > limit]
    if not stopped:
        return None
    first = min(t for _, t in stopped)
    return (f"the samples of {gpu_labels([label for label, _ in stopped])} stop before the log ends (from "
            f"{format_duration(first - start_s)} in, of {format_duration(last - start_s)}): "
            f"{'it is' if len(stopped) == 1 else 'they are'} counted, and priced, as rented for the whole run")


def _lost_note(devices: list[DeviceUsage], job: tuple[str, ...]) -> str | None:
    """Names the GPUs that fell off the bus, and says so when none was the job's (a lost GPU beside a job's
    one GPU reads as the job's otherwise)."""
    lost = [d.label for d in devices if d.lost]
    if not lost:
        return None
    whose = "" if any(label in job for label in lost) else f", {'not one' if len(lost) == 1 else 'none'} of the job's,"
    return (f"{gpu_labels(lost)}{whose} fell off the bus during the run (lost): "
            f"{'its' if len(lost) == 1 else 'their'} samples end there")


def summarize(log: UsageLog) -> UsageSummary:
    table = sample_table(log.samples)
    columns = list(table.devices())
    by_label = {d.label: d for d in columns}
    # Under MIG the instances are the devices; the parent row only repeats their sum.
    mig_parents = {d.gpu_index for d in by_label.values() if d.mig_index is not None}
    by_label = {k: d for k, d in by_label.items() if not (d.mig_index is None and d.gpu_index in mig_parents)}
    start = float(table.t_s.min()) if len(table) else 0.0
    one_run = _run_log_start_s(log)
    devices = [device_usage(d, start, one_run=one_run is not None) for d in by_label.values()]
    live_times = {label: d.t_s for label, d in by_label.items()}
    run_s, gaps = _covered(live_times, start)
    last = max((float(t[-1]) for t in live_times.values() if t.size), default=start)
    if one_run is not None:      # one run: its meta's start to end is rented time, a logger stall included
        run_s, gaps = max(0.0, _float(log.meta.get(END_T_S_KEY), last) - one_run), ()
    visible = job_visible_labels(log, columns)
    job, idle = _job_devices(devices, visible)
    unseen = [d for d in devices if visible is not None and d.label not in visible and d.label not in job]
    job_devs = [d for d in devices if d.label in job]
    peaks = [d.peak_memory_bytes for d in job_devs if d.peak_memory_bytes is not None]
    p95s = [d.p95_memory_bytes for d in job_devs if d.p95_memory_bytes is not None]
    power = power_summary(job_devs)
    summary = UsageSummary(
        source=log.source, path=log.path, start_t_s=start, duration_s=run_s, devices=tuple(devices),
        job_labels=job, needed_peak_bytes=max(peaks) if peaks else None, needed_p95_bytes=max(p95s) if p95s else None,
        busy_share=None, torch_peaks=log.torch_peaks, notes=(),
        power=power, gaps=gaps, idle_labels=idle, unseen_labels=tuple(d.label for d in unseen),
    )
    if not summary.mixed_gpus:
        summary = replace(summary, busy_share=summary.busy_share_any_kind)
    notes = list(log.notes)
    if gaps:
        notes.append(_gap_note(gaps, last - start))
    if summary.nothing_ran:
        peak = f", peak {format_bytes(summary.needed_peak_bytes)} used" if summary.needed_peak_bytes is not None else ""
        notes.append(f"nothing ran on the GPU{'s' if len(devices) > 1 else ''} of this log (busy ≤ "
                     f"{ACTIVE_ABOVE_PCT:g}% on average, memory used no more than a CUDA context, ≤ "
                     f"{format_bytes(CUDA_CONTEXT_MAX_BYTES)}{peak}): no job to right-size (was the job running "
                     f"while the log was written?)")
    elif summary.too_short:
        notes.append(f"too short to judge: {summary.most_samples} sample(s) of the job's GPU (fewer than "
                     f"{MIN_SAMPLES_TO_JUDGE}), {format_duration(run_s)}: the peak and busy share may miss what the "
                     f"job did, and the verdict rests on them")
    if idle:
        rented = summary.gpus_rented
        notes.append(f"{len(idle)} of the {rented} GPUs in the log {'was' if len(idle) == 1 else 'were'} idle the "
                     f"whole run ({gpu_labels(idle)}: busy ≤ {ACTIVE_ABOVE_PCT:g}% on average, no more memory "
                     f"used than a CUDA context): you paid for {rented}; compared: the {len(job)} the job used")
    if unseen:
        notes.append(_unseen_note(unseen, log))
    if lost := _lost_note(devices, job):
        notes.append(lost)
    if stopped := _stopped_note(live_times, devices, start):
        notes.append(stopped)
    if unknown_busy := [d for d in job_devs if d.busy_basis is None]:
        why = (" (NVML gives no utilisation per MIG instance; GPM, Hopper and newer, gives their SM activity)"
               if all(d.mig_index is not None for d in unknown_busy) else "")
        notes.append(f"the log has no utilisation for {gpu_labels([d.label for d in unknown_busy])}{why}: "
                     f"{'its' if len(unknown_busy) == 1 else 'their'} busy share is unknown"
                     + (", the busy share is that of the others" if summary.busy_share is not None else ""))
    if power is not None and power.energy_kwh is None and not summary.too_short:
        unknown = [d.label for d in job_devs if d.mean_power_w is not None and d.energy_kwh is None]
        notes.append(f"energy unknown: {gpu_labels(unknown)} went without a power reading for longer than a gap "
                     f"({GAP_OVER_MEDIAN:g} sampling intervals, at least {format_duration(GAP_MIN_S)}) at a stretch "
                     f"([N/A] power, or no samples): the energy would be a guess")
    return replace(summary, notes=tuple(notes))


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def _run_log_start_s(log: UsageLog) -> float | None:
    """The start of the one run a gpuwise run log records (its meta's ``start_t_s``); None for other logs
    (nvidia-smi's, which may be appended, and run logs without a start: the library's Sampler, older logs)."""
    if log.source != RUN_LOG_SOURCE:
        return None
    start = _float(log.meta.get(START_T_S_KEY), float("nan"))
    return start if np.isfinite(start) else None
