"""The fit (per class factors, host term, memory offset) and how a calibration corrects an estimate."""

import dataclasses

import pytest

from gpuwise.calibrate.apply import corrected_memory, corrected_time
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.calibrate.store import from_toml, load, reset, save, to_toml
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory.model import MemoryEstimate
from gpuwise.runtime.model import StepTime


def _rows_from_truth(matmul_factor, elementwise_factor, host_s):
    mixes = [(0.010, 0.002), (0.002, 0.010), (0.020, 0.004), (0.004, 0.020), (0.006, 0.006)]
    return [FitRow(str(i), {"matmul/fp16": mm, "elementwise/fp16": ew}, 0.0,
                   matmul_factor * mm + elementwise_factor * ew + host_s)
            for i, (mm, ew) in enumerate(mixes)]


def _predicted(cal, row):
    return sum(cal.factor(c) * s for c, s in row.predicted_by_class_s.items()) + cal.host_s + row.predicted_other_s


def test_varied_runs_separate_the_class_factors_and_the_host_term():
    cal = fit_gpu("rtx-4090", _rows_from_truth(2.0, 1.0, 0.002))
    assert cal.class_factors["matmul/fp16"] == pytest.approx(2.0, abs=0.05)
    assert cal.class_factors["elementwise/fp16"] == pytest.approx(1.0, abs=0.05)
    assert cal.host_s == pytest.approx(0.002, abs=0.0005)
    assert all(abs(_predicted(cal, r) / r.measured_step_time_s - 1) < 0.02 for r in cal.runs)


def test_one_run_scales_every_class_alike_and_lands_within_one_percent():
    row = FitRow("a", {"matmul": 0.010, "elementwise": 0.002, "launch": 0.001}, 0.0005, 3 * 0.0135)
    cal = fit_gpu("rtx-4090", [row])
    assert abs(_predicted(cal, row) / row.measured_step_time_s - 1) < 0.01
    factors = list(cal.class_factors.values())
    assert max(factors) / min(factors) < 1.1            # read as one factor, not as one class
    # a class no run exercised keeps the shipped model: it used to get the global factor, which scaled a
    # conv-dominated ResNet-50 by a host-bound MLP's ×4.7 (tests/calibrate/test_evidence.py)
    assert cal.factor("conv") == 1.0


def test_the_same_run_given_twice_counts_once():
    row = FitRow("same", {"matmul": 0.01}, 0.0, 0.02)
    assert len(fit_gpu("rtx-4090", [row, row]).runs) == 1


def test_memory_offset_is_the_median_difference_outside_the_allocator():
    rows = [FitRow(str(i), {"matmul": 0.01}, 0.0, 0.01, predicted_outside_allocator_bytes=500, measured_outside_allocator_bytes=m)
            for i, m in enumerate([600, 700, 10_000])] + [FitRow("x", {"matmul": 0.01}, 0.0, 0.01)]
    assert fit_gpu("rtx-4090", rows).memory_offset_bytes == 200


def test_a_corrected_step_keeps_its_sums_and_throughput_consistent():
    cal = fit_gpu("rtx-4090", _rows_from_truth(2.0, 1.0, 0.002))
    step = StepTime(gpu="rtx-4090", count=2, step_time_s=0.013, samples_per_s=2 * 64 / 0.013,
                    by_class_s={"matmul": 0.008, "elementwise": 0.002, "launch": 0.001}, bound="compute",
                    compute_s=0.011, communication_s=0.002, micro_step_s=0.009, optimizer_s=0.002)
    new = corrected_time(step, cal, "amp-fp16", resolve_gpu(load_catalog(None), "rtx-4090"))
    assert sum(new.by_class_s.values()) == pytest.approx(new.compute_s)
    assert new.step_time_s == pytest.approx(new.compute_s + step.communication_s)
    assert new.samples_per_s * new.step_time_s == pytest.approx(step.samples_per_s * step.step_time_s)
    assert new.by_class_s["host"] == pytest.approx(cal.host_s)
    assert new.by_class_s["matmul"] == pytest.approx(0.008 * cal.factor("matmul/fp16"))
    assert new.by_class_s["launch"] == pytest.approx(0.001 * cal.factor("launch"))


def test_the_memory_offset_moves_the_nvidia_smi_total_only():
    cal = dataclasses.replace(fit_gpu("rtx-4090", _rows_from_truth(1, 1, 0)), memory_offset_bytes=300 * 2**20)
    mem = MemoryEstimate(peak_allocated_bytes=2**30, peak_reserved_bytes=2**31, cuda_context_bytes=2**29,
                         total_bytes=2**31 + 2**29, weights_bytes=0, gradients_bytes=0, optimizer_bytes=0,
                         activations_bytes=0)
    new = corrected_memory(mem, cal)
    assert new.total_bytes == mem.total_bytes + 300 * 2**20
    assert (new.peak_allocated_bytes, new.peak_reserved_bytes) == (mem.peak_allocated_bytes, mem.peak_reserved_bytes)


def test_the_file_round_trips_and_reset_removes_one_gpu_or_all(config_dir):
    a = fit_gpu("rtx-4090", _rows_from_truth(2.0, 1.0, 0.002))
    b = fit_gpu("a100-40gb-sxm4", [FitRow("z", {"conv": 0.01}, 0.0, 0.02, 10, 20, {"torch": "2.5.1"})])
    path = save({"rtx-4090": a, "a100-40gb-sxm4": b})
    assert path.parent == config_dir and path.read_text().startswith("# gpuwise user calibration")
    back = load()
    assert back == {"rtx-4090": a, "a100-40gb-sxm4": b}
    assert from_toml(to_toml(back)) == back
    assert reset("rtx-4090") and set(load()) == {"a100-40gb-sxm4"}
    assert reset() and not path.exists() and load() == {}
