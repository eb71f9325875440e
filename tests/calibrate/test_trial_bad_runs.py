"""A new user's trial of bad runs: a step far slower than any step of its job, runs of one workload that disagree,
a run the fit cannot follow, a run to forget, a damaged calibration file to reset, and a run log with negative step
times. Refusals are one line, exit 2, and leave the calibration file as it was."""

import json
import logging
import sqlite3

import pytest

from gpuwise.calibrate import user_calibration_path
from gpuwise.calibrate.apply import corrected_time
from gpuwise.calibrate.fit import SAME_WORKLOAD_TOLERANCE, UNREPRODUCED_RATIO, FitRow, GpuCalibration, fit_gpu
from gpuwise.calibrate.rows import PREDICTION_CEILING_FACTOR
from gpuwise.calibrate.store import DAMAGED_SUFFIX, load
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for
from gpuwise.runtime.model import StepPace, StepTime
from gpuwise.runlog import read_train_metrics
from gpuwise.workload import Workload
from tests.calibrate.helpers import GPU_NAME, synthetic_log, write_model

WORKLOAD = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "adamw"}
FIGURES = {"timed_steps": 20, "peak_allocated_bytes": 1020054732, "peak_reserved_bytes": 1288490188,
           "process_memory_bytes": 2040109465}


def write_row(path, step_time_s, *, gpu="rtx-4090", gpu_name=GPU_NAME, workload=WORKLOAD):
    """The row the user's trial made by hand (a gpuwise-measurement/1 row of an RTX 4090)."""
    row = {"format": "gpuwise-measurement/1", "gpu": gpu, "gpu_name": gpu_name,
           "stack": {"driver": "550.54.15", "cuda": "12.4", "torch": "2.5.1"}, "workload": workload,
           "figures": {"step_time_s": step_time_s, **FIGURES}, "gpuwise_version": "0.1.0"}
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def shipped_4090_s():
    """The shipped model's step time of WORKLOAD on an RTX 4090, host issue time included (about 21 ms)."""
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    return model_for(Workload.from_dict(WORKLOAD)).estimate(gpu).time.step_time_s


def _one_line_refusal(r, before: bytes | None, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error:"), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    path = user_calibration_path()
    assert (path.read_bytes() if path.exists() else None) == before


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gpuwise: warning:")]


def _calibration(gpuwise) -> dict:
    r = gpuwise("calibrate", "--json")
    assert r.returncode == 0, r.stderr
    [cal] = json.loads(r.stdout)["calibrations"]
    return cal


# 1: a ceiling beside the floor


def test_a_step_far_slower_than_its_jobs_prediction_is_refused_and_the_file_is_unchanged(gpuwise, tmp_path,
                                                                                         shipped_4090_s):
    # was: 11.6 days a step accepted, host +980825540.53 ms stored, and every estimate on the GPU 11.4 d a step
    assert gpuwise("calibrate", write_row(tmp_path / "good.jsonl", 0.031)).returncode == 0
    before = user_calibration_path().read_bytes()
    r = gpuwise("calibrate", write_row(tmp_path / "huge.jsonl", 1e6))
    _one_line_refusal(r, before, "huge.jsonl:1", "1e+06 s", "ceiling",
                      f"{PREDICTION_CEILING_FACTOR * shipped_4090_s:.3g} s", "rtx-4090")


def test_the_ceiling_leaves_room_for_host_bound_runs_up_to_it(gpuwise, tmp_path, shipped_4090_s):
    ceiling_s = PREDICTION_CEILING_FACTOR * shipped_4090_s
    r = gpuwise("calibrate", write_row(tmp_path / "slow.jsonl", 0.99 * ceiling_s), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calibration"]["unreproduced"] == {}      # one run alone is followed
    gpuwise("calibrate", "--reset")
    _one_line_refusal(gpuwise("calibrate", write_row(tmp_path / "over.jsonl", 1.01 * ceiling_s)), None, "over.jsonl:1")


def test_a_run_the_fit_cannot_reproduce_is_warned_listed_and_said(gpuwise, tmp_path):
    # was: "calibrated with 2 of your runs", the slow one at -100% and not a word about it
    good = write_row(tmp_path / "good.jsonl", 0.031)
    assert gpuwise("calibrate", good).returncode == 0
    r = gpuwise("calibrate", write_row(tmp_path / "slow.jsonl", 15.0))
    assert r.returncode == 0, r.stderr
    cal = _calibration(gpuwise)
    [slow_fp] = cal["unreproduced"]
    assert slow_fp == cal["run_fingerprints"][-1] and cal["unreproduced"][slow_fp] < 1 / UNREPRODUCED_RATIO - 1
    [warning] = [w for w in _warnings(r.stderr) if "not reproduced" in w]
    assert f"run {slow_fp} (" in warning and "slow.jsonl:1" in warning and "--forget" in warning
    assert "not reproduced" in r.stdout and slow_fp in r.stdout
    listed = " ".join(gpuwise("calibrate").stdout.split())
    assert f"run {slow_fp}: measured" in listed and "not reproduced" in listed


def test_a_fit_that_reproduces_its_runs_lists_none_as_unreproduced(caplog):
    rows = [FitRow(str(i), {"conv/fp16": 0.02 * (i + 1), "norm/fp16": 0.01}, 0.0, 0.05 * (i + 1),
                   predicted_host_s=0.005) for i in range(2)]
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        cal = fit_gpu("rtx-4090", rows)
    assert cal.unreproduced == {} and cal.disagreeing == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_host_term_is_not_said_hidden_when_it_set_the_pace_of_its_runs(gpuwise, tmp_path):
    # was: "host +… ms per step beside the kernels' issue (a GPU-bound step hides it)" whatever its size
    spec = write_model(tmp_path)
    log = synthetic_log(tmp_path / "mlp.db", step_time_s=0.004,
                        workload={"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"})
    r = gpuwise("calibrate", log, "--json")
    assert r.returncode == 0, r.stderr
    cal = load()["rtx-4090"]
    [run] = cal.runs
    step = cal.compose(run.predicted_by_class_s, run.predicted_host_s)
    assert cal.host_s > step.device_s                    # the host term alone outlasts the run's kernels
    text = " ".join(gpuwise("calibrate").stdout.split())     # unwrapped
    assert "a GPU-bound step hides it" not in text
    assert f"host +{cal.host_s * 1e3:.2f} ms per step" in text and "it set the pace of 1 of its 1 run(s)" in text


def test_a_step_your_host_term_paces_is_said_host_bound_not_compute(gpuwise, tmp_path):
    # was: a calibrated host term 20x the kernels' time still printed "bound by compute"
    spec = write_model(tmp_path)
    workload = {"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    log = synthetic_log(tmp_path / "mlp.db", step_time_s=0.004, workload=workload)
    assert gpuwise("calibrate", log).returncode == 0
    args = ("estimate", spec, "--batch-size", "16", "--precision", "fp32", "--optimizer", "adamw", "--gpu", "rtx-4090")
    calibrated = json.loads(gpuwise(*args, "--json").stdout)
    shipped = json.loads(gpuwise(*args, "--no-user-calibration", "--json").stdout)
    assert shipped["time"]["bound"] != "host"
    assert calibrated["time"]["bound"] == "host"
    assert "bound by host" in " ".join(gpuwise(*args).stdout.split())


def test_a_tiny_host_term_does_not_relabel_a_launch_bound_step():
    # the review: any host term above zero turned "launch" into "host"
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    step = StepTime(gpu="rtx-4090", count=1, step_time_s=0.010, samples_per_s=100.0,
                    by_class_s={"matmul": 0.002, "launch": 0.008}, bound="launch", compute_s=0.010, host_s=0.010,
                    device_s=0.002, pace=StepPace(gpus_s=0.010, communication_s=0.0, host_s=0.010, device_s=0.002,
                                                  kernels=100, compiled=False, device_bound="compute"))
    for host_s, bound in ((1e-9, "launch"), (0.050, "host")):
        cal = GpuCalibration(gpu="rtx-4090", class_factors={}, global_factor=1.0, host_s=host_s,
                             memory_offset_bytes=None, runs=())
        assert corrected_time(step, cal, "fp32", gpu).bound == bound


# 17b: runs of one workload that disagree


def test_runs_of_one_workload_twice_apart_are_warned_naming_both(gpuwise, tmp_path):
    # was: 0.031 s and 0.062 s accepted without a word, the fit at 37.2 ms
    r = gpuwise("calibrate", write_row(tmp_path / "a.jsonl", 0.031), write_row(tmp_path / "b.jsonl", 0.062), "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)["calibration"]
    assert cal["disagreeing"] == [cal["run_fingerprints"]]
    [warning] = [w for w in _warnings(r.stderr) if "runs of one workload" in w]
    for fp, source in zip(cal["run_fingerprints"], ("a.jsonl:1", "b.jsonl:1")):
        assert f"run {fp} ({tmp_path / source})" in warning
    assert f"{0.062 / 0.031:.2f}x apart" in warning and f"{SAME_WORKLOAD_TOLERANCE:.0%}" in warning


def test_runs_of_one_workload_within_the_tolerance_or_of_other_workloads_are_not_warned(caplog):
    shipped = {"conv/fp16": 0.02, "norm/fp16": 0.01}
    near = [FitRow("a", shipped, 0.0, 0.031, predicted_host_s=0.005),
            FitRow("b", shipped, 0.0, 0.031 * (1 + 0.9 * SAME_WORKLOAD_TOLERANCE), predicted_host_s=0.005)]
    other = [FitRow("a", shipped, 0.0, 0.031, predicted_host_s=0.005),
             FitRow("c", {"conv/fp16": 0.04, "norm/fp16": 0.02}, 0.0, 0.062, predicted_host_s=0.005)]
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        assert fit_gpu("rtx-4090", near).disagreeing == [] and fit_gpu("rtx-4090", other).disagreeing == []
    assert not [r for r in caplog.records if "runs of one workload" in r.getMessage()]
    far = [near[0], FitRow("b", shipped, 0.0, 0.031 * (1 + 1.1 * SAME_WORKLOAD_TOLERANCE), predicted_host_s=0.005)]
    assert [[r.fingerprint for r in g] for g in fit_gpu("rtx-4090", far).disagreeing] == [["a", "b"]]


# 2: forget one run


def test_forget_last_drops_the_newest_run_and_refits_on_the_others(gpuwise, tmp_path):
    good = write_row(tmp_path / "good.jsonl", 0.031)
    assert gpuwise("calibrate", good).returncode == 0
    alone = _calibration(gpuwise)
    assert gpuwise("calibrate", write_row(tmp_path / "bad.jsonl", 0.5)).returncode == 0
    both = _calibration(gpuwise)
    assert both["runs"] == 2 and both["class_factors"] != alone["class_factors"]
    r = gpuwise("calibrate", "--forget", "last", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["forgotten"] == both["run_fingerprints"][-1] and out["gpu"] == "rtx-4090"
    after = _calibration(gpuwise)
    assert after["run_fingerprints"] == alone["run_fingerprints"]
    assert after["class_factors"] == pytest.approx(alone["class_factors"], rel=1e-6)
    assert after["host_s"] == pytest.approx(alone["host_s"], abs=1e-9)


def test_forget_by_fingerprint_and_a_run_given_again_is_the_newest(gpuwise, tmp_path):
    a, b = write_row(tmp_path / "a.jsonl", 0.031), write_row(tmp_path / "b.jsonl", 0.033)
    for path in (a, b, a):                              # a again: the newest run now
        assert gpuwise("calibrate", path).returncode == 0
    fp_a, fp_b = json.loads(gpuwise("calibrate", a, "--json").stdout)["calibration"]["run_fingerprints"][::-1]
    assert gpuwise("calibrate", "--forget", "last").returncode == 0
    assert _calibration(gpuwise)["run_fingerprints"] == [fp_b]
    r = gpuwise("calibrate", "--forget", fp_b[:6])
    assert r.returncode == 0 and fp_b in r.stdout and "no calibration left" in " ".join(r.stdout.split())
    assert not user_calibration_path().exists()


def test_forget_refuses_an_unknown_run_or_an_ambiguous_last_in_one_line(gpuwise, tmp_path):
    assert gpuwise("calibrate", write_row(tmp_path / "a.jsonl", 0.031)).returncode == 0
    assert gpuwise("calibrate", write_row(tmp_path / "b.jsonl", 0.05, gpu="rtx-3090", gpu_name=None)).returncode == 0
    before = user_calibration_path().read_bytes()
    _one_line_refusal(gpuwise("calibrate", "--forget", "ffffffff"), before, "ffffffff", "no stored run")
    _one_line_refusal(gpuwise("calibrate", "--forget", "last"), before, "rtx-3090", "rtx-4090", "--gpu")
    _one_line_refusal(gpuwise("calibrate", "--forget", "last", tmp_path / "a.jsonl"), before, "--forget")
    assert gpuwise("calibrate", "--forget", "last", "--gpu", "rtx-3090").returncode == 0
    assert set(load()) == {"rtx-4090"}


# 3: a damaged file


@pytest.mark.parametrize("gpu", [[], ["--gpu", "rtx-4090"]])
def test_reset_moves_a_damaged_file_aside_whole_and_says_where(gpuwise, tmp_path, gpu):
    # was: `--reset --gpu` refused (exit 2), and the remedy it named deleted every GPU's calibration
    assert gpuwise("calibrate", write_row(tmp_path / "a.jsonl", 0.031)).returncode == 0
    path = user_calibration_path()
    with path.open("a") as f:
        f.write("garbage [[[\n")
    damaged = path.read_bytes()
    refused = gpuwise("estimate", WORKLOAD["model"], "-b", "64", "--gpu", "rtx-4090")
    assert refused.returncode == 2 and "--reset" in refused.stderr and DAMAGED_SUFFIX in refused.stderr
    backup = path.with_name(path.name + DAMAGED_SUFFIX)
    r = gpuwise("calibrate", "--reset", *gpu)
    assert r.returncode == 0, r.stderr
    assert str(backup) in "".join(r.stdout.split())         # the path, unwrapped
    assert backup.read_bytes() == damaged and not path.exists()
    path.write_bytes(damaged)                            # damaged again: the earlier copy is never overwritten
    r = gpuwise("calibrate", "--reset", *gpu, "--json")
    assert r.returncode == 0, r.stderr
    second = path.with_name(path.name + DAMAGED_SUFFIX + "-2")
    assert json.loads(r.stdout)["backup"] == str(second)
    assert second.read_bytes() == damaged and backup.read_bytes() == damaged and not path.exists()
    assert gpuwise("estimate", WORKLOAD["model"], "-b", "64", "--gpu", "rtx-4090").returncode == 0


# 12: negative step times in a run log


def _mlp_log(tmp_path, name, step_time_s):
    spec = write_model(tmp_path)
    return synthetic_log(tmp_path / name, step_time_s=step_time_s,
                         workload={"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"})


def _first_non_positive(log):
    return next((step, v) for step, _t, v in read_train_metrics(log)["step_time_s"] if v <= 0)


def test_a_run_log_of_negative_step_times_is_refused_naming_the_first(gpuwise, tmp_path):
    # was: "the run records no step times after warm-up (0 timed; …)"
    log = _mlp_log(tmp_path, "neg.db", -0.031)
    step, value = _first_non_positive(log)
    _one_line_refusal(gpuwise("calibrate", log), None, "neg.db",
                      f"step_time_s {value!r} is not positive at step {step}")


def test_one_negative_step_time_among_good_ones_is_refused_not_dropped(gpuwise, tmp_path):
    # was: dropped silently, and the run calibrated on the others
    assert gpuwise("calibrate", _mlp_log(tmp_path, "good.db", 0.004)).returncode == 0
    before = user_calibration_path().read_bytes()
    log = _mlp_log(tmp_path, "one.db", 0.004)
    with sqlite3.connect(log) as db:
        db.execute("UPDATE train_metrics SET value = -value WHERE name = 'step_time_s' AND step = 8")
    step, value = _first_non_positive(log)
    assert step == 8
    _one_line_refusal(gpuwise("calibrate", log), before, "one.db", f"step_time_s {value!r} is not positive at step 8")
    _one_line_refusal(gpuwise("calibrate", log, "--export", tmp_path / "rows.jsonl"), before, "at step 8")
