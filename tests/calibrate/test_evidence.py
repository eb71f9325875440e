"""A calibration factor applies only where the runs gave evidence for it (defect: one 30-step host-bound
fp32 MLP run, 3 ms steps, fitted "others ×4.65" and a ResNet-50 amp-fp16 estimate on the A100 went from
36 ms to 169 ms a step; a run without memory figures printed "memory outside the allocator +0 MiB")."""

import pytest

from gpuwise.calibrate.apply import corrected_memory, corrected_time, describe
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.calibrate.learn import read_measurements
from gpuwise.calibrate.rows import fit_row
from gpuwise.calibrate.store import from_toml, to_toml
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.calibrate.explain import describe as describe_fit
from gpuwise.memory.model import MemoryEstimate
from gpuwise.runtime.model import StepTime
from tests.calibrate.helpers import synthetic_log, write_model

A100_40GB = resolve_gpu(load_catalog(None), "a100-40gb-sxm4")

A100 = "NVIDIA A100-SXM4-40GB"
# ResNet-50, batch 64, amp-fp16 on an A100 40GB as the shipped model splits its 36.2 ms step
RESNET50_LIKE = {"conv": 0.01648, "norm": 0.00857, "elementwise": 0.00802, "optimizer": 0.00171, "copy": 0.00071,
                 "reduction": 0.00056, "matmul": 0.00002, "launch": 0.00015}


@pytest.fixture(scope="module")
def mlp_calibration(tmp_path_factory):
    """One tiny host-bound run (30 steps of 3 ms) under the replay backend: no torch memory, no NVML process."""
    folder = tmp_path_factory.mktemp("mlp")
    spec = write_model(folder)
    log = synthetic_log(folder / "repm.db", workload={"model": spec, "batch_size": 16, "precision": "fp32",
                                                      "optimizer": "adamw"},
                        step_time_s=0.003, gpu_name=A100, steps=30, process_bytes=None, reserved_bytes=None)
    gpu = resolve_gpu(load_catalog(None), "a100-40gb-sxm4")
    (m,) = read_measurements(log)
    assert m.peak_allocated_bytes is None and m.process_memory_bytes is None
    return fit_gpu(gpu.id, [fit_row(m, gpu)])


def _resnet_step():
    total = sum(RESNET50_LIKE.values())
    return StepTime(gpu="a100-40gb-sxm4", count=1, step_time_s=total, samples_per_s=64 / total,
                    by_class_s=dict(RESNET50_LIKE), bound="compute", compute_s=total, micro_step_s=total)


def test_one_host_bound_mlp_run_barely_moves_a_conv_dominated_prediction(mlp_calibration):
    cal = mlp_calibration
    # the run was far slower than predicted where the host set its pace: read as host time, not as kernels
    assert cal.host_s > 0.002 and cal.global_factor == pytest.approx(1.0, abs=0.05)
    assert cal.factor("conv/fp16") == cal.factor("norm/fp16") == cal.factor("elementwise/fp16") == 1.0
    assert "launch" in cal.class_factors              # the host-side class carried most of the MLP's step
    step = _resnet_step()
    new = corrected_time(step, cal, "amp-fp16", A100_40GB)
    # was ×4.7 (169 ms for 36 ms), then +6% with the host term in series; the GPU-bound step now hides the
    # run's host side behind its kernels (the step model's smooth maximum)
    assert 1.0 <= new.step_time_s / step.step_time_s < 1.01
    text = describe(step, cal, "amp-fp16", A100_40GB)
    assert text.startswith("calibrated with 1 of your runs on a100-40gb-sxm4: scaled launch ×")
    assert "conv/fp16, norm/fp16, elementwise/fp16" in text and "never seen in that run" in text


def test_a_class_under_the_evidence_share_keeps_the_shipped_model():
    # elementwise is 2% of the only run: its factor would only echo the matmul one
    row = FitRow("a", {"matmul/fp16": 0.0098, "elementwise/fp16": 0.0002}, 0.0, 0.02)
    cal = fit_gpu("rtx-4090", [row])
    assert cal.factor("matmul/fp16") == pytest.approx(2.0, abs=0.05)
    assert cal.factor("elementwise/fp16") == 1.0 and cal.factor("matmul/fp32") == 1.0


def test_a_memory_offset_without_memory_figures_is_not_measured_and_not_applied(mlp_calibration):
    cal = mlp_calibration
    assert cal.memory_offset_bytes is None
    assert "memory outside the allocator not measured" in describe_fit(cal)
    assert "+0 MiB" not in describe_fit(cal)
    mem = MemoryEstimate(peak_allocated_bytes=2**30, peak_reserved_bytes=2**31, cuda_context_bytes=2**29,
                         total_bytes=2**31 + 2**29, weights_bytes=0, gradients_bytes=0, optimizer_bytes=0,
                         activations_bytes=0)
    assert corrected_memory(mem, cal) == mem
    assert from_toml(to_toml({cal.gpu: cal}))[cal.gpu] == cal      # None survives the file (key absent)


def test_a_file_from_before_the_rule_is_read_by_it():
    """Old files applied the global factor to every class and stored 0 for an unmeasured offset: their runs
    say what they may scale."""
    row = FitRow("a", {"matmul/fp16": 0.0098, "elementwise/fp16": 0.0002}, 0.0, 0.02)
    old = to_toml({"rtx-4090": fit_gpu("rtx-4090", [row])}).replace(
        "[gpu.rtx-4090.class_factors]", '[gpu.rtx-4090.class_factors]\n"elementwise/fp16" = 2.0\n"conv/fp16" = 2.0')
    old = old.replace('global_factor', 'memory_offset_bytes = 0\nglobal_factor')
    cal = from_toml(old)["rtx-4090"]
    assert set(cal.class_factors) == {"matmul/fp16"} and cal.memory_offset_bytes is None
