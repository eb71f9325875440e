"""The guard's one error type."""

from __future__ import annotations

from gpuwise.errors import GpuwiseError


class GuardError(GpuwiseError):
    """A checkpoint cannot be written or read, or the guard was configured wrongly (one clear line)."""
