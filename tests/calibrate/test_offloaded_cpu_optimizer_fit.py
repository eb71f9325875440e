"""An offloaded LLM step's CPU part (the CPU optimizer step and its PCIe copies) is calibrated as its own, never as
the GPU's work.

Before: ``fit.compose`` counted the closed form's ``offload`` class among the GPU's classes (keyed ``offload/bf16``),
inside the smooth maximum with the host's issue time and under the common scale ``g``. One offloaded run whose CPU
Adam was 20% slower than the assumed rate scaled every GPU class it carried by the same ~1.2 (a 1.1B model's
``matmul/bf16`` ×1.22 on an RTX 4090), so every other estimate on that GPU, none offloaded, got slower by it; a
fast CPU made the GPU's matmuls ×0.59. A host term also hid behind the CPU's optimizer step as if it were kernels.
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import corrected_time
from gpuwise.calibrate.fit import FitRow, GpuCalibration, class_key, fit_gpu
from gpuwise.calibrate.store import from_toml, to_toml
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.llm import OFFLOAD_CLASS as OFFLOAD
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config
from tests.closed_form.test_llm_time_laws import LLAMA_125M

ARCH = arch_from_config(LLAMA_125M)
FIELDS = dict(batch_size=16, seq_len=1024, precision="bf16", optimizer="adamw", sharding="zero2")


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _step(h100, **fields):
    return estimate_llm(Workload("llama-125m", **{**FIELDS, **fields}), h100, arch=ARCH).time


def _row(step, h100, measured_s: float, key=class_key) -> FitRow:
    return FitRow(fingerprint=f"run-{measured_s}", predicted_by_class_s={key(c, "bf16", h100): s
                                                                          for c, s in step.by_class_s.items()},
                  predicted_other_s=0.0, measured_step_time_s=measured_s, predicted_host_s=step.host_s)


@pytest.mark.parametrize("cpu_speed", [0.8, 1.25])      # CPU Adam slower, faster than the closed form assumes
def test_an_offloaded_run_s_gap_is_its_cpu_part_s_not_the_gpu_classes(h100, cpu_speed):
    step = _step(h100, offload="optimizer")
    offload_s = step.by_class_s[OFFLOAD]
    assert offload_s > 0.5 * step.step_time_s                 # the CPU's optimizer step is most of the step
    measured_s = step.step_time_s - offload_s + offload_s / cpu_speed
    cal = fit_gpu("h100-sxm", [_row(step, h100, measured_s)])
    assert abs(cal.residuals[f"run-{measured_s}"]) < 0.01   # reproduced
    assert cal.factor(OFFLOAD) == pytest.approx(1 / cpu_speed, rel=0.05)
    for cls in ("matmul", "attention", "elementwise"):     # the GPU's kernels were as shipped
        assert cal.factor(class_key(cls, "bf16", h100)) == pytest.approx(1.0, abs=0.03), cls


def test_an_offloaded_run_leaves_a_step_on_the_gpu_as_shipped(h100):
    offloaded = _step(h100, offload="optimizer")
    cal = fit_gpu("h100-sxm", [_row(offloaded, h100, 1.25 * offloaded.step_time_s)])
    on_gpu = _step(h100)
    after = corrected_time(on_gpu, cal, "bf16", h100)
    assert after.step_time_s == pytest.approx(on_gpu.step_time_s, rel=0.03)


def test_the_calibrated_gpu_busy_time_of_an_offloaded_step_leaves_its_cpu_part_out(h100):
    step = _step(h100, offload="optimizer")
    cal = GpuCalibration(gpu="h100-sxm", class_factors={OFFLOAD: 2.0}, global_factor=1.0, host_s=0.0,
                         memory_offset_bytes=None, runs=())
    calibrated = cal.compose(step.by_class_s, step.host_s, lambda c: class_key(c, "bf16", h100))
    assert calibrated.device_s == pytest.approx(step.device_s, rel=1e-6)
    assert calibrated.by_class_s[OFFLOAD] == pytest.approx(2.0 * step.by_class_s[OFFLOAD])
    after = corrected_time(step, cal, "bf16", h100)
    assert after.device_s == pytest.approx(step.device_s, rel=1e-6)
    assert after.step_time_s == pytest.approx(step.step_time_s + step.by_class_s[OFFLOAD], rel=1e-6)


def test_a_stored_run_that_keyed_the_offload_part_by_precision_is_refitted_as_read(h100):
    step = _step(h100, offload="optimizer")
    legacy = _row(step, h100, 1.25 * step.step_time_s, key=lambda c, p, g: f"{c}/bf16" if c == OFFLOAD
                  else class_key(c, p, g))
    stored = GpuCalibration(gpu="h100-sxm", class_factors={"matmul/bf16": 1.22, f"{OFFLOAD}/bf16": 1.23},
                            global_factor=1.22, host_s=0.0, memory_offset_bytes=None, runs=(legacy,))
    [read] = from_toml(to_toml({"h100-sxm": stored})).values()
    assert OFFLOAD in read.runs[0].predicted_by_class_s
    assert read.factor("matmul/bf16") == pytest.approx(1.0, abs=0.03)
    assert read.factor(OFFLOAD) > 1.2
    assert abs(read.residuals[legacy.fingerprint]) < 0.01
