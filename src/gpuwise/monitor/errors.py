"""The monitor part's errors: a bad backend or replay file, and no NVIDIA driver to sample (exit 2)."""

from gpuwise.errors import GpuwiseError


class MonitorError(GpuwiseError):
    pass


class NoDriverError(MonitorError):
    """No NVIDIA driver / NVML library on this machine (or no GPU). The message is one line."""
