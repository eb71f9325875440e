"""No rounding noise in calibration outputs (a new user's trial of docs/calibrate.md): after calibrating the
docs' ResNet-18 run, estimate said "host +0.01 ms beside the kernels' issue (adds 0.00 ms to this step …)"
for a 5.2 µs host term, and calibration.toml stored `predicted_other_s = 3.469446951953614e-18` where the step
has nothing outside its classes (float cancellation)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

from gpuwise.calibrate.apply import describe
from gpuwise.calibrate.fit import FitRow, GpuCalibration
from gpuwise.calibrate.learn import read_measurements
from gpuwise.calibrate.rows import fit_row
from gpuwise.calibrate.store import FILE_NAME
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.model import StepTime
from tests.calibrate.helpers import synthetic_log

RTX_4090 = resolve_gpu(load_catalog(None), "rtx-4090")
# the docs' run (docs/calibrate.md): ResNet-18, batch 64, amp-fp16, momentum, 31 ms a step on an RTX 4090
RESNET18 = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}


def _gpu_bound_step() -> StepTime:
    # 19 ms of kernels, 6 ms for the host to issue them: a host term of a few µs hides behind the kernels
    return StepTime(gpu="rtx-4090", count=1, step_time_s=0.0191, samples_per_s=64 / 0.0191,
                    by_class_s={"conv": 0.019, "launch": 0.0001}, bound="compute", compute_s=0.0191,
                    micro_step_s=0.0191, host_s=0.006, device_s=0.019)


def test_a_host_term_that_adds_nothing_visible_to_this_step_is_not_said():
    row = FitRow("f1", {"conv/fp16": 0.019, "launch": 0.0001}, 0.0, 0.031, predicted_host_s=0.006)
    tiny = GpuCalibration("rtx-4090", {"conv/fp16": 1.6}, 1.6, host_s=5.2e-6, memory_offset_bytes=None, runs=(row,))
    text = describe(_gpu_bound_step(), tiny, "amp-fp16", RTX_4090)
    assert "host" not in text and "adds 0.00 ms" not in text, text
    # a host term that sets this step's pace is still said, with what it adds
    paced = describe(_gpu_bound_step(), replace(tiny, host_s=0.05), "amp-fp16", RTX_4090)
    assert "host +50.00 ms beside the kernels' issue (adds " in paced, paced


def test_the_step_outside_its_classes_is_zero_not_float_rounding(tmp_path):
    log = synthetic_log(tmp_path / "run.db", workload=RESNET18, step_time_s=0.031)
    (m,) = read_measurements(log)
    row = fit_row(m, RTX_4090)
    assert row.predicted_other_s == 0.0                              # was 3.469446951953614e-18
    assert row.predicted_step_time_s == sum(row.predicted_by_class_s.values())


def test_after_calibrating_the_docs_run_estimate_says_no_noise_host_term(gpuwise, config_dir, tmp_path):
    log = synthetic_log(tmp_path / "run.db", workload=RESNET18, step_time_s=0.031, allocated_bytes=1020054732,
                        reserved_bytes=1288490188, process_bytes=2040109465)
    r = gpuwise("calibrate", log)
    assert r.returncode == 0, r.stderr
    [run] = tomllib.loads((config_dir / FILE_NAME).read_text())["gpu"]["rtx-4090"]["run"]
    assert run["predicted_other_s"] == 0.0
    r = gpuwise("estimate", "torchvision:resnet18", "--batch-size", "64", "--precision", "amp-fp16",
                "--optimizer", "momentum", "--gpu", "rtx-4090", "--json")
    assert r.returncode == 0, r.stderr
    line = json.loads(r.stdout)["calibration"]
    assert line.startswith("calibrated with 1 of your runs on rtx-4090: scaled conv/fp16")
    assert "adds 0.00 ms" not in line and "host +0.01 ms" not in line, line
