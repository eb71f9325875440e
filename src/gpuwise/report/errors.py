from gpuwise.errors import GpuwiseError


class ReportError(GpuwiseError):
    """A log the report cannot read: the message names the file and line."""
