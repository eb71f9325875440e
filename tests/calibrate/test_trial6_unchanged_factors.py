"""A trial of `gpuwise calibrate`: factors that print as ×1.00 were listed as "step time factors" (calibrate),
"scaled:" (recommend) and "scaled launch ×1.00" (estimate) beside the ones that change a step."""

from __future__ import annotations

import json

from gpuwise.calibrate.apply import describe as estimate_line
from gpuwise.calibrate.calibration import factor_text, scales
from gpuwise.calibrate.explain import describe
from gpuwise.calibrate.fit import FitRow, GpuCalibration
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.model import StepTime
from tests.calibrate.helpers import synthetic_log, write_model


def mlp_log(tmp_path):
    workload = {"model": write_model(tmp_path), "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    return synthetic_log(tmp_path / "run.db", workload=workload, step_time_s=0.05)


UNCHANGED = {"launch": 1.0042525029969378, "optimizer/fp32": 1.0000000441237935}


def calibration(factors: dict[str, float]) -> GpuCalibration:
    row = FitRow("f1", {"conv/fp16": 0.019, "launch": 0.0001, "optimizer/fp32": 0.001}, 0.0, 0.031,
                 predicted_host_s=0.006)
    return GpuCalibration("rtx-4090", factors, 1.0, host_s=0.0, memory_offset_bytes=None, runs=(row,))


def test_a_factor_within_the_rounding_of_one_is_not_a_change():
    assert all(factor_text(f) == factor_text(1.0) and not scales(f) for f in (0.996, 1.0, 1.0042525))
    assert scales(1.006) and scales(0.994)


def test_factors_that_print_as_one_are_listed_as_shipped_not_scaled_in_words_and_json():
    cal = calibration({"conv/fp16": 1.66, **UNCHANGED})
    text = describe(cal)
    unchanged = "launch, optimizer/fp32 fitted at ×1.00: as shipped;"
    assert f"step time factors conv/fp16 {factor_text(1.66)} ({unchanged}" in text
    assert f"scaled: conv/fp16 {factor_text(1.66)};" in cal.summary and "×1.00" not in cal.summary
    doc = cal.to_dict()
    assert doc["class_factors"] == {"conv/fp16": 1.66, **UNCHANGED}      # exact, as fitted
    assert doc["scaled_factors"] == {"conv/fp16": 1.66}
    assert doc["unchanged_classes"] == sorted(UNCHANGED)


def test_estimates_line_scales_no_class_fitted_at_one():
    gpu = resolve_gpu(load_catalog(None), "rtx-4090")
    step = StepTime(gpu="rtx-4090", count=1, step_time_s=0.0201, samples_per_s=64 / 0.0201,
                    by_class_s={"conv": 0.019, "launch": 0.0001, "optimizer": 0.001}, bound="compute",
                    compute_s=0.0201, micro_step_s=0.0191, host_s=0.006, device_s=0.0201)
    line = estimate_line(step, calibration({"conv/fp16": 1.66, **UNCHANGED}), "amp-fp16", gpu)
    assert "scaled conv/fp16 ×1.66 (" in line and "×1.00" not in line


def test_calibrate_lists_no_factor_that_prints_as_one_as_scaled(gpuwise, tmp_path):
    r = gpuwise("calibrate", mlp_log(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)["calibration"]
    assert cal["unchanged_classes"], cal                     # the guarded MLP's classes fit at ×1.00
    assert set(cal["scaled_factors"]) | set(cal["unchanged_classes"]) == set(cal["class_factors"])
    assert all(scales(f) and f == cal["class_factors"][c] for c, f in cal["scaled_factors"].items())
    text = gpuwise("calibrate").stdout.replace("\n", " ")
    factors = text.split("step time factors ")[1].split(" (")[0]
    assert "×1.00" not in factors
    assert all(c in text.split(" fitted at ×1.00")[0] for c in cal["unchanged_classes"])
