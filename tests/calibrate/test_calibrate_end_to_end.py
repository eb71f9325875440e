"""Every run makes the next prediction better (issue 17), end to end on this CPU: a real guarded CPU
training job under `gpuwise run --model …` with the replay NVML backend leaves a run log with workload
and measurements; `report` prints predicted vs measured; `calibrate` writes the user file; the next
`estimate` of the same workload lands on the measurement, and other workloads move by the fitted class
factors only."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwise.calibrate import load, user_calibration_path
from gpuwise.calibrate.fit import class_key
from gpuwise.catalog import load_catalog, resolve_gpu
from tests.calibrate.helpers import GIB, replay_frames, synthetic_log, write_model, write_train_script

pytestmark = pytest.mark.slow   # a real training job in a subprocess, traced predictions

REPO = Path(__file__).resolve().parents[2]
KNOWN_FACTOR = 2.5


def _estimate(gpuwise, spec, *extra):
    r = gpuwise("estimate", spec, "--batch-size", "16", "--precision", "fp32", *extra, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def guarded_run(tmp_path_factory):
    """`gpuwise run --model SPEC --interval 0.1 -- python train.py` over replayed RTX 4090 samples."""
    folder = tmp_path_factory.mktemp("run")
    spec = write_model(folder)
    train = write_train_script(folder)
    frames = replay_frames(folder / "frames.json", process_bytes=3 * GIB)
    log = folder / "run.db"
    env = {**os.environ, "GPUWISE_MONITOR_BACKEND": f"replay:{frames}", "GPUWISE_CONFIG_DIR": str(folder / "cfg"),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--interval", "0.1", "--model", spec,
         "--batch-size", "16", "--precision", "fp32", "--json", "--",
         sys.executable, str(train), str(folder / "ckpt"), str(log), str(folder), spec],
        capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return spec, log, json.loads(r.stdout)


def test_a_guarded_run_records_its_workload_and_measurements(guarded_run):
    spec, log, out = guarded_run
    from gpuwise.report.measured import read_measurement

    m = read_measurement(log)
    assert m.workload["model"] == spec and m.workload["batch_size"] == 16
    assert m.step_time_s is not None and m.step_time_s > 0 and m.timed_steps == 16 - 5
    assert m.process_memory_bytes == 3 * GIB                       # NVML (replayed)
    assert m.gpu_name == "NVIDIA GeForce RTX 4090" and m.driver_version == "550.54.15"
    assert m.torch_version and m.torch_version.startswith("2.")
    # the report `gpuwise run` printed compares the run with gpuwise's prediction for that GPU
    pvm = out["report"]["predicted_vs_measured"]
    assert pvm["gpu"] == "rtx-4090"
    assert {f["name"] for f in pvm["figures"]} == {"step time", "peak allocated", "peak reserved", "nvidia-smi total"}


def test_report_prints_predicted_vs_measured_with_the_signed_error(guarded_run, gpuwise):
    spec, log, _ = guarded_run
    workload = ("--model", spec, "--batch-size", "16", "--precision", "fp32")
    r = gpuwise("report", log, *workload)
    assert r.returncode == 0, r.stderr
    assert "Predicted vs measured on rtx-4090" in r.stdout
    j = json.loads(gpuwise("report", log, *workload, "--json").stdout)
    step = next(f for f in j["predicted_vs_measured"]["figures"] if f["name"] == "step time")
    assert step["signed_error"] == pytest.approx((step["predicted"] - step["measured"]) / step["measured"])
    total = next(f for f in j["predicted_vs_measured"]["figures"] if f["name"] == "nvidia-smi total")
    assert total["measured"] == 3 * GIB
    assert j["right_sizing"]["method"] == "time predictor"


def test_report_never_runs_a_local_model_file_on_the_logs_word(guarded_run, gpuwise):
    _spec, log, _ = guarded_run
    j = json.loads(gpuwise("report", log, "--json").stdout)
    assert j["predicted_vs_measured"] is None
    assert any("local model file" in n and "--model" in n for n in j["notes"])


def test_report_compares_a_public_model_the_log_records_without_model(gpuwise, tmp_path):
    workload = {"model": "torchvision:resnet18", "batch_size": 4, "image_size": 64, "precision": "amp-fp16"}
    log = synthetic_log(tmp_path / "r18.db", workload=workload, step_time_s=0.01)
    html = tmp_path / "r.html"
    j = json.loads(gpuwise("report", log, "--json", "--html", html).stdout)
    assert j["predicted_vs_measured"]["gpu"] == "rtx-4090"
    assert "Predicted vs measured on rtx-4090" in html.read_text()
    # right-sizing anchors on the measured run and scales by the runtime's per-GPU ratios (no --model)
    assert j["right_sizing"]["method"] == "time predictor"


def test_calibrated_estimate_lands_on_the_measurement_and_other_workloads_move_by_the_class_factors(
        guarded_run, gpuwise, tmp_path):
    spec, real_log, _ = guarded_run
    before = _estimate(gpuwise, spec, "--gpu", "rtx-4090")
    assert before["calibration"] is None
    predicted_s = before["time"]["step_time_s"]
    # the real run's log with its step times replaced by a known multiple of the prediction
    log = tmp_path / "known.db"
    log.write_bytes(real_log.read_bytes())
    conn = sqlite3.connect(log)
    conn.execute("UPDATE train_metrics SET value = ? WHERE name = 'step_time_s'", (KNOWN_FACTOR * predicted_s,))
    conn.execute("INSERT INTO events VALUES (0, 'torch_memory', ?)", (json.dumps(
        {"pid": 1, "devices": [{"device": 0, "max_allocated_bytes": GIB // 4, "max_reserved_bytes": GIB // 2}]}),))
    conn.commit()
    conn.close()

    r = gpuwise("calibrate", log, "--json")
    assert r.returncode == 0, r.stderr
    assert user_calibration_path().is_file()
    cal = load()["rtx-4090"]

    after = _estimate(gpuwise, spec, "--gpu", "rtx-4090")
    # the line also says what it scaled for this job (was the bare label)
    assert after["calibration"].startswith("calibrated with 1 of your runs on rtx-4090: scaled ")
    measured_s = KNOWN_FACTOR * predicted_s
    assert abs(after["time"]["step_time_s"] - measured_s) / measured_s < 0.01     # one run fixes its workload
    # the memory total moved by the stack's offset: measured (3 GiB − ½ GiB) outside the allocator
    outside_predicted = before["memory"]["total_bytes"] - before["memory"]["peak_reserved_bytes"]
    assert cal.memory_offset_bytes == 3 * GIB - GIB // 2 - outside_predicted
    # no floor here: the replayed samples' process memory is matched as 'all' (their pid is gone), not the job's own
    # (a floor comes from the job's own memory only: test_trial8_floor_from_the_jobs_own_memory)
    assert after["memory"]["total_bytes"] == before["memory"]["total_bytes"] + cal.memory_offset_bytes

    # another workload on that GPU: exactly the calibration's composition of its shipped classes and host
    # time (fit.compose: device classes × factors, smooth max with the host's side) + what the classes do not cover
    shipped = _estimate(gpuwise, spec, "--gpu", "rtx-4090", "--no-user-calibration", "--optimizer", "sgd")
    other = _estimate(gpuwise, spec, "--gpu", "rtx-4090", "--optimizer", "sgd")
    by_class = shipped["time"]["by_class_s"]
    outside = shipped["time"]["step_time_s"] - sum(by_class.values())
    rtx4090 = resolve_gpu(load_catalog(None), "rtx-4090")
    expected = cal.compose(by_class, shipped["time"]["host_s"], lambda c: class_key(c, "fp32", rtx4090)).compute_s + outside
    assert other["time"]["step_time_s"] == pytest.approx(expected, rel=1e-9)
    assert other["time"]["step_time_s"] != pytest.approx(shipped["time"]["step_time_s"], rel=0.05)
    assert sum(other["time"]["by_class_s"].values()) == pytest.approx(other["time"]["compute_s"], rel=1e-9)
    # another GPU carries the calibration's step-time correction (was: the shipped model, so a comparison across
    # GPUs set the user's stack on the 4090 against the shipped model everywhere else); its memory stays shipped
    a100 = _estimate(gpuwise, spec, "--gpu", "a100-40gb-sxm4")
    a100_shipped = _estimate(gpuwise, spec, "--gpu", "a100-40gb-sxm4", "--no-user-calibration")
    assert a100["calibration"].startswith("carried to a100-40gb-sxm4, which none of your runs measured: "
                                          "calibrated with 1 of your runs on rtx-4090: scaled ")
    assert a100["calibration_carried_from"] == "rtx-4090" and after["calibration_carried_from"] is None
    a100_gpu = resolve_gpu(load_catalog(None), "a100-40gb-sxm4")
    by_class = a100_shipped["time"]["by_class_s"]
    expected = (cal.compose(by_class, a100_shipped["time"]["host_s"], lambda c: class_key(c, "fp32", a100_gpu)).compute_s
                + a100_shipped["time"]["step_time_s"] - sum(by_class.values()))
    assert a100["time"]["step_time_s"] == pytest.approx(expected, rel=1e-9)
    assert a100["memory"] == a100_shipped["memory"]
    all_gpus = _estimate(gpuwise, spec, "--gpu", "all")
    rows = {r["gpu"]: r for r in all_gpus["per_gpu"]}
    assert rows["rtx-4090"]["calibration"] == after["calibration"]
    assert rows["a100-40gb-sxm4"]["calibration_carried_from"] == "rtx-4090"
    assert rows["rtx-4090"]["step_time_s"] == pytest.approx(after["time"]["step_time_s"])
    assert all_gpus["calibrated_gpus"] == ["rtx-4090"]          # its own runs: the carried rows are not listed
    # the cut-down card is never faster than the one the runs measured (was 0.71x of it with a 1.5x calibration)
    assert rows["rtx-4090d"]["step_time_s"] >= rows["rtx-4090"]["step_time_s"] * (1 - 1e-6)   # host-bound: equal

    # recommend and report apply it too, and say so
    rec = json.loads(gpuwise("recommend", spec, "--batch-size", "16", "--precision", "fp32", "--steps", "100",
                             "--gpus", "rtx-4090", "--max-gpus", "1", "--json").stdout)
    assert [u.split(" (scaled: ")[0] for u in rec["user_calibration"]] == ["calibrated with 1 of your runs on rtx-4090"]
    rep = json.loads(gpuwise("report", log, "--model", spec, "--batch-size", "16", "--precision", "fp32",
                             "--json").stdout)["predicted_vs_measured"]
    assert rep["calibration"].startswith("calibrated with 1 of your runs on rtx-4090: scaled ")
    step = next(f for f in rep["figures"] if f["name"] == "step time")
    assert abs(step["signed_error"]) < 0.01

    # --no-user-calibration is the shipped model; --reset removes the file
    assert _estimate(gpuwise, spec, "--gpu", "rtx-4090", "--no-user-calibration")["time"] == before["time"]
    assert gpuwise("calibrate", "--reset").returncode == 0
    assert not user_calibration_path().exists()
    assert _estimate(gpuwise, spec, "--gpu", "rtx-4090")["calibration"] is None
