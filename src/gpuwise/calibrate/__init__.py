"""Measured runs calibrate gpuwise for the user's own stack (docs/calibrate.md).

``gpuwise run --model …`` and the guard record the workload and what was measured in the run log
(``report.measured``); ``calibrate`` fits per GPU × operator-class time factors, a host term and a memory
offset on such runs (``fit``), keeps them in the user's config dir (``store``: also ``reset`` and ``forget`` one
run), ``explain`` says in words what was fitted, and ``apply`` corrects every estimate on a calibrated GPU with
them. ``export`` writes a measurement as one anonymous JSON row.
"""

from gpuwise.calibrate.calibration import GpuCalibration
from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.fit import fit_gpu
from gpuwise.calibrate.learn import calibrate, checked, read_measurements
from gpuwise.calibrate.step import FitRow
from gpuwise.calibrate.store import forget, load, reset, save, user_calibration_path

__all__ = ["CalibrateError", "FitRow", "GpuCalibration", "calibrate", "checked", "fit_gpu", "forget", "load",
           "read_measurements", "reset", "save", "user_calibration_path"]
