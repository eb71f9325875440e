"""The real backend: NVML through nvidia-ml-py (``import pynvml``), one query of every GPU per call.

Robustness rules (each field is read on its own):
- a field the GPU or driver does not support (or we may not read) becomes None, never an error;
- ``NVMLError_GpuIsLost`` marks that GPU lost (``lost=1`` from then on, no more calls to it) and the
  other GPUs go on being sampled;
- under MIG, every MIG instance is its own device (``mig_index``) with its own memory and processes;
  its busy share comes from GPM where the GPU has it (per-instance utilisation is not supported);
- PCIe throughput and GPM metrics are read at most once per ``slow_period_s``: the PCIe counter call
  itself samples for about 20 ms, and GPM rates need a window between two samples.
"""

from __future__ import annotations

import time
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

import pynvml  # nvidia-ml-py; importing needs no driver, nvmlInit does

from gpuwise.monitor.errors import NoDriverError
from gpuwise.monitor.procs import GpuProcess, ProcessRow, attribute_memory, pid_exists, process_rows
from gpuwise.monitor.sample import GpuSample

_GPM_METRICS = (
    ("sm_activity_pct", pynvml.NVML_GPM_METRIC_SM_UTIL),
    ("sm_occupancy_pct", pynvml.NVML_GPM_METRIC_SM_OCCUPANCY),
    ("gpm_busy_pct", pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL),
)


class _Lost(Exception):
    pass


@dataclass
class _Device:
    index: int
    handle: Any
    mig_index: int | None = None
    parent_handle: Any = None
    gpu_instance_id: int | None = None
    uuid: str | None = None
    name: str | None = None
    lost: bool = False
    memory_v2: bool = True
    gpm_samples: list[Any] = field(default_factory=list)  # [previous, current] while GPM works
    gpm_primed: bool = False   # a first GPM sample exists: rates need two
    slow_at_s: float = -1e18
    slow: dict[str, float | None] = field(default_factory=dict)


class NvmlBackend:
    name = "nvml"

    def __init__(self, nvml: Any = pynvml, *, slow_period_s: float = 1.0) -> None:
        """``nvml``: the pynvml module (tests pass an object with the same functions)."""
        self._nv = nvml
        self._slow_period_s = slow_period_s
        self._processes: dict[tuple[int, int | None], list[GpuProcess]] = {}   # per device, last sample
        try:
            nvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NoDriverError(f"no NVIDIA driver on this machine (NVML: {exc})") from None
        try:
            count = nvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise NoDriverError(f"NVML found no GPU ({exc})") from None
        if count == 0:
            raise NoDriverError("NVML found no GPU on this machine")
        self._devices: list[_Device] = []
        for index in range(count):
            self._devices.extend(self._open(index))

    # -- enumeration -----------------------------------------------------------------------------
    def _open(self, index: int) -> list[_Device]:
        nv = self._nv
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            dev = _Device(index, handle, uuid=nv.nvmlDeviceGetUUID(handle), name=nv.nvmlDeviceGetName(handle))
        except pynvml.NVMLError_GpuIsLost:
            return [_Device(index, None, lost=True)]
        except pynvml.NVMLError:
            return [_Device(index, None, lost=True)]
        dev.gpm_samples = self._gpm_alloc(handle)
        devices = [dev]
        current_mig = self._read(nv.nvmlDeviceGetMigMode, handle, quiet_lost=True)
        if current_mig and current_mig[0] == pynvml.NVML_DEVICE_MIG_ENABLE:
            slots = self._read(nv.nvmlDeviceGetMaxMigDeviceCount, handle, quiet_lost=True) or 0
            for slot in range(slots):
                try:
                    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except pynvml.NVMLError:
                    continue  # empty slot
                mdev = _Device(
                    index, mig, mig_index=slot, parent_handle=handle,
                    gpu_instance_id=self._read(nv.nvmlDeviceGetGpuInstanceId, mig, quiet_lost=True),
                    uuid=self._read(nv.nvmlDeviceGetUUID, mig, quiet_lost=True),
                    name=self._read(nv.nvmlDeviceGetName, mig, quiet_lost=True),
                )
                if dev.gpm_samples:
                    mdev.gpm_samples = self._gpm_alloc(handle)
                devices.append(mdev)
        return devices

    def _gpm_alloc(self, handle: Any) -> list[Any]:
        nv = self._nv
        try:
            if not nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                return []
            return [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        except (pynvml.NVMLError, AttributeError):
            return []  # pre-Hopper GPU, old driver or old nvidia-ml-py

    # -- sampling --------------------------------------------------------------------------------
    def _read(self, fn: Any, *args: Any, quiet_lost: bool = False) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError_GpuIsLost:
            if quiet_lost:
                return None
            raise _Lost() from None
        except pynvml.NVMLError:
            return None  # not supported, no permission, unknown: one missing field, not a failed sample

    def sample(self, watch_pids: Set[int] | None = None) -> list[GpuSample]:
        now_s = time.time()
        out = []
        for dev in self._devices:
            if not dev.lost:
                try:
                    out.append(self._sample_device(dev, now_s, watch_pids))
                    continue
                except _Lost:
                    dev.lost = True
            out.append(GpuSample(now_s, dev.index, dev.uuid, dev.name, mig_index=dev.mig_index, lost=1,
                                  gpu_instance_id=dev.gpu_instance_id))
        return out

    def processes(self) -> list[ProcessRow]:
        """The compute processes each GPU listed at the last sample, with user and command (from /proc)."""
        return [row for (index, mig), procs in sorted(self._processes.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
                for row in process_rows(index, mig, procs)]

    def _sample_device(self, dev: _Device, now_s: float, watch_pids: Set[int] | None) -> GpuSample:
        nv, h = self._nv, dev.handle
        util = self._read(nv.nvmlDeviceGetUtilizationRates, h)
        mem = None
        if dev.memory_v2:
            mem = self._read(_memory_v2, nv, h)
            dev.memory_v2 = mem is not None
        reserved_bytes = int(mem.reserved) if mem is not None else None   # v2 only: v1's used includes it
        if mem is None:
            mem = self._read(nv.nvmlDeviceGetMemoryInfo, h)
        procs_raw = self._read(nv.nvmlDeviceGetComputeRunningProcesses, h)
        procs = [GpuProcess(int(p.pid), p.usedGpuMemory) for p in procs_raw or ()]
        self._processes[(dev.index, dev.mig_index)] = procs
        process_bytes, match = attribute_memory(procs, watch_pids, pid_exists)
        power_mw = self._read(nv.nvmlDeviceGetPowerUsage, h)
        # Under MIG, power, temperature and clocks belong to the whole GPU: read them from the parent.
        board = dev.parent_handle if dev.parent_handle is not None else h
        if power_mw is None and board is not h:
            power_mw = self._read(nv.nvmlDeviceGetPowerUsage, board)
        if now_s - dev.slow_at_s >= self._slow_period_s:
            dev.slow = self._slow_fields(dev)
            dev.slow_at_s = now_s
        busy = util.gpu if util is not None else dev.slow.get("gpm_busy_pct")
        return GpuSample(
            t_s=now_s, gpu_index=dev.index, uuid=dev.uuid, name=dev.name, mig_index=dev.mig_index,
            utilization_pct=_float(busy),
            memory_util_pct=_float(util.memory) if util is not None else None,
            memory_used_bytes=int(mem.used) if mem is not None else None,
            memory_total_bytes=int(mem.total) if mem is not None else None,
            memory_reserved_bytes=reserved_bytes, gpu_instance_id=dev.gpu_instance_id,
            process_memory_bytes=process_bytes, process_count=len(procs) if procs_raw is not None else None,
            process_match=match,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            temperature_c=_float(self._read(nv.nvmlDeviceGetTemperature, board, pynvml.NVML_TEMPERATURE_GPU)),
            sm_clock_mhz=_float(self._read(nv.nvmlDeviceGetClockInfo, board, pynvml.NVML_CLOCK_SM)),
            mem_clock_mhz=_float(self._read(nv.nvmlDeviceGetClockInfo, board, pynvml.NVML_CLOCK_MEM)),
            pcie_tx_bytes_per_s=dev.slow.get("pcie_tx_bytes_per_s"),
            pcie_rx_bytes_per_s=dev.slow.get("pcie_rx_bytes_per_s"),
            sm_activity_pct=dev.slow.get("sm_activity_pct"),
            sm_occupancy_pct=dev.slow.get("sm_occupancy_pct"),
        )

    def _slow_fields(self, dev: _Device) -> dict[str, float | None]:
        nv, h = self._nv, dev.handle
        out: dict[str, float | None] = {}
        for key, counter in (("pcie_tx_bytes_per_s", pynvml.NVML_PCIE_UTIL_TX_BYTES),
                             ("pcie_rx_bytes_per_s", pynvml.NVML_PCIE_UTIL_RX_BYTES)):
            kib_per_s = self._read(nv.nvmlDeviceGetPcieThroughput, h, counter)
            out[key] = kib_per_s * 1024.0 if kib_per_s is not None else None
        out.update(self._gpm(dev))
        return out

    def _gpm(self, dev: _Device) -> dict[str, float | None]:
        """GPM metrics over the window since the previous GPM sample (None on the first call)."""
        if not dev.gpm_samples:
            return {}
        nv = self._nv
        previous, current = dev.gpm_samples
        if dev.mig_index is not None:
            ok = self._read(nv.nvmlGpmMigSampleGet, dev.parent_handle, dev.gpu_instance_id, current)
        else:
            ok = self._read(nv.nvmlGpmSampleGet, dev.handle, current)
        if ok is None:
            return {}
        dev.gpm_samples = [current, previous]
        if not dev.gpm_primed:
            dev.gpm_primed = True
            return {}
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(_GPM_METRICS)
        request.sample1, request.sample2 = previous, current
        for i, (_, metric_id) in enumerate(_GPM_METRICS):
            request.metrics[i].metricId = metric_id
        if self._read(nv.nvmlGpmMetricsGet, request) is None:
            return {}
        return {
            key: float(request.metrics[i].value) if request.metrics[i].nvmlReturn == pynvml.NVML_SUCCESS else None
            for i, (key, _) in enumerate(_GPM_METRICS)
        }

    def driver_version(self) -> str | None:
        try:
            return self._nv.nvmlSystemGetDriverVersion()
        except pynvml.NVMLError:
            return None

    def close(self) -> None:
        for dev in self._devices:
            for s in dev.gpm_samples:
                self._read(self._nv.nvmlGpmSampleFree, s, quiet_lost=True)
            dev.gpm_samples = []
        try:
            self._nv.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _memory_v2(nv: Any, handle: Any) -> Any:
    """The v2 call: ``used`` excludes the driver's reserved memory, as recent nvidia-smi shows it."""
    try:
        return nv.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    except TypeError:  # nvidia-ml-py without the version argument
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND) from None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
