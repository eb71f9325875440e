"""The interface every sampler backend implements (NVML, replay), and how the CLI picks one."""

from __future__ import annotations

import os
from collections.abc import Set
from typing import Protocol, runtime_checkable

from gpuwise.monitor.errors import MonitorError, NoDriverError  # noqa: F401 (NoDriverError: open_backend raises it)
from gpuwise.monitor.nvml import NvmlBackend
from gpuwise.monitor.replay import ReplayBackend
from gpuwise.monitor.sample import GpuSample

# Tests and demos point the commands at recorded samples: GPUWISE_MONITOR_BACKEND=replay:/path/frames.json
BACKEND_ENV = "GPUWISE_MONITOR_BACKEND"


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
        return NvmlBackend()
    if spec.startswith("replay:"):
        return ReplayBackend.from_file(spec[len("replay:"):])
    raise MonitorError(f"unknown monitor backend {spec!r} (use nvml or replay:PATH)")
