"""The launch's one error type: a launch that cannot be emitted, said in one line (exit 2)."""

from __future__ import annotations

from gpuwise.errors import GpuwiseError


class LaunchError(GpuwiseError):
    pass
