"""Issue 28: a GPU's power budget holds it below its datasheet peak on dense tensor-core kernels (a 72 W L4
cannot run its tensor cores at boost clock); tensor-core GEMMs run under a law measured on tensor-core
kernels, not the fp32 law times a factor; a lone eager call costs what GPU machines measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.runtime import host
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_features, op_time
from gpuwise.runtime.laws import PowerLevel, load_laws, sustained_share
from gpuwise.runtime.stack import Stack
from runtime_fakes import make_gpu, mm

CAL = load_calibration()
KERNELS = Path("/work/shared/data/public-benchmarks/kernels")


def test_a_power_capped_gpu_runs_dense_half_gemms_slower_and_fp32_alike():
    big, capped = make_gpu("big", tdp_w=400.0), make_gpu("capped", tdp_w=72.0)
    op = mm(8192, 8192, 8192, dtype="float16")
    assert op_time(op, capped, "amp-fp16", CAL).device_s > 1.05 * op_time(op, big, "amp-fp16", CAL).device_s
    fp32 = mm(4096, 4096, 4096)
    assert op_time(fp32, capped, "fp32", CAL).device_s == pytest.approx(op_time(fp32, big, "fp32", CAL).device_s)


def test_the_sustained_share_never_exceeds_one_and_more_peak_at_the_same_power_is_never_slower():
    level = load_laws().level("tensor")
    assert 0 < level.exponent <= 1 and level.full_w_per_tflops > 0
    shares = [sustained_share(level, 72.0, tflops * 1e12) for tflops in (30, 121, 400, 2000)]
    assert all(0 < s <= 1 for s in shares) and shares == sorted(shares, reverse=True)
    rates = [tflops * s for tflops, s in zip((30, 121, 400, 2000), shares)]
    assert rates == sorted(rates)
    assert sustained_share(PowerLevel(), 72.0, 121e12) == 1.0   # no level: the datasheet peak


def test_half_gemms_use_the_measured_tensor_law_without_the_end_to_end_factor():
    f = op_features(mm(4096, 4096, 4096, dtype="float16"), make_gpu(), "amp-fp16")
    assert load_laws().tensor, "the shipped laws carry the tensor-core law"
    assert "tensor_eff" not in f.compute_keys
    tf32 = op_features(mm(4096, 4096, 4096), make_gpu(), "tf32")
    assert tf32.compute_keys == ("tf32_factor",)


def test_a_lone_eager_call_costs_the_floor_gpu_machines_measured():
    """runtime/host.py's per-call costs are the medians of NeuSight's lone-call floors (the kernel data)."""
    import numpy as np
    import pandas as pd

    def floor_us(folder: str) -> float:
        return float(np.median([pd.read_csv(f, usecols=["Latency"]).Latency.min() * 1e3
                                for f in sorted((KERNELS / folder).glob("*.csv.gz"))]))

    eager = Stack()
    for cls, folder in (("conv", "conv"), ("matmul", "linear"), ("norm", "ln")):
        assert host.host_s(cls, 1, "forward", eager) * 1e6 == pytest.approx(floor_us(folder), rel=0.02)
    # a second kernel of the same call is only a launch, not another call
    assert host.host_s("conv", 2, "forward", eager) - host.host_s("conv", 1, "forward", eager) == pytest.approx(host.CUDA_LAUNCH_S)
