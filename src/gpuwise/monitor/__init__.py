"""gpuwise.monitor: GPU sampling through NVML, a library first (gpustat/nvitop style).

    from gpuwise.monitor import open_backend
    from gpuwise.monitor.sampler import open_sampler, close_sampler
    backend = open_backend()                 # NvmlBackend; NoDriverError without a driver
    sampler = open_sampler(backend, interval_s=0.5, log_path="run.db").start()   # a new run log with its meta
    ...; close_sampler(sampler)              # end time written, log and backend closed

Backends implement ``Backend`` (``sample(watch_pids) -> list[GpuSample]``): ``NvmlBackend`` (real) and
``ReplayBackend`` (recorded or scripted samples, for tests and machines without a GPU).
"""

from gpuwise.monitor.backend import BACKEND_ENV, Backend, MonitorError, NoDriverError, open_backend
from gpuwise.monitor.replay import ReplayBackend
from gpuwise.monitor.sample import GpuSample, sample_from_row
from gpuwise.monitor.sampler import Sampler

__all__ = [
    "BACKEND_ENV", "Backend", "GpuSample", "MonitorError", "NoDriverError", "ReplayBackend", "Sampler",
    "open_backend", "sample_from_row",
]
