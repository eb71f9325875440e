"""The advise part's one error type: bad input (a malformed log, an unknown option value), exit code 2."""

from __future__ import annotations

from gpuwise.errors import GpuwiseError


class AdviseError(GpuwiseError):
    pass
