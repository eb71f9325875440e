"""The fitted efficiency parameters of the time model, read from ``calibration.json``.

A few numbers per operator class, and one compute and one memory factor per architecture: never
per model (``benchmarks/fit_time_calibration.py`` writes the file and says what it was fitted on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Mapping

# Priors: what the kernels of each class reach on a big problem, before fitting.
DEFAULTS: dict[str, float] = {
    "matmul_eff": 0.70,          # share of the tensor-core (or fp32) peak a large GEMM reaches
    "conv_eff": 0.60,            # cuDNN implicit GEMM, large
    "attention_eff": 0.45,       # flash / memory-efficient SDPA
    "cuda_core_factor": 1.0,     # relative efficiency of fp32 CUDA-core GEMMs vs tensor-core ones
    "tf32_factor": 1.0,          # relative efficiency of TF32 tensor-core kernels vs fp16/bf16 ones
    "depthwise_mem_eff": 0.35,   # depthwise / grouped convs: bandwidth-bound, poorly coalesced
    "mem_eff": 0.75,             # elementwise kernels: share of datasheet bandwidth
    "norm_factor": 0.80,         # norm kernels relative to elementwise (two passes, reductions)
    "backward_factor": 0.85,     # conv backward (dgrad/wgrad) kernels relative to forward ones
    "depthwise_backward_factor": 0.5,  # depthwise conv backward relative to its forward
    "balance_exponent": 0.0,     # tensor efficiency ~ (FLOPs per byte / 100) ** -this
    "kernel_latency_s": 4e-6,    # GPU-side ramp-up/tail per kernel launch
    "host_op_s": 9e-6,           # eager PyTorch host time per aten op that launches a kernel
    "host_view_s": 2e-6,         # ... per op that only makes a view
}
ARCHES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")


@dataclass(frozen=True)
class Calibration:
    params: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULTS))
    arch_compute: Mapping[str, float] = field(default_factory=dict)   # multiplies compute efficiency
    arch_memory: Mapping[str, float] = field(default_factory=dict)    # multiplies memory efficiency
    source: str = "priors (not fitted)"
    date: str = ""

    def p(self, name: str) -> float:
        return float(self.params.get(name, DEFAULTS[name]))

    def compute_factor(self, arch: str) -> float:
        return float(self.arch_compute.get(arch, 1.0))

    def memory_factor(self, arch: str) -> float:
        return float(self.arch_memory.get(arch, 1.0))

    def with_params(self, **changes: float) -> "Calibration":
        return replace(self, params={**self.params, **changes})

    def to_dict(self) -> dict:
        return {
            "source": self.source, "date": self.date, "params": dict(self.params),
            "arch_compute": dict(self.arch_compute), "arch_memory": dict(self.arch_memory),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "Calibration":
        return cls(
            params={**DEFAULTS, **{k: float(v) for k, v in d.get("params", {}).items()}},
            arch_compute={k: float(v) for k, v in d.get("arch_compute", {}).items()},
            arch_memory={k: float(v) for k, v in d.get("arch_memory", {}).items()},
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
