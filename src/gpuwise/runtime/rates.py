"""The GPU's peak rate for a workload's precision, and the one datasheet ratio used where no workload is known.

Which peak a precision runs at is ``Precision.rate_key`` (workload/precision.py); this module turns a
rate key into FLOP/s and words, and holds the busy-time ratio between two GPUs that ``report`` and
``advise`` fall back on for a bare nvidia-smi log. Everything that knows the workload uses the per-operator predictor instead.
"""

from __future__ import annotations

import math

from gpuwise.runtime.model import RuntimeError_
from gpuwise.workload.precision import BF16_EMULATED, parse

DATASHEET_METHOD = "datasheet ratio: geometric mean of the peak-rate ratio and the memory-bandwidth ratio"


def rate_peak_flops_per_s(gpu, rate: str) -> float:
    """Dense peak FLOP/s of a rate key (``Precision.rate_key``): bf16 emulated on CUDA cores runs at fp32."""
    value = gpu.peak("fp32" if rate == BF16_EMULATED else rate)
    if not value:
        raise RuntimeError_(f"GPU {gpu.id!r} lists no peak rate for {rate} (nor fp32)")
    return float(value) * 1e12


def peak_flops_per_s(gpu, precision) -> float:
    """Dense peak FLOP/s of the precision's matmuls on ``gpu`` (RuntimeError_ when the catalog lists none)."""
    return rate_peak_flops_per_s(gpu, parse(precision).rate_key(gpu))


def fallback_warning(gpu, precision) -> str | None:
    """Words for a precision the GPU lacks, or None."""
    p = parse(precision)
    wanted, got = p.matmul_rate, p.rate_key(gpu)
    if got == wanted:
        return None
    arithmetic = "fp32" if got == BF16_EMULATED else got
    return (f"{gpu.name} has no {wanted} tensor-core rate ({gpu.arch}): {p.name} matmuls run at its {arithmetic} "
            f"rate (~{gpu.peak(arithmetic) or 0:.0f} TFLOPS)")


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
