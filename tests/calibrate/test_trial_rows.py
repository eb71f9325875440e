"""A new user's trial of hand-made gpuwise-measurement/1 rows: a step time no GPU can reach, a factor the fit
stops at, and a row whose catalog id is unknown or disagrees with its driver name. Each is one line, exit 2,
and nothing written."""

import json
import logging

import pytest

from gpuwise.calibrate import user_calibration_path
from gpuwise.calibrate.fit import MAX_FACTOR, MIN_FACTOR, FitRow, GpuCalibration, fit_gpu
from gpuwise.calibrate.rows import ROOFLINE_FLOOR_SHARE, roofline_s
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload

WORKLOAD = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}
NAME_3090 = "NVIDIA GeForce RTX 3090"


def write_row(path, step_time_s, *, gpu="rtx-3090", gpu_name=NAME_3090, **figures):
    row = {"format": "gpuwise-measurement/1", "workload": WORKLOAD,
           "figures": {"step_time_s": step_time_s, "timed_steps": 20, **figures}}
    if gpu is not None:
        row["gpu"] = gpu
    if gpu_name is not None:
        row["gpu_name"] = gpu_name
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def roof_3090_s():
    """The plain roofline of WORKLOAD on an RTX 3090 (about 16 ms; the shipped model predicts about 35 ms)."""
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-3090")
    model = model_for(Workload.from_dict(WORKLOAD))
    return roofline_s(model, model.estimate(gpu, with_time=False).workload, gpu)


def _one_line_refusal(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error:"), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert not user_calibration_path().exists()


def test_a_step_faster_than_the_roofline_is_refused_and_nothing_is_written(gpuwise, tmp_path, roof_3090_s):
    # was: accepted, every factor ×0.05, and estimate then predicted 3.6x the card's peak FLOPs
    sane = write_row(tmp_path / "m3090.jsonl", 0.05)
    bad = write_row(tmp_path / "bad.jsonl", 1e-6)
    r = gpuwise("calibrate", sane, bad)
    _one_line_refusal(r, "bad.jsonl:1", "1e-06 s", f"{ROOFLINE_FLOOR_SHARE * roof_3090_s:.3g} s", "rtx-3090",
                      "roofline")
    est = gpuwise("estimate", WORKLOAD["model"], "-b", "64", "--precision", "amp-fp16", "--optimizer", "momentum",
                  "--gpu", "rtx-3090", "--json")
    assert est.returncode == 0 and json.loads(est.stdout)["calibration"] is None


def test_the_floor_leaves_room_for_runs_that_beat_the_roofline_of_the_ops_bytes(gpuwise, tmp_path, roof_3090_s):
    # the fastest public run (benchmarks/results/time_cases.csv) took 0.73 of its roofline
    r = gpuwise("calibrate", write_row(tmp_path / "fast.jsonl", 0.73 * roof_3090_s))
    assert r.returncode == 0, r.stderr
    r = gpuwise("calibrate", "--reset")
    r = gpuwise("calibrate", write_row(tmp_path / "under.jsonl", 0.99 * ROOFLINE_FLOOR_SHARE * roof_3090_s))
    _one_line_refusal(r, "under.jsonl:1")


def test_a_factor_at_the_fits_floor_is_warned_and_listed(caplog):
    row = FitRow(fingerprint="a", predicted_by_class_s={"conv/fp16": 0.03, "norm/fp16": 0.01},
                 predicted_other_s=0.0, measured_step_time_s=1e-6, predicted_host_s=0.001)
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        cal = fit_gpu("rtx-3090", [row])
    assert cal.at_bounds == {"conv/fp16": "floor", "norm/fp16": "floor", "launch": "floor"}
    assert cal.to_dict()["at_bounds"] == cal.at_bounds
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "floor" in r.getMessage()]
    assert "rtx-3090" in warning and "conv/fp16 ×0.05 (its floor)" in warning and f"×{MIN_FACTOR:g}" in warning
    # and the run it cannot follow is named (calibrate --forget drops it)
    assert set(cal.unreproduced) == {"a"}
    assert [r for r in caplog.records if r.levelno == logging.WARNING and "run a measured" in r.getMessage()]


def test_a_factor_at_the_fits_ceiling_is_listed():
    cal = GpuCalibration(gpu="rtx-3090", class_factors={"conv/fp16": MAX_FACTOR, "norm/fp16": 2.0}, global_factor=2.0,
                         host_s=0.0, memory_offset_bytes=None, runs=())
    assert cal.at_bounds == {"conv/fp16": "ceiling"}


def test_a_fit_inside_its_bounds_warns_nothing(caplog):
    row = FitRow(fingerprint="a", predicted_by_class_s={"conv/fp16": 0.03, "norm/fp16": 0.01},
                 predicted_other_s=0.0, measured_step_time_s=0.06, predicted_host_s=0.001)
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        cal = fit_gpu("rtx-3090", [row])
    assert cal.at_bounds == {} and not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_row_with_an_unknown_gpu_id_is_refused_whatever_its_gpu_name(gpuwise, tmp_path):
    # was: accepted as an RTX 3090 through its gpu_name (docs: an unknown GPU is refused)
    r = gpuwise("calibrate", write_row(tmp_path / "unknown.jsonl", 0.05, gpu="rtx-9999"))
    _one_line_refusal(r, "unknown.jsonl:1", "rtx-9999")


def test_a_row_whose_gpu_and_gpu_name_disagree_is_refused(gpuwise, tmp_path):
    r = gpuwise("calibrate", write_row(tmp_path / "mixed.jsonl", 0.05, gpu_name="NVIDIA A100-SXM4-40GB"))
    _one_line_refusal(r, "mixed.jsonl:1", "rtx-3090", "a100-40gb-sxm4", "NVIDIA A100-SXM4-40GB")


@pytest.mark.parametrize("gpu, gpu_name", [("rtx-3090", None), (None, NAME_3090), ("rtx-3090", "NVIDIA Mystery")])
def test_a_row_naming_its_gpu_one_way_or_with_a_name_the_catalog_lacks_calibrates_that_gpu(gpuwise, tmp_path,
                                                                                           gpu, gpu_name):
    r = gpuwise("calibrate", write_row(tmp_path / "row.jsonl", 0.05, gpu=gpu, gpu_name=gpu_name), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calibration"]["gpu"] == "rtx-3090"
