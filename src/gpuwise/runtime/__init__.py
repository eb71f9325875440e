"""gpuwise.runtime: the time of a traced step on a GPU you do not have.

``predict_step_time(trace, gpu, *, count=1) -> StepTime``; see docs/runtime.md.
"""

from gpuwise.runtime.calibration import Calibration, load_calibration
from gpuwise.runtime.classify import CLASSES, classify, register_class
from gpuwise.runtime.model import BOUNDS, RuntimeError_, StepTime
from gpuwise.runtime.predict import predict_step_time

__all__ = [
    "BOUNDS", "CLASSES", "Calibration", "RuntimeError_", "StepTime", "classify", "load_calibration",
    "predict_step_time", "register_class",
]
