"""The time of one traced operator on one GPU: per-kernel laws x calibrated factors + launch cost.

``op_time(op, gpu, precision, cal, stack)`` is pure; ``op_times`` times a trace's ops, each distinct
op once (a model's repeated blocks repeat its ops). Per class:

* matmul / conv / attention: the tiled laws of ``gpuwise.runtime.laws`` (waves x time per wave,
  fitted on NeuSight's fp32 kernel data) at the peak of the precision the kernel runs in. fp32 on
  CUDA cores is the law as fitted; tensor-core rates (TF32, fp16, bf16) scale it by ``tensor_eff``
  (fitted on the end-to-end training side: the share of the fp32 law's utilisation that tensor-core
  kernels keep; an assumption that the same wave structure holds). Convolution backward is the two
  GEMMs of the transposed shapes (dgrad, wgrad); cuDNN's NCHW half-precision convolutions add two
  layout transposes (channels-last avoids them).
* depthwise / narrow grouped convs: CUDA cores and bandwidth, never tensor cores.
* everything else: bytes as the CUDA kernels move them (``cuda_bytes``: batch norm in training
  reads its input twice, a norm backward reads it twice more) over bandwidth x the streaming law.

Each kernel also pays a GPU-side latency; the host side (``gpuwise.runtime.host``) is returned apart,
since it overlaps with GPU work and only matters when it is the larger of the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from operator import attrgetter

import numpy as np

from gpuwise.runtime.calibration import Calibration
from gpuwise.runtime.classify import VIEW, classify, packet_of
from gpuwise.runtime.geometry import (attention_dims, attention_flops, causal_share, conv_dims, conv_flops, conv_gemms,
                                      conv_shapes, gemm_dims, input_shape)
from gpuwise.runtime.host import host_s
from gpuwise.runtime.indexing import indexing_bytes
from gpuwise.runtime.laws import (eager_streaming_limit_bytes_per_s, gpu_power_terms, load_laws, streaming_time_s,
                                  tiled_time_s)
from gpuwise.runtime.rates import rate_peak_flops_per_s
from gpuwise.runtime.rnn import rnn_kernels
from gpuwise.runtime.stack import DEFAULT_STACK, Stack
from gpuwise.trace.records import OpRecord, dtype_bytes
from gpuwise.trace.rnn_shape import shape_of
from gpuwise.workload.precision import BF16_EMULATED, parse

TENSOR_CLASSES = ("matmul", "conv", "attention", "rnn")
# Memory-bound classes relative to plain elementwise kernels (structure, not fitted: too little data).
_MEM_CLASS_FACTOR = {"embedding": 0.5, "copy": 1.0, "optimizer": 1.0, "elementwise": 1.0, "other": 0.9}
_DEPTHWISE_MAX_GROUP_CHANNELS = 16
CUDA_CORE_RATES = ("fp32", BF16_EMULATED)
# Bytes of one GEMM operand element on CUDA cores (bf16 emulated in fp32 arithmetic reads bf16).
RATE_OPERAND_BYTES = {"fp32": 4, BF16_EMULATED: 2}


@dataclass(frozen=True)
class OpTime:
    cls: str            # class from gpuwise.runtime.classify, or "view"
    device_s: float     # GPU time incl. per-kernel latency
    host_s: float       # eager host time to issue it
    compute_s: float    # FLOP-bound part
    memory_s: float     # byte-bound part
    kernels: int
    rate: str           # peak used: a Precision.rate_key (fp32, tf32, fp16, bf16, BF16_EMULATED) or "bandwidth"


def _rate(cls: str, precision: str, gpu, op: OpRecord) -> str:
    """The peak the kernel runs at: ``Precision.rate_key``, the one answer calibration uses too."""
    return parse(precision).rate_key(gpu, cls, op.input_dtypes[0] if op.input_dtypes else None)


# Ops that always launch more than one kernel, whatever the tracer counted.
_MIN_KERNELS = {"aten.convolution_backward": 2, "aten.native_batch_norm_backward": 2,
                "aten.native_layer_norm_backward": 2, "aten.embedding_dense_backward": 3}


def _kernels(op: OpRecord, cls: str) -> int:
    if cls == VIEW:
        return 0
    return max(1, int(op.kernel_count), _MIN_KERNELS.get(packet_of(op.op), 1))


# Passes over the input a norm kernel makes on CUDA, in units of the input tensor (reads + writes):
# batch norm in training reads x for the statistics, then reads x and writes y; its backward reduces
# (reads dy, x) then writes dx (reads dy, x, writes dx); layer norm keeps a row in registers (reads
# x, writes y), its backward computes dx (dy, x -> dx) and the weight gradients (dy, x) apart.
_NORM_PASSES = {"forward_train": 3, "forward_infer": 2, "layer_forward": 2, "backward": 5}
_SOFTMAX_PASSES = {"forward": 2, "backward": 3}


def cuda_bytes(op: OpRecord, cls: str, training: bool) -> float:
    """Bytes the CUDA kernels of ``op`` move through DRAM (the trace counts inputs + outputs once; an
    indexing kernel touches only what it selects, ``indexing_bytes``)."""
    traced = float(op.bytes_read + op.bytes_written)
    touched = indexing_bytes(op)
    if touched is not None:
        return float(touched)
    x = input_shape(op, 1 if "backward" in op.op and cls == "norm" else 0)
    if not x or cls not in ("norm", "reduction"):
        return traced
    dtype = op.input_dtypes[0] if op.input_dtypes else "float32"
    numel_bytes = math.prod(x) * dtype_bytes(dtype)
    name = packet_of(op.op)
    if cls == "norm":
        if "backward" in name:
            passes = _NORM_PASSES["backward"]
        elif "layer_norm" in name or "rms_norm" in name:
            passes = _NORM_PASSES["layer_forward"]
        elif "no_training" in name or not training:
            passes = _NORM_PASSES["forward_infer"]
        else:
            passes = _NORM_PASSES["forward_train"]
        return max(traced, passes * numel_bytes)
    if "softmax" in name:
        return max(traced, _SOFTMAX_PASSES["backward" if "backward" in name else "forward"] * numel_bytes)
    return traced


@dataclass(frozen=True)
class OpFeatures:
    """What the time of one op depends on, apart from the fitted end-to-end factors.

    ``compute_base_s``: the kernel law's time at the rate's peak (waves, utilisation); divided by
    the product of the calibration factors named in ``compute_keys``. ``memory_base_s``: the
    streaming law's time for the CUDA bytes; divided by the factors in ``memory_keys``.
    ``serial_s``: extra streaming kernels that run before/after (layout transposes, eager attention's
    score passes). ``memory_fixed`` is a structural factor on the memory efficiency.
    """

    cls: str
    rate: str
    compute_base_s: float
    compute_keys: tuple[str, ...]
    memory_base_s: float
    memory_keys: tuple[str, ...]
    kernels: int
    memory_fixed: float = 1.0
    serial_s: float = 0.0
    serial_key: str | None = None    # calibration factor on serial_s (None: 1)
    roofline_s: float = 0.0      # plain roofline: datasheet peak and bandwidth, no efficiency, no latency


def unvectorized(op: OpRecord) -> bool:
    """Whether PyTorch runs this elementwise op without vector loads (``CUDALoops.cuh``, ``gpu_kernel_impl``):
    a tensor operand (more than one element) of another shape than the output (a broadcast: the legacy kernel
    and its offset calculator), or a floating operand of another floating dtype than a floating output
    (``needs_dynamic_casting``: the unrolled kernel with ``LoadWithCast``). A contiguous same-dtype op takes
    ``launch_vectorized_kernel``; so do comparisons and masks, whose kernels are typed for their bool or
    integer operands. Strides are not traced, so a same-shape operand is taken as contiguous."""
    if not op.output_shapes or not op.output_dtypes:
        return False
    out_shape, out_dtype = tuple(op.output_shapes[0]), op.output_dtypes[0]
    for shape, dtype in zip(op.input_shapes, op.input_dtypes):
        if math.prod(shape) <= 1:
            continue
        if tuple(shape) != out_shape:
            return True
        if dtype != out_dtype and _is_float(dtype) and _is_float(out_dtype):
            return True
    return False


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _streaming(law_cls: str, nbytes: float, gpu, *, per_sm_limited: bool = False) -> float:
    """Streaming law time of ``nbytes``; ``per_sm_limited``: an unvectorized PyTorch elementwise kernel
    (``unvectorized``), timed at the slower of the elementwise law and the per-SM limit of what one element a
    load keeps in flight (``laws.eager_streaming_limit_bytes_per_s``)."""
    laws = load_laws()
    limit = (eager_streaming_limit_bytes_per_s(laws, gpu.sm_count, gpu.boost_clock_hz)
             if per_sm_limited and law_cls == "elementwise" else math.inf)
    return float(streaming_time_s(laws.streaming[law_cls], nbytes,
                                  bandwidth_bytes_per_s=float(gpu.memory_bandwidth_gbs) * 1e9, limit_bytes_per_s=limit))


def _tiled(law_cls: str, gemms, gpu, peak: float, rate: str, *, gemm: bool = True) -> float:
    """Law time of GEMMs at ``peak`` x the share of it the GPU sustains on dense kernels (its level,
    ``laws.PowerLevel``: issue width from FP32 lanes per SM, and a power roofline from TDP per FLOP/s by
    process node). fp32 on CUDA cores: the law and levels as fitted on NeuSight's fp32 kernels. Tensor-core
    GEMMs (matmul class): the tensor law measured on vidur's fp16 GEMMs, where the laws file has it
    (``measured_tensor_law``). Other tensor-core kernels (convolutions, fused attention; the data has none;
    ``gemm`` False) keep the fp32 law's wave structure (tiles, waves, ramp, split-K) at full
    utilisation and without its operand term; their own utilisation is the fitted ``tensor_eff`` (or
    ``attention_eff``) that ``efficiencies`` divides by."""
    laws = load_laws()
    law = laws.tiled[law_cls]
    measured = measured_tensor_law(law_cls) if gemm and rate not in CUDA_CORE_RATES else None
    if rate in CUDA_CORE_RATES:
        # cuDNN's convolutions (Winograd, FFT) draw other power per direct-convolution FLOP: a level of their own
        level = laws.level("cuda-core-conv" if law_cls == "conv" and "cuda-core-conv" in laws.levels
                           else "cuda-core")
    else:
        level = laws.level("tensor")
        law = measured or replace(law, u_max=1.0, l2_reuse=0.0)
    issued, ratio = gpu_power_terms(level, gpu, peak)
    bw = float(gpu.memory_bandwidth_gbs) * 1e9
    if measured is not None:   # the CUDA-core alternative cuBLAS may pick for a small half-precision GEMM
        core = laws.level("cuda-core")
        fp32_issued, fp32_ratio = gpu_power_terms(core, gpu, rate_peak_flops_per_s(gpu, "fp32"))
    total = 0.0
    for b, m, n, k in gemms:
        if b > 0 and m > 0 and n > 0 and k > 0:
            t = float(tiled_time_s(law, b, m, n, k, sm_count=gpu.sm_count, peak_flops_per_s=issued,
                                   bandwidth_bytes_per_s=bw, elem_bytes=RATE_OPERAND_BYTES.get(rate, 4),
                                   power_ratio=ratio, power_exponent=level.exponent))
            if measured is not None:
                # cuBLAS's heuristics keep CUDA-core kernels among the candidates: a small GEMM whose
                # tensor-core kernel pays its ramp runs as an fp32 one when that is faster.
                t = min(t, float(tiled_time_s(laws.tiled[law_cls], b, m, n, k, sm_count=gpu.sm_count,
                                              peak_flops_per_s=fp32_issued, bandwidth_bytes_per_s=bw,
                                              elem_bytes=RATE_OPERAND_BYTES["fp32"], power_ratio=fp32_ratio,
                                              power_exponent=core.exponent)))
            total += t
    return total


def measured_tensor_law(law_cls: str):
    """The tensor-core law measured for a matmul-class kernel (vidur's GEMMs: one law for linear and
    batched GEMMs alike); None for other classes or a laws file without one."""
    return load_laws().tensor.get("linear") if law_cls in ("linear", "bmm") else None


def _tensor_keys(rate: str, measured: bool = False) -> tuple[str, ...]:
    """Calibration factors on a tensor-class kernel's time: none on CUDA cores, nor ``tensor_eff`` where
    the tensor-core law itself is measured (``measured``)."""
    if rate in CUDA_CORE_RATES:
        return ()
    keys = () if measured else ("tensor_eff",)
    return keys + ("tf32_factor",) if rate == "tf32" else keys


def _layout_transposes(op: OpRecord, stack: Stack, rate: str, gpu) -> tuple[float, int]:
    """cuDNN runs half-precision tensor-core convolutions in NHWC: an NCHW model pays a transpose of
    the input and of the output of each (forward; dy, x and dx in backward). Channels-last does not,
    nor does torch.compile (Inductor's ``layout_optimization``, on by default, makes convolutions
    channels-last)."""
    if rate not in ("fp16", "bf16") or stack.compile or op.attrs.get("channels_last", stack.channels_last):
        return 0.0, 0
    x, _, out = conv_shapes(op)
    if len(x) < 4 or len(out) < 4:
        return 0.0, 0
    elem = dtype_bytes(op.input_dtypes[0] if op.input_dtypes else "float16")
    tensors = math.prod(x) + math.prod(out) + (math.prod(x) if "backward" in op.op else 0)
    kernels = 3 if "backward" in op.op else 2
    return _streaming("elementwise", 2 * tensors * elem, gpu), kernels


def _eager_attention(op: OpRecord, gpu, precision: str, stack: Stack):
    """Attention as transformers' eager implementation runs it: two (forward) or four (backward)
    batched GEMMs and the batch x heads x seq^2 scores written and read by scale, mask, softmax and
    dropout kernels (forward ~8 passes over the scores in training, 6 in inference; backward 8)."""
    bh, q_len, k_len, d = attention_dims(op)
    backward = "backward" in op.op
    rate = _rate("matmul", precision, gpu, op)
    gemms = [(bh, q_len, k_len, d), (bh, q_len, d, k_len)]
    if backward:
        gemms = gemms + [(bh, k_len, d, q_len), (bh, q_len, k_len, d)]
    elem = dtype_bytes(op.input_dtypes[0] if op.input_dtypes else "float32")
    passes = 8 if backward or stack.training else 6
    serial = _streaming("softmax", passes * bh * q_len * k_len * elem, gpu)
    kernels = len(gemms) + (3 if backward else 4)
    return rate, _tiled("bmm", gemms, gpu, rate_peak_flops_per_s(gpu, rate), rate), serial, kernels


def _rnn_features(op: OpRecord, gpu, rate: str, peak: float, traced_bytes: float, bw_bytes_per_s: float) -> OpFeatures:
    """cuDNN's fused RNN (``runtime.rnn``): its GEMMs under the GEMM law, its per-step pointwise kernels
    one after another (``serial_s``), a launch latency for each kernel; never faster than streaming its
    tensors and, where a recurrent weight does not fit in the L2, that weight once a step."""
    elem = dtype_bytes(op.input_dtypes[0]) if op.input_dtypes else 4
    k = rnn_kernels(shape_of(op.attrs), backward="backward" in op.op, elem_bytes=elem,
                    weight_grad=bool(op.attrs.get("weight_grad", True)))
    comp = sum(n * _tiled("linear", [gemm], gpu, peak, rate) for gemm, n, _ in k.gemms)
    serial = _streaming("elementwise", k.pointwise * k.pointwise_bytes, gpu)
    moved = traced_bytes + k.weight_rereads_bytes(elem, int(gpu.l2_bytes or 0))
    keys = _tensor_keys(rate, measured_tensor_law("linear") is not None)
    return OpFeatures("rnn", rate, comp, keys, _streaming("elementwise", moved, gpu), (), k.kernels, serial_s=serial,
                      roofline_s=max(op.flops / peak, moved / bw_bytes_per_s))


def op_features(op: OpRecord, gpu, precision: str, stack: Stack = DEFAULT_STACK) -> OpFeatures:
    cls = classify(op)
    kernels = _kernels(op, cls)
    if not kernels:
        return OpFeatures(cls, "none", 0.0, (), 0.0, (), 0)
    bw_bytes_per_s = float(gpu.memory_bandwidth_gbs) * 1e9
    traced_bytes = float(op.bytes_read + op.bytes_written)
    if cls in TENSOR_CLASSES:
        rate = _rate(cls, precision, gpu, op)
        peak = rate_peak_flops_per_s(gpu, rate)
        memory_s = _streaming("elementwise", traced_bytes, gpu)
        if cls == "rnn":
            return _rnn_features(op, gpu, rate, peak, traced_bytes, bw_bytes_per_s)
        if cls == "attention":
            flops = op.flops or attention_flops(op)
            roof = max(flops / peak, traced_bytes / bw_bytes_per_s)
            if stack.attention == "eager":
                rate, comp, serial, k = _eager_attention(op, gpu, precision, stack)
                return OpFeatures(cls, rate, comp, _tensor_keys(rate, measured_tensor_law("bmm") is not None),
                                  memory_s, (), k, serial_s=serial,
                                  roofline_s=roof)
            bh, q_len, k_len, _ = attention_dims(op)
            if op.attrs.get("is_causal"):
                flops *= causal_share(q_len, k_len)
            f = fused_attention_features(bh, q_len, k_len, flops, traced_bytes, gpu, rate)
            return replace(f, kernels=kernels, roofline_s=max(flops / peak, traced_bytes / bw_bytes_per_s))
        if cls == "matmul":
            gemm = gemm_dims(op)
            flops = op.flops
            law_cls = "bmm" if gemm[0] > 1 else "linear"
            comp = _tiled(law_cls, [gemm], gpu, peak, rate) if gemm[1] else flops / peak
            roof = max(flops / peak, traced_bytes / bw_bytes_per_s)
            measured = bool(gemm[1]) and measured_tensor_law(law_cls) is not None
            return OpFeatures(cls, rate, comp, _tensor_keys(rate, measured), memory_s, (), kernels, roofline_s=roof)
        flops = conv_flops(op)
        _, _, _, cin_per_group, groups = conv_dims(op)
        backward = "backward" in op.op
        if groups > 1 and cin_per_group < _DEPTHWISE_MAX_GROUP_CHANNELS:
            # Depthwise: a few MACs per byte on CUDA cores; bandwidth-bound and poorly coalesced.
            fp32 = rate_peak_flops_per_s(gpu, "fp32")
            keys = ("depthwise_mem_eff", "depthwise_backward_factor") if backward else ("depthwise_mem_eff",)
            roof = max(flops / fp32, traced_bytes / bw_bytes_per_s)
            return OpFeatures(cls, "fp32", flops / fp32, (), memory_s, keys, kernels, roofline_s=roof)
        # The conv law was fitted on 3x3 convolutions (cuDNN's Winograd and implicit-GEMM mix); a 1x1
        # convolution is a plain GEMM, and wgrad a small output over a huge reduction (N Ho Wo) that
        # cuDNN splits like cuBLAS's split-K: both run under the GEMM law.
        comp = sum(_tiled("linear" if kind in ("wgrad", "gemm") else "conv", [gemm], gpu, peak, rate, gemm=False)
                   for kind, gemm in conv_gemms(op))
        keys = _tensor_keys(rate) + (("backward_factor",) if backward else ())
        serial, extra = _layout_transposes(op, stack, rate, gpu)
        roof = max(flops / peak, traced_bytes / bw_bytes_per_s)
        return OpFeatures(cls, rate, comp, keys, memory_s, (), kernels + extra, serial_s=serial,
                          serial_key="layout_transpose_factor" if extra else None, roofline_s=roof)
    # The norm law was fitted on layer norm's row kernel; batch and group norm run as per-channel
    # reductions and elementwise passes (counted in cuda_bytes) at the elementwise law.
    row_norm = cls == "norm" and any(n in op.op for n in ("layer_norm", "rms_norm"))
    memory_s = _streaming(_streaming_law(cls, row_norm), cuda_bytes(op, cls, stack.training), gpu,
                          per_sm_limited=cls == "elementwise" and unvectorized(op))
    compute_s = op.flops / rate_peak_flops_per_s(gpu, "fp32")
    return OpFeatures(cls, "bandwidth", compute_s, (), memory_s, (), kernels,
                      memory_fixed=_MEM_CLASS_FACTOR.get(cls, 1.0),
                      roofline_s=max(compute_s, traced_bytes / bw_bytes_per_s))


def kernel_device_s(compute_base_s, compute_eff, memory_base_s, memory_eff, serial_s, kernels, latency_s):
    """GPU time of kernels (floats or numpy arrays alike): the slower of compute and memory, the
    serial extra kernels, and the launch latency of each kernel."""
    return np.maximum(compute_base_s / compute_eff, memory_base_s / memory_eff) + serial_s + kernels * latency_s


def efficiencies(f: OpFeatures, cal: Calibration) -> tuple[float, float]:
    """(compute factor, memory factor) of one op under a calibration: each at most 1."""
    ce = math.prod(cal.p(k) for k in f.compute_keys)
    me = f.memory_fixed * math.prod(cal.p(k) for k in f.memory_keys)
    return max(ce, 1e-4), max(me, 1e-4)


def op_time(op: OpRecord, gpu, precision: str, cal: Calibration, stack: Stack = DEFAULT_STACK) -> OpTime:
    f = op_features(op, gpu, precision, stack)
    host = host_s(f.cls, f.kernels, op.phase, stack)
    if f.kernels == 0:
        return OpTime(f.cls, 0.0, host, 0.0, 0.0, 0, "none")
    ce, me = efficiencies(f, cal)
    compute_s, memory_s = f.compute_base_s / ce, f.memory_base_s / me
    return OpTime(f.cls, device_time_s(f, cal), host, compute_s, memory_s, f.kernels, f.rate)


def device_time_s(f: OpFeatures, cal: Calibration) -> float:
    """GPU time of the kernels ``f`` describes under a calibration (``kernel_device_s``)."""
    ce, me = efficiencies(f, cal)
    serial_s = f.serial_s * (cal.p(f.serial_key) if f.serial_key else 1.0)
    return float(kernel_device_s(f.compute_base_s, ce, f.memory_base_s, me, serial_s, f.kernels,
                                 cal.p("kernel_latency_s")))


# Every field of an OpRecord but its position and module: what op_time may read (attrs apart: a dict).
_TIMED_FIELDS = attrgetter(*(f.name for f in fields(OpRecord) if f.name not in ("index", "module", "attrs")))


def op_key(op: OpRecord) -> tuple:
    """Equal for two records that ``op_time`` cannot tell apart (the same op at another position or
    in another module). Unhashable where an attribute's value is (a list)."""
    return _TIMED_FIELDS(op), tuple(op.attrs.items())


def op_times(ops, gpu, precision: str, cal: Calibration, stack: Stack = DEFAULT_STACK) -> list[OpTime]:
    """``op_time`` of each op, computed once per distinct ``op_key`` (the same OpTime for each)."""
    seen: dict[tuple, OpTime] = {}
    out = []
    for op in ops:
        key = op_key(op)
        try:
            t = seen.get(key)
        except TypeError:    # an unhashable attribute: timed on its own
            key = t = None
        if t is None:
            t = op_time(op, gpu, precision, cal, stack)
            if key is not None:
                seen[key] = t
        out.append(t)
    return out


# ---- Kernels given by their shapes, not by a traced op: the closed form of decoder LLMs
# (gpuwise.runtime.llm_kernels) times its GEMMs, attention and streaming kernels with these, so that
# both paths apply the same laws, calibration factors and kernel latency.

def _streaming_law(cls: str, row_norm: bool = False) -> str:
    """The streaming law of a memory-bound class: the norm law for a row norm (layer/RMS norm's row
    kernel), the softmax law for reductions, the elementwise law otherwise."""
    return "norm" if row_norm else ("softmax" if cls == "reduction" else "elementwise")


def gemm_time_s(gemms, gpu, rate: str, cal: Calibration, *, elem_bytes: float, latency: bool = True) -> float:
    """GPU time of matmul kernels given as (batch, m, n, k), each timed as ``op_time`` times a traced
    ``mm`` (batch 1) or ``bmm`` of that shape: the tiled law (``_tiled``) over the calibration's factors,
    never below streaming its operands and output (``elem_bytes`` each), plus the kernel latency.
    ``latency`` False: the arithmetic alone (no streaming floor, no latency)."""
    peak = rate_peak_flops_per_s(gpu, rate)
    total = 0.0
    for b, m, n, k in gemms:
        law_cls = "bmm" if b > 1 else "linear"
        keys = _tensor_keys(rate, measured_tensor_law(law_cls) is not None)
        comp = _tiled(law_cls, [(b, m, n, k)], gpu, peak, rate)
        if not latency:
            total += comp / efficiencies(OpFeatures("matmul", rate, comp, keys, 0.0, (), 1), cal)[0]
            continue
        memory_s = _streaming("elementwise", b * (m * k + k * n + m * n) * elem_bytes, gpu)
        total += device_time_s(OpFeatures("matmul", rate, comp, keys, memory_s, (), 1), cal)
    return total


def fused_attention_features(bh, q_len, k_len, flops: float, nbytes: float, gpu, rate: str) -> OpFeatures:
    """A fused (flash / memory-efficient) SDPA kernel of ``flops`` moving ``nbytes``: tiles over batch x
    heads x query blocks, at the fused law's utilisation (``attention_eff``)."""
    peak = rate_peak_flops_per_s(gpu, rate)
    k_equiv = flops / (2.0 * max(1, bh) * max(1, q_len) * max(1, k_len)) if bh else 0
    comp = _tiled("bmm", [(bh, q_len, k_len, k_equiv)], gpu, peak, rate, gemm=False) if bh else flops / peak
    return OpFeatures("attention", rate, comp, ("attention_eff",), _streaming("elementwise", nbytes, gpu), (), 1)


def streaming_features(cls: str, nbytes: float, kernels: int, gpu, *, row_norm: bool = False,
                       per_sm_limited: bool = False) -> OpFeatures:
    """``kernels`` memory-bound kernels of class ``cls`` moving ``nbytes`` together (as CUDA moves them):
    the streaming law is linear in bytes, so one sum times them all as ``op_time`` times each.
    ``per_sm_limited``: unvectorized elementwise kernels (``unvectorized``), as ``op_features`` times them."""
    nbytes_s = _streaming(_streaming_law(cls, row_norm), nbytes, gpu, per_sm_limited=per_sm_limited and cls == "elementwise")
    return OpFeatures(cls, "bandwidth", 0.0, (), nbytes_s, (), kernels, memory_fixed=_MEM_CLASS_FACTOR.get(cls, 1.0))
