"""A calibrated step's bound and warnings come from its calibrated figures (a new user's second trial, defect 1).

Before: `estimate torchvision:resnet18 --batch-size 64 --precision amp-fp16 --optimizer momentum --gpu h800` under a
calibration carried from an RTX 4090 printed "bound by launch" and "launch-bound: … ~6.2 ms of host time … more
than the 5.4 ms the GPU is busy" beside ~11 ms of calibrated GPU work, and the JPEG decoding warning quoted the
shipped images/s. The bound and the pace warnings now follow from the calibrated figures by predict's own rule.
"""

from __future__ import annotations

import json

import pytest

from gpuwise.calibrate.apply import correction, corrected_time
from gpuwise.calibrate.fit import FitRow, GpuCalibration, class_key, fit_gpu
from gpuwise.calibrate.store import save
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for
from gpuwise.runtime.input_pipeline import is_decoding_warning
from gpuwise.workload import Workload

SLOWER = 2.0      # the user's stack against the shipped model on the 4090: its kernels twice as slow
ARGS = ("torchvision:resnet18", "--batch-size", "64", "--precision", "amp-fp16", "--optimizer", "momentum")


@pytest.fixture(scope="module")
def setup():
    cat = load_catalog(user_file=False)
    rtx, h800 = resolve_gpu(cat, "rtx-4090"), resolve_gpu(cat, "h800")
    w = Workload("torchvision:resnet18", batch_size=64, precision="amp-fp16", optimizer="momentum")
    shipped = model_for(w)
    step = shipped.estimate(rtx).time
    by_class = {class_key(c, w.precision, rtx): s for c, s in step.by_class_s.items()}
    row = FitRow("trial2", by_class, step.step_time_s - sum(by_class.values()), SLOWER * step.step_time_s,
                 predicted_host_s=step.host_s)
    cal = fit_gpu("rtx-4090", [row], today="2026-12-07")
    return h800, shipped, model_for(w, correction=correction({"rtx-4090": cal})), cal


def test_a_carried_step_whose_gpu_work_outlasts_the_host_is_not_launch_bound(setup):
    h800, shipped, calibrated, _ = setup
    before = shipped.estimate(h800).time
    assert before.bound == "launch" and before.host_s > before.device_s       # the trial's shipped step
    after = calibrated.estimate(h800).time
    assert after.device_s > after.host_s                                      # ~11 ms of GPU work, ~6 ms of host
    assert after.bound in ("compute", "memory")
    assert not any(w.startswith("launch-bound") for w in after.warnings)
    # one rule: the calibrated figures give what they carry
    assert after.pace.device_s == pytest.approx(after.device_s) and after.pace.host_s == pytest.approx(after.host_s)


def test_the_decoding_warning_quotes_the_calibrated_rate(setup):
    h800, shipped, calibrated, _ = setup
    after = calibrated.estimate(h800).time
    [decoding] = [w for w in after.warnings if is_decoding_warning(w)]
    assert f"feeding {after.samples_per_s / after.count:,.0f} images/s" in decoding
    shipped_rate = shipped.estimate(h800).time.samples_per_s
    assert f"{shipped_rate:,.0f} images/s" not in decoding


def test_a_host_term_that_paces_the_step_says_host_bound_with_its_figures(setup):
    h800, shipped, _, _ = setup
    step = shipped.estimate(h800).time
    cal = GpuCalibration(gpu="h800", class_factors={}, global_factor=1.0, host_s=0.050, memory_offset_bytes=None,
                         runs=())
    after = corrected_time(step, cal, "amp-fp16", h800)
    assert after.bound == "host"
    [host] = [w for w in after.warnings if w.startswith("host-bound")]
    assert f"~{cal.host_s * 1e3:.1f} ms per step" in host and f"{after.device_s * 1e3:.1f} ms the GPU is busy" in host
    assert not any(w.startswith("launch-bound") for w in after.warnings)


def test_estimate_json_under_a_carried_calibration(setup, gpuwise):
    *_, cal = setup
    save({"rtx-4090": cal})
    out = json.loads(gpuwise("estimate", *ARGS, "--gpu", "h800", "--json").stdout)
    time = out["time"]
    assert out["calibration_carried_from"] == "rtx-4090"
    assert time["device_s"] > time["host_s"] and time["bound"] != "launch"
    assert not any(w.startswith("launch-bound") for w in time["warnings"])
