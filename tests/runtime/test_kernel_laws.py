"""Per-kernel laws and CUDA byte counts: bounded by physics on every catalog GPU (fast, no tracing)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.geometry import conv_flops, conv_gemms
from gpuwise.runtime.kernels import _tiled, cuda_bytes, op_features, op_time
from gpuwise.runtime.rates import rate_peak_flops_per_s
from gpuwise.runtime.laws import PRIOR, Laws, LawError, load_laws, streaming_time_s, tiled_time_s
from gpuwise.runtime.stack import Stack
from gpuwise.trace.records import OpRecord
from runtime_fakes import a100_like, conv, make_gpu, mm, pointwise

CAL = load_calibration()
PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16")


def conv_backward(n, c, h, w, cout, k=3, *, dtype="float32", grads=("input", "weight")) -> OpRecord:
    size = 2 if dtype in ("float16", "bfloat16") else 4
    x, wt, dy = (n, c, h, w), (cout, c, k, k), (n, cout, h, w)
    outs = tuple(s for g, s in (("input", x), ("weight", wt)) if g in grads)
    return OpRecord(
        index=0, op="aten.convolution_backward.default", phase="backward", module="conv",
        input_shapes=(dy, x, wt), input_dtypes=(dtype,) * 3, output_shapes=outs, output_dtypes=(dtype,) * len(outs),
        flops=0, bytes_read=(2 * n * c * h * w + cout * c * k * k) * size, bytes_written=n * c * h * w * size,
        attrs={"groups": 1, "stride": (1, 1)},
    )


def norm(shape, *, op="aten.native_batch_norm.default", phase="forward", dtype="float32") -> OpRecord:
    numel = int(np.prod(shape))
    return OpRecord(index=0, op=op, phase=phase, module="bn", input_shapes=(shape,), input_dtypes=(dtype,),
                    output_shapes=(shape,), output_dtypes=(dtype,), flops=0, bytes_read=numel * 4,
                    bytes_written=numel * 4)


def _ops():
    return [mm(m, k, n) for m, k, n in ((1, 1, 1), (32, 256, 256), (4096, 4096, 4096), (65536, 64, 8))] + [
        mm(8192, 8192, 8192, dtype="float16"), conv(1, 3, 224, 224, 64, k=7), conv(256, 64, 56, 56, 64),
        conv(256, 256, 14, 14, 256, k=1), conv(64, 96, 56, 56, 96, groups=96), conv_backward(128, 128, 28, 28, 128),
        pointwise(1 << 26), pointwise(100), norm((256, 64, 112, 112)),
        norm((256, 64, 112, 112), op="aten.native_batch_norm_backward.default", phase="backward"),
        norm((8192, 1024), op="aten.native_layer_norm.default"),
    ]


def _catalog_gpus():
    from gpuwise.catalog import load_catalog

    return load_catalog(user_file=False).gpus


def test_no_kernel_beats_the_datasheet_peak_or_bandwidth_on_any_catalog_gpu():
    for gpu in _catalog_gpus():
        bw = gpu.memory_bandwidth_gbs * 1e9
        for precision in PRECISIONS:
            for op in _ops():
                f = op_features(op, gpu, precision)
                t = op_time(op, gpu, precision, CAL)
                flops = conv_flops(op) if "conv" in op.op else op.flops
                if f.rate not in ("bandwidth", "none") and flops:
                    peak = gpu.peak("fp32" if f.rate == "bf16-emulated" else f.rate) * 1e12
                    assert flops / t.device_s <= peak * (1 + 1e-9), (gpu.id, precision, op.op, op.input_shapes)
                nbytes = cuda_bytes(op, f.cls, True)
                assert nbytes / t.device_s <= bw * (1 + 1e-9), (gpu.id, precision, op.op)


def test_shipped_laws_keep_every_utilisation_at_most_one():
    laws = load_laws()
    for law in laws.tiled.values():
        # u_max may reach its bound, 1: the law at the peak the SMs issue (conv's fp32 law does, under a power
        # level of its own: benchmarks/README.md, seventh session)
        assert 0 < law.u_max <= 1 and 0 <= law.split_k_eff <= 1 and law.wave_half >= 0 and (law.l2_reuse == 0 or law.l2_reuse >= 1)
        # The densest GEMM imaginable on a GPU with a lot of bandwidth per FLOP still stays under peak.
        t = tiled_time_s(law, 1, 1 << 16, 1 << 16, 1 << 16, sm_count=100, peak_flops_per_s=1e13,
                         bandwidth_bytes_per_s=1e13)
        assert 2 * (1 << 48) / t <= 1e13
    for law in laws.streaming.values():
        assert 0 < law.u_max <= 1
        assert streaming_time_s(law, 1e9, bandwidth_bytes_per_s=1e12) >= 1e-3


def test_laws_round_trip_and_a_malformed_file_is_a_clear_error():
    laws = load_laws()
    assert Laws.from_dict(json.loads(json.dumps(laws.to_dict()))) == dataclasses.replace(laws)
    assert Laws.from_dict(PRIOR.to_dict()).tiled.keys() == PRIOR.tiled.keys()
    with pytest.raises(LawError):
        Laws.from_dict({"tiled": {"linear": {"nonsense": 1}}, "streaming": {}})


def test_laws_take_arrays_and_floats_alike():
    law = load_laws().tiled["bmm"]
    kw = dict(sm_count=80, peak_flops_per_s=14e12, bandwidth_bytes_per_s=900e9)
    arr = tiled_time_s(law, np.array([1.0, 8.0]), np.array([64.0, 512.0]), np.array([64.0, 512.0]),
                       np.array([64.0, 512.0]), **kw)
    assert arr[0] == pytest.approx(tiled_time_s(law, 1, 64, 64, 64, **kw))
    assert arr[1] == pytest.approx(tiled_time_s(law, 8, 512, 512, 512, **kw))


def test_batch_norm_bytes_are_counted_as_the_cuda_kernels_move_them():
    shape = (64, 256, 56, 56)
    x_bytes = int(np.prod(shape)) * 4
    fwd = norm(shape)
    assert cuda_bytes(fwd, "norm", training=True) == 3 * x_bytes      # statistics pass, then normalise
    assert cuda_bytes(fwd, "norm", training=False) == 2 * x_bytes     # eval: one elementwise pass
    bwd = norm(shape, op="aten.native_batch_norm_backward.default", phase="backward")
    bwd = dataclasses.replace(bwd, input_shapes=(shape, shape))
    assert cuda_bytes(bwd, "norm", training=True) == 5 * x_bytes      # reduce (dy, x), then dx
    # And so a training batch norm takes longer than the traced bytes at full bandwidth would say.
    gpu = a100_like()
    assert op_time(fwd, gpu, "fp32", CAL).device_s > fwd.bytes_read * 1.5 / (gpu.memory_bandwidth_gbs * 1e9)


def test_conv_backward_is_the_gemms_of_the_transposed_shapes():
    both = conv_backward(64, 128, 28, 28, 256)
    kinds = [kind for kind, _ in conv_gemms(both)]
    assert kinds == ["dgrad", "wgrad"]
    (_, dgrad), (_, wgrad) = conv_gemms(both)
    assert dgrad == (1, 64 * 28 * 28, 128, 256 * 9) and wgrad == (1, 256, 128 * 9, 64 * 28 * 28)
    fwd_flops = 2 * 64 * 28 * 28 * 256 * 128 * 9
    assert conv_flops(both) == 2 * fwd_flops
    only_w = conv_backward(64, 128, 28, 28, 256, grads=("weight",))     # first layer: no input gradient
    assert conv_flops(only_w) == fwd_flops
    gpu = a100_like()
    assert op_time(only_w, gpu, "fp32", CAL).device_s < op_time(both, gpu, "fp32", CAL).device_s


def test_large_fp32_convolutions_on_a_v100_reach_most_of_its_peak():
    # Issue 16: V100 fp32 convolutions were predicted ~2x too slow (44% of peak).
    v100 = make_gpu("v100", arch="volta", sm=80, bw=900, fp32=15.7, tf32=None, fp16=125, bf16=None)
    op = conv(256, 256, 14, 14, 256)
    t = op_time(op, v100, "fp32", CAL)
    assert conv_flops(op) / t.device_s > 0.7 * 15.7e12


def test_amp_convolutions_in_nchw_pay_layout_transposes_that_channels_last_avoids():
    gpu = a100_like()
    op = conv(128, 256, 28, 28, 256, dtype="float16")
    nchw = op_time(op, gpu, "amp-fp16", CAL, Stack())
    nhwc = op_time(op, gpu, "amp-fp16", CAL, Stack(channels_last=True))
    assert nhwc.device_s < nchw.device_s and nhwc.kernels < nchw.kernels
    fp32 = conv(128, 256, 28, 28, 256)
    assert (op_time(fp32, make_gpu("old", tf32=None), "fp32", CAL, Stack(channels_last=True)).device_s
            == op_time(fp32, make_gpu("old", tf32=None), "fp32", CAL, Stack()).device_s)


RATES = ("fp32", "tf32", "fp16", "bf16")


def _dominates(a, b) -> bool:
    """``a`` has at least ``b``'s SMs, bandwidth, power budget (TDP: a 250 W A100 PCIe sustains less of the
    same peak than a 400 W SXM4), a process node no older (a FLOP's energy) and no more FP32 lanes sharing
    an issue slot (a datasheet rate such SMs do not issue) and, for every rate ``b`` has, its peak and peak
    per SM."""
    if a.sm_count < b.sm_count or a.memory_bandwidth_gbs < b.memory_bandwidth_gbs or a.tdp_w < b.tdp_w:
        return False
    if a.process_nm > b.process_nm or a.fp32_lanes_per_sm > b.fp32_lanes_per_sm:
        return False
    for rate in RATES:
        pb, pa = b.peak(rate), a.peak(rate)
        if pb and (not pa or pa < pb or pa / a.sm_count < pb / b.sm_count):
            return False
    return True


def test_a_gpu_larger_in_every_spec_is_never_predicted_slower():
    """Physics: more SMs, FLOP/s and bandwidth never slow a kernel. The old balance-slope law had an
    RTX 4090 running a fp32 GEMM at 3% of its peak, slower than a T4 (benchmarks/README.md)."""
    gpus = _catalog_gpus()
    ops = _ops()
    times = {(g.id, p): [op_time(op, g, p, CAL).device_s for op in ops] for g in gpus for p in PRECISIONS}
    pairs = [(a, b) for a in gpus for b in gpus if a.id != b.id and _dominates(a, b)]
    assert len(pairs) > 100                       # the check has teeth: the catalog has many such pairs
    slower = []
    for a, b in pairs:
        for p in PRECISIONS:
            for op, ta, tb in zip(ops, times[(a.id, p)], times[(b.id, p)]):
                if ta > tb * (1 + 1e-9):
                    slower.append((a.id, b.id, p, op.op, op.input_shapes, round(ta / tb, 2)))
    assert not slower, slower[:10]


def test_no_larger_gpu_is_slower_on_any_gemm_or_conv_shape_of_a_sweep():
    """The same physics over a sweep of GEMM shapes through the laws themselves (fp32 on CUDA cores and
    fp16 on tensor cores): a review found a power level taken at the busy SMs' share had an A10 1.26x
    slower than an RTX A4000 on a (1536, 64, 4096) GEMM that the hand-picked ops above never reach."""
    gpus = _catalog_gpus()
    pairs = [(a, b) for a in gpus for b in gpus if a.id != b.id and _dominates(a, b)]
    assert len(pairs) > 100
    shapes = [(1, m, n, k) for m in (64, 384, 1536, 8192) for n in (64, 512, 4096) for k in (64, 4096)]
    times = {}
    for g in gpus:
        for rate in ("fp32", "fp16"):
            peak = rate_peak_flops_per_s(g, rate)
            for law_cls in ("linear", "bmm", "conv"):
                times[g.id, rate, law_cls] = [_tiled(law_cls, [s], g, peak, rate) for s in shapes]
    slower = [(a.id, b.id, key[1:], shape, round(ta / tb, 3))
              for a, b in pairs for key in [k for k in times if k[0] == a.id]
              for shape, ta, tb in zip(shapes, times[key], times[(b.id, *key[1:])]) if ta > tb * (1 + 1e-9)]
    assert not slower, slower[:10]
