"""The end-to-end factors of the time model, read from ``calibration.json``.

What the per-kernel laws (``kernel_laws.json``, fitted on fp32 single-kernel data) cannot say: how
tensor-core, fused-attention, convolution-backward and depthwise kernels fare relative to them. A
few numbers per operator class, never per model or per GPU; each at most 1 (no kernel beats the
datasheet). ``benchmarks/fit_time_calibration.py`` fits them on the training side of the frozen
split (benchmarks/README.md) and writes the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Mapping

# Priors: stated before fitting. "fixed" ones are assumptions the end-to-end data cannot test.
DEFAULTS: dict[str, float] = {
    "tensor_eff": 0.7,           # tensor-core GEMM/conv kernels: utilisation of a full wave (the fp32 law's waves)
    "tf32_factor": 1.0,          # fixed: TF32 kernels reach the same share of their (half-of-fp16) peak
    "attention_eff": 0.5,        # fused SDPA kernels: utilisation of a full wave at the tensor-core peak
    "backward_factor": 0.85,     # cuDNN dgrad/wgrad kernels relative to forward ones
    "depthwise_mem_eff": 0.35,   # depthwise / grouped convs: share of the streaming law's bandwidth
    "depthwise_backward_factor": 0.5,  # depthwise conv backward relative to its forward
    "kernel_latency_s": 4e-6,    # fixed: GPU-side gap per kernel launch (ramp-up, tail), 2-5 us since Volta
    # The stack, fitted on the training side's paired runs (timm NCHW vs NHWC on the RTX 3090, eager vs
    # torch.compile on the RTX 5090):
    "layout_transpose_factor": 1.0,  # share of a full input+output transpose an NCHW half conv pays
    "compile_fusion_rest": 0.0,      # a fused run costs its largest member + this x the rest
}
FIXED = ("tf32_factor", "kernel_latency_s")
STACK_PARAMS = ("layout_transpose_factor", "compile_fusion_rest")   # fitted apart, on paired runs


@dataclass(frozen=True)
class Calibration:
    """The time model's end-to-end factors: ``params`` name -> value (``DEFAULTS`` names them, each a
    dimensionless efficiency at most 1 but ``kernel_latency_s``, in seconds), with where they came from
    (``source``) and when they were fitted (``date``, ISO). ``load_calibration()`` reads the shipped ones
    (fitted on public measurements); ``predict_step_time(..., calibration=)`` takes another. Not the user's own
    runs: those are ``gpuwise.calibrate``'s correction, applied on top."""

    params: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULTS))
    source: str = "priors (not fitted)"
    date: str = ""

    def p(self, name: str) -> float:
        return float(self.params.get(name, DEFAULTS[name]))

    def with_params(self, **changes: float) -> "Calibration":
        return replace(self, params={**self.params, **changes})

    def to_dict(self) -> dict:
        return {"source": self.source, "date": self.date, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Calibration":
        return cls(
            params={**DEFAULTS, **{k: float(v) for k, v in d.get("params", {}).items() if k in DEFAULTS}},
            source=str(d.get("source", "")), date=str(d.get("date", "")),
        )


@lru_cache(maxsize=1)
def load_calibration() -> Calibration:
    """The shipped calibration; the priors where the file is missing (a fresh checkout mid-fit)."""
    try:
        text = resources.files("gpuwise.runtime").joinpath("calibration.json").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return Calibration()
    return Calibration.from_dict(json.loads(text))
