"""The time baselines every time set reports on its own rows (issue 28): a plain roofline and roofline / 0.75.

Plain roofline: per operator of the same trace, max(FLOPs / datasheet peak of the precision the
kernel runs in, bytes / datasheet bandwidth), summed; no efficiency, no launch or host cost. The
per-operator figure is the one the time model itself carries (``OpFeatures.roofline_s``), so the
baseline reads the same precision rule as the model. Roofline / 0.75 is the one-constant model:
every operator at 75% of its roofline rate.
"""

from __future__ import annotations

from benchmarks.harness import ROOFLINE, ROOFLINE_075
from gpuwise.runtime.predict import roofline_step_s as _roofline_step_s

ONE_CONSTANT = 0.75


def roofline_step_s(trace, gpu) -> float:
    """Plain roofline time of one step of ``trace`` on ``gpu`` (seconds): every traced op as traced
    (``runtime.predict.roofline_step_s`` without compile's fusion, so a compiled case keeps the baseline's
    definition)."""
    return _roofline_step_s(trace, gpu, compiled_fusion=False)


def roofline_baselines(trace, gpu) -> dict[str, float]:
    """{'roofline': s, 'roofline / 0.75': s}: the two baselines of a step time, by harness name."""
    roof = roofline_step_s(trace, gpu)
    return {ROOFLINE: roof, ROOFLINE_075: roof / ONE_CONSTANT}
