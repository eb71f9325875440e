"""The catalog part's one error type: an unknown or ambiguous GPU name, a bad catalog file (exit 2)."""

from gpuwise.errors import GpuwiseError


class CatalogError(GpuwiseError):
    pass
