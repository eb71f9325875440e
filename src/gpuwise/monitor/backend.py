"""The interface every sampler backend implements (NVML, replay), and how the CLI picks one."""

from __future__ import annotations

import os
from collections.abc import Set
from typing import Protocol, runtime_checkable

from gpuwise.errors import GpuwiseError
from gpuwise.monitor.sample import GpuSample

# Tests and demos point the commands at recorded samples: GPUWISE_MONITOR_BACKEND=replay:/path/frames.json
BACKEND_ENV = "GPUWISE_MONITOR_BACKEND"


class MonitorError(GpuwiseError):
    pass


class NoDriverError(MonitorError):
    """No NVIDIA driver / NVML library on this machine (or no GPU). The message is one line."""


@runtime_checkable
class Backend(Protocol):
    """Reads every visible GPU (and MIG instance) once per call.

    ``watch_pids``: the processes whose memory counts as the job's (``gpuwise run``'s child tree);
    None means every compute process counts.
    """

    name: str

    def sample(self, watch_pids: Set[int] | None = None) -> list[GpuSample]: ...

    def driver_version(self) -> str | None: ...

    def close(self) -> None: ...


def open_backend(spec: str | None = None) -> Backend:
    """``nvml`` (default), or ``replay:PATH`` (a JSON file of frames, or a gpuwise run log).

    Raises NoDriverError when NVML cannot start: the caller says so in one line.
    """
    spec = spec or os.environ.get(BACKEND_ENV) or "nvml"
    if spec == "nvml":
        from gpuwise.monitor.nvml import NvmlBackend

        return NvmlBackend()
    if spec.startswith("replay:"):
        from gpuwise.monitor.replay import ReplayBackend

        return ReplayBackend.from_file(spec[len("replay:"):])
    raise MonitorError(f"unknown monitor backend {spec!r} (use nvml or replay:PATH)")
