"""A calibrated offloaded LLM step's phases (``micro_step_s``, ``optimizer_s`` in estimate's JSON) follow the part
each runs on: the optimizer step, the CPU's under ``--offload optimizer``, the ``offload`` factor; the micro-steps,
the GPU's kernels by its classes' factors and their gradients' PCIe copy to the host (every micro-batch's:
``runtime.llm.offload_copies``) by the ``offload`` factor.

Before: ``apply.corrected_time`` scaled both by the step's one overall ratio. An offloaded run whose CPU Adam was
slower than assumed (``offload`` ×1.25, the GPU's classes as shipped) gave its optimizer step only ×1.18, and its
micro-step, whose kernels the fit left alone, ×1.18 as well.
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import corrected_time
from gpuwise.calibrate.fit import fit_gpu
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.llm import OFFLOAD_CLASS as OFFLOAD
from tests.calibrate.test_offloaded_cpu_optimizer_fit import _row, _step

CPU_SPEED = 0.8          # the CPU's Adam 20% slower than the closed form assumes


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _calibrated(h100, grad_accum_steps: int):
    step = _step(h100, offload="optimizer", grad_accum_steps=grad_accum_steps)
    offload_s = step.by_class_s[OFFLOAD]
    cal = fit_gpu("h100-sxm", [_row(step, h100, step.step_time_s - offload_s + offload_s / CPU_SPEED)])
    return step, cal, corrected_time(step, cal, "bf16", h100)


def _gpu_part_s(by_class_s) -> float:
    return sum(s for c, s in by_class_s.items() if c != OFFLOAD)


def _micro_copies_s(step, grad_accum_steps: int) -> float:
    """One micro-step's share of the offload part: the offload part less the CPU's optimizer step."""
    return (step.by_class_s[OFFLOAD] - step.optimizer_s) / grad_accum_steps


@pytest.mark.parametrize("grad_accum_steps", [1, 4])
def test_an_offloaded_step_s_optimizer_follows_the_offload_factor_and_its_micro_step_the_gpu_s(h100,
                                                                                               grad_accum_steps):
    step, cal, after = _calibrated(h100, grad_accum_steps)
    assert cal.factor(OFFLOAD) == pytest.approx(1 / CPU_SPEED, rel=0.05)
    assert after.optimizer_s == pytest.approx(step.optimizer_s * cal.factor(OFFLOAD), rel=1e-9)
    gpu_ratio = _gpu_part_s(after.by_class_s) / _gpu_part_s(step.by_class_s)
    assert gpu_ratio == pytest.approx(1.0, abs=0.03)                      # the GPU's kernels were as shipped
    copies_s = _micro_copies_s(step, grad_accum_steps)
    assert copies_s > 0                                                   # each micro-batch's gradients go out
    assert after.micro_step_s == pytest.approx((step.micro_step_s - copies_s) * gpu_ratio
                                               + copies_s * cal.factor(OFFLOAD), rel=1e-9)


@pytest.mark.parametrize("grad_accum_steps", [1, 4])
def test_an_offloaded_step_s_calibrated_phases_add_up_to_its_calibrated_compute(h100, grad_accum_steps):
    step, _cal, after = _calibrated(h100, grad_accum_steps)
    assert step.compute_s == pytest.approx(grad_accum_steps * step.micro_step_s + step.optimizer_s, rel=1e-9)
    assert after.compute_s == pytest.approx(grad_accum_steps * after.micro_step_s + after.optimizer_s, rel=1e-9)
