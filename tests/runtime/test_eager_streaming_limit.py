"""PyTorch's unvectorized elementwise kernels (a broadcast or a cast on load) move at most
``eager_bytes_per_sm_clock`` x SMs x clock (Little's law: a fixed number of bytes in flight per SM), so a GPU
with much bandwidth per SM clock (A100, H100, B200) runs them below its elementwise law while a GDDR card (RTX
3090, A40) runs them at it; vectorized (same shape, same dtype) kernels and GEMMs' memory side are not limited."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.runtime import kernels
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.laws import Laws, eager_streaming_limit_bytes_per_s, load_laws, streaming_time_s
from gpuwise.trace.records import OpRecord

GIB = 2 ** 30


def _gpu(gpu_id):
    return next(g for g in load_catalog(user_file=False).gpus if g.id == gpu_id)


def _mul(rows: int, cols: int, *, broadcast: bool = False, weight_dtype: str = "bfloat16") -> OpRecord:
    """x (rows x cols, bf16) times a same-shape tensor, or a row-broadcast weight of ``cols``."""
    other = (cols,) if broadcast else (rows, cols)
    out_dtype = "float32" if weight_dtype == "float32" else "bfloat16"
    nbytes = rows * cols * 2
    return OpRecord(0, "aten.mul.Tensor", "forward", "", ((rows, cols), other), ("bfloat16", weight_dtype),
                    ((rows, cols),), (out_dtype,), rows * cols, 2 * nbytes, nbytes)


def test_only_broadcasts_and_casts_are_unvectorized():
    assert not kernels.unvectorized(_mul(4096, 4096))
    assert kernels.unvectorized(_mul(4096, 4096, broadcast=True))
    assert kernels.unvectorized(_mul(4096, 4096, weight_dtype="float32"))
    scalar = OpRecord(0, "aten.mul.Tensor", "forward", "", ((64, 64), ()), ("bfloat16", "float32"), ((64, 64),),
                      ("bfloat16",), 4096, 8192, 8192)
    assert not kernels.unvectorized(scalar)          # a 0-d operand is a scalar argument, not a load
    compare = OpRecord(0, "aten.lt.Tensor", "forward", "", ((64, 64), (64, 64)), ("float32", "float32"),
                       ((64, 64),), ("bool",), 4096, 32768, 4096)
    mask = OpRecord(0, "aten.where.self", "forward", "", ((64, 64), (64, 64), (64, 64)), ("bool", "bfloat16", "bfloat16"),
                    ((64, 64),), ("bfloat16",), 4096, 20480, 8192)
    assert not kernels.unvectorized(compare) and not kernels.unvectorized(mask)     # typed kernels


@pytest.fixture
def with_k(monkeypatch):
    def set_k(k: float) -> Laws:
        laws = dataclasses.replace(load_laws(), eager_bytes_per_sm_clock=k)
        monkeypatch.setattr(kernels, "load_laws", lambda: laws)
        return laws
    return set_k


def test_boost_clock_is_the_fp32_rate_over_two_flops_per_core():
    a100 = _gpu("a100-80gb-sxm4")
    assert a100.boost_clock_hz == pytest.approx(19.5e12 / (2 * 6912))
    assert all(g.boost_clock_hz > 0.5e9 for g in load_catalog(user_file=False).gpus)


def test_the_limit_is_the_slower_of_bandwidth_and_sm_throughput():
    law = load_laws().streaming["elementwise"]
    bw = 2e12
    free = streaming_time_s(law, GIB, bandwidth_bytes_per_s=bw)
    assert free == pytest.approx(GIB / (bw * law.u_max))
    assert streaming_time_s(law, GIB, bandwidth_bytes_per_s=bw, limit_bytes_per_s=1e12) == pytest.approx(GIB / 1e12)
    assert streaming_time_s(law, GIB, bandwidth_bytes_per_s=bw, limit_bytes_per_s=1e15) == pytest.approx(free)
    laws = dataclasses.replace(load_laws(), eager_bytes_per_sm_clock=8.0)
    assert eager_streaming_limit_bytes_per_s(laws, 100, 1.5e9) == pytest.approx(8.0 * 100 * 1.5e9)
    assert eager_streaming_limit_bytes_per_s(dataclasses.replace(laws, eager_bytes_per_sm_clock=0.0), 100, 1e9) == math.inf


def test_hbm_gpus_run_unvectorized_kernels_below_the_law_gddr_cards_at_it(with_k):
    op = _mul(16384, 16384, broadcast=True)
    with_k(0.0)
    before = {g: kernels.op_time(op, _gpu(g), "bf16", _cal()).device_s for g in ("a100-80gb-sxm4", "rtx-3090", "b200")}
    with_k(8.0)
    after = {g: kernels.op_time(op, _gpu(g), "bf16", _cal()).device_s for g in before}
    assert after["a100-80gb-sxm4"] > 1.2 * before["a100-80gb-sxm4"]     # 13.4 bytes of bandwidth per SM clock
    assert after["b200"] > 2.0 * before["b200"]                         # 27 bytes per SM clock
    assert after["rtx-3090"] == pytest.approx(before["rtx-3090"])        # 6.7: the bandwidth binds first
    # never faster than the datasheet bandwidth allows
    for g, t in after.items():
        assert t >= op.bytes_read / (_gpu(g).memory_bandwidth_gbs * 1e9)


def test_a_vectorized_kernel_is_not_limited(with_k):
    op = _mul(16384, 16384)
    b200 = _gpu("b200")
    with_k(0.0)
    before = kernels.op_time(op, b200, "bf16", _cal()).device_s
    with_k(8.0)
    assert kernels.op_time(op, b200, "bf16", _cal()).device_s == pytest.approx(before)


def test_gemm_memory_side_is_not_limited(with_k):
    m = OpRecord(0, "aten.mm.default", "forward", "", ((1, 8192), (8192, 8192)), ("bfloat16", "bfloat16"),
                 ((1, 8192),), ("bfloat16",), 2 * 8192 * 8192, 2 * (8192 + 8192 * 8192), 2 * 8192)
    b200 = _gpu("b200")
    with_k(0.0)
    before = kernels.op_time(m, b200, "bf16", _cal()).device_s
    with_k(8.0)
    assert kernels.op_time(m, b200, "bf16", _cal()).device_s == pytest.approx(before)


def test_the_constant_round_trips_through_the_laws_file():
    laws = dataclasses.replace(load_laws(), eager_bytes_per_sm_clock=7.5)
    assert Laws.from_dict(laws.to_dict()).eager_bytes_per_sm_clock == 7.5
    d = laws.to_dict()
    del d["eager_bytes_per_sm_clock"]
    assert Laws.from_dict(d).eager_bytes_per_sm_clock == 0.0


def _cal():
    return load_calibration()
