from gpuwise.errors import GpuwiseError


class CalibrateError(GpuwiseError):
    """A run that cannot calibrate (no workload, no step times, another GPU) or a calibration file that
    cannot be read: one line, exit 2, and the calibration file is left as it was."""
