"""What this machine lacks (a GPU, an NVIDIA driver), faked behind the real interfaces: a stand-in for the
pynvml module that raises pynvml's own errors, replay frames, and a runner for gpuwise subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pynvml

GIB = 2**30


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


@dataclass
class FakeGpu:
    name: str = "NVIDIA A100-SXM4-40GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util: tuple[int, int] | None = (37, 12)            # None: NotSupported
    total_bytes: int = 40 * GIB
    used_bytes: int = 12 * GIB
    procs: list[tuple[int, int | None]] | None = field(default_factory=list)  # None: NotSupported
    power_mw: int | None = 180_000
    temperature_c: int | None = 55
    clocks_mhz: tuple[int, int] | None = (1410, 1215)
    pcie_kib_per_s: int | None = 2048
    memory_v2: bool = True
    gpm: dict[int, float] | None = None                 # metric id -> value, on GPM-capable GPUs
    mig: list["FakeGpu"] = field(default_factory=list)  # MIG instances of this GPU
    gpu_instance_id: int = 0
    lost: bool = False


class FakeNvml:
    """The pynvml functions NvmlBackend calls, over FakeGpus."""

    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.calls: list[str] = []
        self.shutdown = False

    def _h(self, h: FakeGpu, what: str) -> FakeGpu:
        self.calls.append(what)
        if h.lost:
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return h

    def nvmlInit(self):
        if self.init_error is not None:
            raise nvml_error(self.init_error)

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self._h(self.gpus[i], "handle")

    def nvmlDeviceGetUUID(self, h):
        return self._h(h, "uuid").uuid

    def nvmlDeviceGetName(self, h):
        return self._h(h, "name").name

    def nvmlDeviceGetMigMode(self, h):
        if not self._h(h, "mig").mig:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, j):
        if j >= len(h.mig):
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return h.mig[j]

    def nvmlDeviceGetGpuInstanceId(self, h):
        return h.gpu_instance_id

    def nvmlDeviceGetUtilizationRates(self, h):
        h = self._h(h, "util")
        if h.util is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = h.util
        return u

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        h = self._h(h, "memory_v2" if version else "memory")
        if version and not h.memory_v2:
            raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        m = pynvml.c_nvmlMemory_v2_t() if version else pynvml.c_nvmlMemory_t()
        m.total, m.used, m.free = h.total_bytes, h.used_bytes, h.total_bytes - h.used_bytes
        return m

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        h = self._h(h, "procs")
        if h.procs is None:
            raise nvml_error(pynvml.NVML_ERROR_NO_PERMISSION)
        return [pynvml.nvmlFriendlyObject({"pid": pid, "usedGpuMemory": used}) for pid, used in h.procs]

    def nvmlDeviceGetPowerUsage(self, h):
        h = self._h(h, "power")
        if h.power_mw is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return h.power_mw

    def nvmlDeviceGetTemperature(self, h, sensor):
        h = self._h(h, "temperature")
        if h.temperature_c is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return h.temperature_c

    def nvmlDeviceGetClockInfo(self, h, kind):
        h = self._h(h, "clock")
        if h.clocks_mhz is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return h.clocks_mhz[0] if kind == pynvml.NVML_CLOCK_SM else h.clocks_mhz[1]

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        h = self._h(h, "pcie")
        if h.pcie_kib_per_s is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return h.pcie_kib_per_s

    def nvmlGpmQueryDeviceSupport(self, h):
        s = pynvml.c_nvmlGpmSupport_t()
        s.isSupportedDevice = 1 if self._h(h, "gpm_support").gpm is not None else 0
        return s

    def nvmlGpmSampleAlloc(self):
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, sample):
        pass

    def nvmlGpmSampleGet(self, h, sample):
        self._h(h, "gpm_sample")
        self._gpm_source = h
        return sample

    def nvmlGpmMigSampleGet(self, h, gpu_instance_id, sample):
        self._h(h, "gpm_mig_sample")
        self._gpm_source = next(m for m in h.mig if m.gpu_instance_id == gpu_instance_id)
        return sample

    def nvmlGpmMetricsGet(self, request):
        values = self._gpm_source.gpm or {}
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            if metric.metricId in values:
                metric.value, metric.nvmlReturn = values[metric.metricId], pynvml.NVML_SUCCESS
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return request


def write_frames(path: Path, frames: list[list[dict]], driver_version: str = "550.54.15") -> Path:
    path.write_text(json.dumps({"driver_version": driver_version, "frames": frames}))
    return path


def two_gpu_frames(n: int = 4) -> list[list[dict]]:
    """GPU 0 busy and holding memory; GPU 1 without utilisation support, lost from the third frame."""
    frames = []
    for k in range(n):
        frames.append([
            {"gpu_index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 30 + k,
             "memory_used_bytes": (11 + k % 2) * GIB, "memory_total_bytes": 40 * GIB, "power_w": 150.0,
             "temperature_c": 50.0, "sm_clock_mhz": 1410.0, "mem_clock_mhz": 1215.0},
            {"gpu_index": 1, "uuid": "GPU-bbbb", "name": "NVIDIA A100-SXM4-40GB", "memory_used_bytes": GIB,
             "memory_total_bytes": 40 * GIB, "lost": 1 if k >= 2 else 0},
        ])
    return frames


def gpuwise(*args: str, env: dict | None = None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, **kw)
