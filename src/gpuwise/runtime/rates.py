"""The GPU's peak rate for a workload's precision, and the one datasheet ratio used where no workload is known.

One home for "which peak does this precision run at" (DESIGN.md's names → the catalog's keys) and for
the busy-time ratio between two GPUs that ``report`` and ``advise`` fall back on for a bare
nvidia-smi log. Everything that knows the workload uses the per-operator predictor instead.
"""

from __future__ import annotations

import math

from gpuwise.runtime.model import RuntimeError_

# Workload precision (DESIGN.md) -> the catalog's peak_tflops key of its matmuls.
MATMUL_RATE_KEY = {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "fp16", "fp16": "fp16", "amp-bf16": "bf16", "bf16": "bf16"}
# What PyTorch runs where the GPU lacks a rate: bf16 without bf16 tensor cores runs at fp32 arithmetic
# (cuBLAS emulates it on CUDA cores: T4, V100), tf32 without TF32 is plain fp32, fp16 without tensor cores fp32.
_FALLBACK = {"bf16": "fp32", "tf32": "fp32", "fp16": "fp32", "fp8": "fp16", "int8": "fp16"}
DATASHEET_METHOD = "datasheet ratio: geometric mean of the peak-rate ratio and the memory-bandwidth ratio"


def rate_key(gpu, precision: str) -> str:
    """The catalog key of the peak the precision's matmuls reach on ``gpu`` (after PyTorch's fallbacks)."""
    key = MATMUL_RATE_KEY.get(precision, precision)
    while gpu.peak(key) is None and key in _FALLBACK:
        key = _FALLBACK[key]
    return key


def peak_flops_per_s(gpu, precision: str) -> float:
    """Dense peak FLOP/s of the precision's matmuls on ``gpu`` (RuntimeError_ when the catalog lists none)."""
    value = gpu.peak(rate_key(gpu, precision))
    if not value:
        raise RuntimeError_(f"GPU {gpu.id!r} lists no peak rate for {precision} (nor fp32)")
    return float(value) * 1e12


def fallback_warning(gpu, precision: str) -> str | None:
    """Words for a precision the GPU lacks, or None."""
    wanted = MATMUL_RATE_KEY.get(precision, precision)
    got = rate_key(gpu, precision)
    if got == wanted:
        return None
    return (f"{gpu.name} has no {wanted} tensor-core rate ({gpu.arch}): {precision} matmuls run at its {got} "
            f"rate (~{gpu.peak(got) or 0:.0f} TFLOPS)")


def datasheet_time_ratio(gpu_from, gpu_to, precision: str) -> float:
    """How many times longer a busy second on ``gpu_from`` takes on ``gpu_to`` (> 1: slower), from datasheets.

    Training mixes compute-bound and memory-bound kernels, so the ratio is the geometric mean of the
    peak-rate ratio (at the precision) and the memory-bandwidth ratio. The geometric mean keeps the
    ratio consistent both ways (ratio(a, b) × ratio(b, a) = 1), which an arithmetic blend does not.
    It is the fallback for logs without a workload; with one, the per-operator predictor decides.
    """
    compute = peak_flops_per_s(gpu_from, precision) / peak_flops_per_s(gpu_to, precision)
    bandwidth = gpu_from.memory_bandwidth_gbs / gpu_to.memory_bandwidth_gbs
    return math.sqrt(compute * bandwidth)
