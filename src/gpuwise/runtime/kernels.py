"""The time of one traced operator on one GPU: roofline bound x calibrated efficiency + launch cost.

``op_time(op, gpu, precision, cal)`` is pure. Per class a small rule says which peak applies and
how well a kernel of that size uses it:

* matmul / conv / attention: FLOPs over the peak of the precision the kernel runs in, times the
  class efficiency, times the share of the GPU that the kernel's tiles keep busy (wave
  quantisation over the SMs: a 128x128-tile GEMM with 30 tiles on a 108-SM A100 uses 28% of it);
* depthwise / narrow grouped convs: CUDA cores and bandwidth, never tensor cores;
* everything else: bytes over bandwidth x class efficiency.

Each kernel also pays a GPU-side latency; the host side (eager PyTorch's dispatch, ~10 us an op) is
returned apart, since it overlaps with GPU work and only matters when it is the larger of the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuwise.runtime.calibration import Calibration
from gpuwise.runtime.classify import VIEW, classify, packet_of
from gpuwise.trace.records import OpRecord

TENSOR_CLASSES = ("matmul", "conv", "attention")
HALF_DTYPES = {"float16": "fp16", "bfloat16": "bf16"}
# Memory-bound classes relative to plain elementwise kernels (structure, not fitted: too little data).
_MEM_CLASS_FACTOR = {"embedding": 0.5, "copy": 1.0, "optimizer": 1.0, "elementwise": 1.0, "other": 0.9}
# GEMM tile shapes cuBLAS/cuDNN pick from, with the relative efficiency of each tile size.
_TILES = ((128, 128, 1.0), (128, 64, 0.9), (64, 64, 0.7), (64, 32, 0.5), (16, 64, 0.35))
_SPLIT_K = (1, 2, 4, 8, 16)
_SPLIT_K_EFF = 0.8
BALANCE_REF = 100.0      # FLOPs per byte where the balance correction is 1 (RTX 3090 fp16: 76, A100: 153)
_DEPTHWISE_MAX_GROUP_CHANNELS = 16


@dataclass(frozen=True)
class OpTime:
    cls: str            # class from gpuwise.runtime.classify, or "view"
    device_s: float     # GPU time incl. per-kernel latency
    host_s: float       # eager host time to issue it
    compute_s: float    # FLOP-bound part
    memory_s: float     # byte-bound part
    kernels: int
    rate: str           # peak used: "fp32", "tf32", "fp16", "bf16", "bf16-emulated", "bandwidth"


def rate_key(cls: str, precision: str, gpu, op: OpRecord | None = None) -> str:
    """The peak a tensor-class kernel runs at: see DESIGN.md on what fp32 / tf32 / amp mean."""
    has = lambda key: gpu.peak(key) is not None  # noqa: E731
    if precision in ("amp-fp16", "fp16"):
        want = "fp16"
    elif precision in ("amp-bf16", "bf16"):
        want = "bf16"
    else:
        dtype = op.input_dtypes[0] if op is not None and op.input_dtypes else "float32"
        want = HALF_DTYPES.get(dtype)
        if want is None:
            # PyTorch defaults: cuBLAS without TF32, cuDNN with it; "tf32" turns both on.
            tf32 = precision == "tf32" or cls == "conv"
            want = "tf32" if tf32 and has("tf32") else "fp32"
    if want == "bf16" and not has("bf16"):
        return "bf16-emulated"
    if not has(want):
        return "fp32"
    return want


def _peak_flops(gpu, key: str) -> float:
    if key == "bf16-emulated":
        # No bf16 tensor cores (T4, V100): cuBLAS falls back to fp32 arithmetic on CUDA cores.
        return float(gpu.peak("fp32")) * 1e12
    return float(gpu.peak(key)) * 1e12


def _wave_efficiency(batch: int, m: int, n: int, sm_count: int, k: int = 0) -> float:
    """Share of the GPU busy when a (batch x m x n) output is cut into tiles, one tile per SM a wave.

    cuBLAS picks the tile shape and, when too few tiles fill the SMs, splits the reduction (split-K)
    at some cost; the best of those choices is taken. Every choice's time only grows with the
    problem, so the minimum does too (more work is never predicted faster).
    """
    if batch <= 0 or m <= 0 or n <= 0 or sm_count <= 0:
        return 1.0
    ideal = batch * m * n
    best = math.inf
    splits = _SPLIT_K if k >= 256 else (1,)
    for tm, tn, rel in _TILES:
        tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
        for split in splits:
            work = tiles * split
            cost = math.ceil(work / sm_count) * sm_count * tm * tn / split / rel
            if split > 1:
                cost /= _SPLIT_K_EFF
            best = min(best, cost)
    return min(1.0, ideal / best)


def _shape(op: OpRecord, i: int) -> tuple[int, ...]:
    return op.input_shapes[i] if i < len(op.input_shapes) else ()


def gemm_dims(op: OpRecord) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a matmul-class op; zeros when the shapes don't say."""
    shapes = [s for s in op.input_shapes if len(s) >= 2]
    if len(shapes) < 2:
        return 0, 0, 0, 0
    a, b = shapes[-2], shapes[-1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return batch, a[-2], b[-1], a[-1]


def conv_dims(op: OpRecord) -> tuple[int, int, int, int, int]:
    """(implicit-GEMM m, n, k, input channels per group, groups) of a convolution (or its backward)."""
    backward = "backward" in op.op
    x = _shape(op, 1 if backward else 0)
    w = _shape(op, 2 if backward else 1)
    out = _shape(op, 0) if backward else (op.output_shapes[0] if op.output_shapes else ())
    if len(x) < 3 or len(w) < 3 or len(out) < 3:
        return 0, 0, 0, 0, 1
    groups = int(op.attrs.get("groups", 0) or 0) or max(1, x[1] // max(1, w[1]))
    return out[0] * math.prod(out[2:]), out[1], math.prod(w[1:]), w[1], groups


def conv_flops(op: OpRecord) -> int:
    """FLOPs of a convolution or its backward from the shapes, groups included.

    torch's flop formula for ``convolution_backward`` counts the weight gradient of a grouped
    convolution as if it were dense (x ``groups``: 768x too much for a ConvNeXt depthwise layer),
    so conv FLOPs are recomputed here; the trace's figure is kept where the shapes don't say.
    """
    m, n, k, _, _ = conv_dims(op)
    if not m:
        return op.flops
    fwd = 2 * m * n * k
    if "backward" not in op.op:
        return fwd
    x, w = _shape(op, 1), _shape(op, 2)
    outs = list(op.output_shapes)
    passes = int(x in outs) + int(w in outs)   # grad_input and/or grad_weight
    return fwd * (passes or 2)


def attention_dims(op: OpRecord) -> tuple[int, int]:
    """(batch x heads, query length) of an SDPA op: flash kernels tile over both."""
    q = _shape(op, 0 if "backward" not in op.op else 1)
    if len(q) < 3:
        return 0, 0
    return math.prod(q[:-2]), q[-2]


def attention_flops(op: OpRecord) -> int:
    """FLOPs of SDPA where the trace has none (the CPU kernels have no formula)."""
    q = _shape(op, 0 if "backward" not in op.op else 1)
    k = _shape(op, 1 if "backward" not in op.op else 2)
    if len(q) < 3 or len(k) < 3:
        return 0
    fwd = 4 * math.prod(q[:-2]) * q[-2] * k[-2] * q[-1]
    return int(fwd * 2.5) if "backward" in op.op else fwd


# Ops that always launch more than one kernel, whatever the tracer counted.
_MIN_KERNELS = {"aten.convolution_backward": 2, "aten.native_batch_norm_backward": 1,
                "aten.embedding_dense_backward": 3}


def _kernels(op: OpRecord, cls: str) -> int:
    if cls == VIEW:
        return 0
    return max(1, int(op.kernel_count), _MIN_KERNELS.get(packet_of(op.op), 1))


@dataclass(frozen=True)
class OpFeatures:
    """What the time of one op depends on, apart from the fitted parameters.

    ``compute_base_s`` is the FLOP time at 100% efficiency (wave quantisation included),
    ``memory_base_s`` the byte time at 100% of datasheet bandwidth; the efficiency keys name the
    calibration parameter that divides each (None: a fixed structural efficiency, in ``*_fixed``).
    """

    cls: str
    rate: str
    compute_base_s: float
    compute_eff_key: str | None
    compute_fixed: float         # constant factor on the compute efficiency
    cuda_core: bool
    memory_base_s: float
    memory_eff_key: str
    memory_fixed: float
    kernels: int
    roofline_s: float = 0.0      # plain roofline: datasheet peak and bandwidth, no efficiency, no latency
    backward: bool = False       # a backward-phase kernel of a tensor class (dgrad/wgrad run less well)
    balance: float = 0.0         # the GPU's FLOPs per byte of DRAM at this op's peak (tensor classes)


def op_features(op: OpRecord, gpu, precision: str) -> OpFeatures:
    cls = classify(op)
    kernels = _kernels(op, cls)
    bw_bytes_per_s = float(gpu.memory_bandwidth_gbs) * 1e9
    memory_base_s = (op.bytes_read + op.bytes_written) / bw_bytes_per_s if kernels else 0.0
    flops = op.flops
    if cls in TENSOR_CLASSES and kernels:
        # cuDNN's dgrad/wgrad kernels run well below its fprop ones; cuBLAS GEMMs do not care.
        backward = op.phase == "backward" and cls == "conv"
        rate = rate_key(cls, precision, gpu, op)
        cuda_core = rate in ("fp32", "bf16-emulated")
        if cls == "matmul":
            batch, m, n, k = gemm_dims(op)
            wave = _wave_efficiency(batch, m, n, gpu.sm_count, k)
        elif cls == "attention":
            flops = flops or attention_flops(op)
            batch_heads, q_len = attention_dims(op)
            wave = _wave_efficiency(batch_heads, q_len, 128, gpu.sm_count)
        else:
            flops = conv_flops(op)
            m, n, k, cin_per_group, groups = conv_dims(op)
            if groups > 1 and cin_per_group < _DEPTHWISE_MAX_GROUP_CHANNELS:
                # Depthwise: a few MACs per byte on CUDA cores; bandwidth-bound and poorly coalesced.
                roof = max(flops / _peak_flops(gpu, "fp32"), memory_base_s)
                return OpFeatures(cls, "fp32", flops / _peak_flops(gpu, "fp32"), None, 0.5, False,
                                  memory_base_s, "depthwise_mem_eff", 1.0, kernels, roof, backward)
            wave = _wave_efficiency(1, m, n, gpu.sm_count, k)
        roof = max(flops / _peak_flops(gpu, rate), memory_base_s)
        balance = _peak_flops(gpu, rate) / bw_bytes_per_s
        return OpFeatures(cls, rate, flops / (_peak_flops(gpu, rate) * wave), f"{cls}_eff", 1.0, cuda_core,
                          memory_base_s, "mem_eff", 1.0, kernels, roof, backward, balance)
    factor = _MEM_CLASS_FACTOR.get(cls, 1.0)
    key = "mem_eff"
    compute_base_s = flops / _peak_flops(gpu, "fp32") if kernels else 0.0
    return OpFeatures(cls, "bandwidth", compute_base_s, None, 0.5, False, memory_base_s, key,
                      factor, kernels, max(compute_base_s, memory_base_s))


def kernel_device_s(compute_base_s, compute_eff, memory_base_s, memory_eff, kernels, latency_s):
    """GPU time of kernels (floats or numpy arrays alike): the roofline bound plus launch latency."""
    return np.maximum(compute_base_s / compute_eff, memory_base_s / memory_eff) + kernels * latency_s


def efficiencies(f: OpFeatures, cal: Calibration, arch: str) -> tuple[float, float]:
    """(compute efficiency, memory efficiency) of one op under a calibration."""
    ce = f.compute_fixed * cal.compute_factor(arch)
    if f.compute_eff_key:
        ce *= cal.p(f.compute_eff_key)
    if f.cuda_core:
        ce *= cal.p("cuda_core_factor")
    if f.rate == "tf32":
        # TF32 operands are 4 bytes: twice the shared-memory/L2 traffic per FLOP of fp16/bf16.
        ce *= cal.p("tf32_factor")
    if f.balance > 0:
        # GPUs with many FLOPs per byte (A100, H100, B200) reach a smaller share of their tensor
        # peak on the same GEMM than balanced ones (GeForce): operands must arrive faster than
        # caches and shared memory deliver.
        ce *= (f.balance / BALANCE_REF) ** -cal.p("balance_exponent")
    me = cal.p(f.memory_eff_key) * f.memory_fixed * cal.memory_factor(arch)
    if f.cls in ("norm", "reduction"):
        me *= cal.p("norm_factor")
    if f.backward:
        if f.compute_eff_key:
            ce *= cal.p("backward_factor")
        else:   # depthwise: cuDNN's depthwise wgrad/dgrad kernels are far slower than its fprop
            me *= cal.p("depthwise_backward_factor")
            ce *= cal.p("depthwise_backward_factor")
    return max(ce, 1e-4), max(me, 1e-4)


def host_s(kernels: int, cal: Calibration) -> float:
    # A foreach op is one host call that launches several kernels.
    if kernels == 0:
        return cal.p("host_view_s")
    return cal.p("host_op_s") * (1.0 + 0.1 * (kernels - 1))


def op_time(op: OpRecord, gpu, precision: str, cal: Calibration) -> OpTime:
    f = op_features(op, gpu, precision)
    if f.kernels == 0:
        return OpTime(f.cls, 0.0, host_s(0, cal), 0.0, 0.0, 0, "none")
    ce, me = efficiencies(f, cal, gpu.arch)
    compute_s, memory_s = f.compute_base_s / ce, f.memory_base_s / me
    device_s = float(kernel_device_s(f.compute_base_s, ce, f.memory_base_s, me, f.kernels,
                                     cal.p("kernel_latency_s")))
    return OpTime(f.cls, device_s, host_s(f.kernels, cal), compute_s, memory_s, f.kernels, f.rate)
