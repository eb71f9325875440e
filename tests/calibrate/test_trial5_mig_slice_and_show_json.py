"""Trial 5 of the calibration (a user renting a MIG slice, and scripts reading `gpuwise calibrate --json`).

- A run on a MIG slice calibrates the slice (``a100-40gb-sxm4-mig-3g.20gb``), yet every command then warned that the
  table "is no GPU of the catalog (names a100-40gb-sxm4-mig-3g.20gb by another name than its id: the table must be
  [gpu.a100-40gb-sxm4-mig-3g.20gb])" and applied it to nothing: the next estimate on that very slice was the shipped
  one. A slice's id is what the resolver makes of its name, so its table applies.
- `gpuwise calibrate --json` (show) gave each run's fingerprint only, while the text gives each run's measured,
  calibrated and shipped step time: the JSON now has them per run (``run_step_times``).
"""

from __future__ import annotations

import json

import pytest

MODEL = "torchvision:resnet18"
JOB = ["-b", "64", "--precision", "amp-fp16", "--optimizer", "momentum"]
WORKLOAD = {"model": MODEL, "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}
SLICE_NAME = "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
SLICE_ID = "a100-40gb-sxm4-mig-3g.20gb"
DROPPED = "is no GPU of the catalog"


def _rows(tmp_path, gpu_name: str, step_time_s: float):
    row = {"format": "gpuwise-measurement/1", "gpu_name": gpu_name, "workload": WORKLOAD,
           "figures": {"step_time_s": step_time_s, "timed_steps": 20}}
    path = tmp_path / f"rows-{step_time_s}.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


def _step_time_s(gpuwise, gpu: str) -> tuple[float, dict]:
    r = gpuwise("estimate", MODEL, *JOB, "--gpu", gpu, "--json")
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr
    out = json.loads(r.stdout)
    return out["time"]["step_time_s"], out


def test_a_run_on_a_mig_slice_calibrates_the_next_estimate_on_that_slice(gpuwise, tmp_path):
    shipped_s, _ = _step_time_s(gpuwise, SLICE_NAME)
    measured_s = shipped_s * 2
    r = gpuwise("calibrate", _rows(tmp_path, SLICE_NAME, measured_s))
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr

    calibrated_s, out = _step_time_s(gpuwise, SLICE_NAME)
    assert out["calibrated_gpus"] == [SLICE_ID]
    assert calibrated_s == pytest.approx(measured_s, rel=0.02)
    shown = gpuwise("calibrate")
    assert shown.returncode == 0 and DROPPED not in shown.stderr


def test_calibrate_json_gives_each_runs_measured_calibrated_and_shipped_step_time(gpuwise, tmp_path):
    shipped_s, _ = _step_time_s(gpuwise, "rtx-4090")
    measured_s = shipped_s * 1.6
    assert gpuwise("calibrate", _rows(tmp_path, "NVIDIA GeForce RTX 4090", measured_s)).returncode == 0

    r = gpuwise("calibrate", "--json")
    assert r.returncode == 0, r.stderr
    [cal] = json.loads(r.stdout)["calibrations"]
    [run] = cal["run_step_times"]
    assert run["fingerprint"] == cal["run_fingerprints"][0]
    assert run["measured_step_time_s"] == pytest.approx(measured_s)
    assert run["shipped_step_time_s"] == pytest.approx(shipped_s, rel=1e-3)
    assert run["calibrated_step_time_s"] == pytest.approx(measured_s, rel=0.01)
    assert run["error"] == pytest.approx(run["calibrated_step_time_s"] / measured_s - 1)
    text = gpuwise("calibrate").stdout
    assert f"run {run['fingerprint']}: measured" in text
