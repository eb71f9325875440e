"""Issue 28: a GPU's power budget holds it below its datasheet peak on dense tensor-core kernels (a 72 W L4
cannot run its tensor cores at boost clock); tensor-core GEMMs run under a law measured on tensor-core
kernels, not the fp32 law times a factor; a lone eager call costs what GPU machines measured."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuwise.runtime import host
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_features, op_time
from gpuwise.runtime.laws import (PowerLevel, issue_share, load_laws, power_share, power_terms, sustained_share,
                                  tiled_time_s)
from gpuwise.runtime.stack import Stack
from runtime_fakes import make_gpu, mm

CAL = load_calibration()
KERNELS = Path("/work/shared/data/public-benchmarks/kernels")


def test_a_power_capped_gpu_runs_dense_half_and_fp32_gemms_slower():
    """Issue 28: one fp32 ceiling for every GPU had a 72 W card as fast as a 400 W one on SGEMMs (the L4
    predicted 42-47% fast, the V100 52-59% slow); the CUDA-core level now holds a capped card down too."""
    big, capped = make_gpu("big", tdp_w=400.0), make_gpu("capped", tdp_w=72.0)
    op = mm(8192, 8192, 8192, dtype="float16")
    assert op_time(op, capped, "amp-fp16", CAL).device_s > 1.05 * op_time(op, big, "amp-fp16", CAL).device_s
    fp32 = mm(4096, 4096, 4096)
    assert op_time(fp32, capped, "fp32", CAL).device_s > 1.5 * op_time(fp32, big, "fp32", CAL).device_s


def _large_sgemm_share(gpu) -> float:
    """Achieved share of the datasheet fp32 peak on a large SGEMM (kernel time only)."""
    f = op_features(mm(8192, 8192, 8192), gpu, "fp32")
    return 2 * 8192**3 / f.compute_base_s / (gpu.peak("fp32") * 1e12)


def test_the_l4_sustains_less_of_its_fp32_peak_than_a_v100_and_the_t4_less_than_an_a100():
    """Catalog GPUs, specs only: a 72 W L4 (128 lanes per SM) and a 70 W T4 are held well below a 250-300 W
    V100 or A100 on a large SGEMM (NeuSight's kernels: T4 ~0.45 of its peak, V100 and A100 0.85-1.0)."""
    from gpuwise.catalog import load_catalog

    gpus = {g.id: g for g in load_catalog(user_file=False).gpus}
    share = {gid: _large_sgemm_share(gpus[gid]) for gid in ("l4", "t4", "v100-16gb-pcie", "a100-80gb-pcie", "h100-sxm")}
    assert share["l4"] < 0.6 * share["v100-16gb-pcie"]
    assert share["t4"] < 0.6 * share["a100-80gb-pcie"]
    assert share["h100-sxm"] < share["a100-80gb-pcie"]          # its 128-lane SMs issue less of their rate
    assert all(0.2 < s <= 1.0 for s in share.values()), share


def test_an_sm_with_a_second_fp32_datapath_issues_less_of_its_datasheet_rate():
    level = load_laws().level("cuda-core")
    assert 0 < level.second_datapath_share < 1
    assert issue_share(level, 64) == 1.0
    assert 0.5 < issue_share(level, 128) < 1.0
    narrow = make_gpu("narrow", fp32=39.0, tdp_w=2000.0)     # power to spare: the issue width alone
    wide = dataclasses.replace(narrow, id="wide", compute_capability="8.6")    # GA10x: 128 lanes sharing slots
    op = mm(8192, 8192, 8192)
    slower = op_time(op, wide, "fp32", CAL).device_s / op_time(op, narrow, "fp32", CAL).device_s
    assert slower > 1.0 and slower == pytest.approx(1 / issue_share(level, 128), rel=0.01)
    half = mm(8192, 8192, 8192, dtype="float16")   # tensor cores: no second FP32 datapath involved
    assert op_time(half, wide, "amp-fp16", CAL).device_s == op_time(half, narrow, "amp-fp16", CAL).device_s


def test_an_older_process_node_is_held_lower_at_the_same_board_power():
    level = load_laws().level("cuda-core")
    shares = [sustained_share(level, 150.0, 20e12, process_nm=node) for node in (5.0, 7.0, 12.0, 16.0)]
    assert shares == sorted(shares, reverse=True) and shares[-1] < shares[0]
    assert sustained_share(level, 150.0, 20e12, process_nm=None) == sustained_share(level, 150.0, 20e12)


def test_the_power_level_is_a_roofline_of_the_whole_chip_not_a_slower_clock_for_every_kernel():
    """A one-tile GEMM draws a few SMs' power: a 72 W card runs it as fast as a 400 W one, while a GEMM of
    many waves is held to the chip's sustained rate (a clock held down for every kernel made a V100 slower
    than a P100 on one-tile GEMMs)."""
    big, capped = make_gpu("big", tdp_w=400.0), make_gpu("capped", tdp_w=72.0)
    tiny = mm(64, 256, 64)
    assert op_time(tiny, capped, "fp32", CAL).device_s == op_time(tiny, big, "fp32", CAL).device_s
    level = load_laws().level("cuda-core")
    issued, ratio = power_terms(level, 72.0, 19.5e12)
    law = load_laws().tiled["linear"]
    kw = dict(sm_count=108, peak_flops_per_s=issued, bandwidth_bytes_per_s=1555e9)
    one_wave = tiled_time_s(law, 1, 128, 128, 128, **kw)          # too short a reduction to split
    assert tiled_time_s(law, 1, 128, 128, 128, power_ratio=ratio, power_exponent=level.exponent, **kw) == one_wave
    many = tiled_time_s(law, 1, 8192, 8192, 4096, **kw)
    held = tiled_time_s(law, 1, 8192, 8192, 4096, power_ratio=ratio, power_exponent=level.exponent, **kw)
    assert held == pytest.approx(many / power_share(ratio, level.exponent), rel=0.05) and held > many


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


def test_power_terms_give_the_same_figures_for_plain_numbers_and_arrays():
    """A prediction takes the plain-Python path, the fits the numpy one: the same arithmetic."""
    import numpy as np

    level = load_laws().level("cuda-core")
    tdp, peak, lanes, node = [0.0, 70.0, 250.0, 700.0], [8e12, 14e12, 19.5e12, 67e12], [64, 64, 128, 128], [12, 12, 7, 5]
    issued, ratio = power_terms(level, np.array(tdp), np.array(peak), lanes_per_sm=np.array(lanes, dtype=float),
                                process_nm=np.array(node, dtype=float))
    for i in range(4):
        one = power_terms(level, tdp[i], peak[i], lanes_per_sm=float(lanes[i]), process_nm=float(node[i]))
        assert type(one[0]) is float and type(one[1]) is float
        assert one == (pytest.approx(issued[i], rel=1e-12), pytest.approx(ratio[i], rel=1e-12))
