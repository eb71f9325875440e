"""What the user's calibration changed is said where it shows: `estimate --gpu all` marks the calibrated GPU's
row and names it in the JSON; `recommend` says memory was calibrated only when a run measured it."""

import json
import re

import pytest

from gpuwise.cli.app import main

MODEL = "torchvision:resnet18"
JOB = ["-b", "64", "--precision", "amp-fp16", "--optimizer", "momentum"]
WORKLOAD = {"model": MODEL, "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}
GIB = 2**30


@pytest.fixture
def run(capsys, monkeypatch, tmp_path):
    """The real command in this process, at 80 columns, with its own config dir: (exit code, stdout, stderr)."""
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "80")

    def go(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        out, err = capsys.readouterr()
        return exit_info.value.code or 0, out, err

    return go


def calibrate_3090(run, tmp_path, **figures):
    row = {"format": "gpuwise-measurement/1", "gpu": "rtx-3090", "gpu_name": "NVIDIA GeForce RTX 3090",
           "workload": WORKLOAD, "figures": {"step_time_s": 0.05, "timed_steps": 20, **figures}}
    path = tmp_path / "m3090.jsonl"
    path.write_text(json.dumps(row) + "\n")
    code, _, err = run("calibrate", path)
    assert code == 0, err


def test_estimate_on_every_gpu_marks_and_names_the_calibrated_one(run, tmp_path):
    calibrate_3090(run, tmp_path)
    code, out, err = run("estimate", MODEL, *JOB, "--gpu", "all", "--json")
    assert code == 0, err
    answer = json.loads(out)
    # was: top-level calibration null and nothing naming the calibrated row
    assert answer["calibrated_gpus"] == ["rtx-3090"]
    own = [r["gpu"] for r in answer["per_gpu"] if r["calibration"] and not r["calibration_carried_from"]]
    assert own == ["rtx-3090"]
    # every other GPU carries its step-time correction, and says from where
    assert {r["calibration_carried_from"] for r in answer["per_gpu"] if r["gpu"] != "rtx-3090"} == {"rtx-3090"}

    code, out, err = run("estimate", MODEL, *JOB, "--gpu", "all")
    assert code == 0, err
    table = out[out.index("Every GPU in the catalog"):]
    marked = [line.split()[0] for line in table.splitlines() if re.match(r"^\S+ \*\s", line)]
    assert marked == ["rtx-3090"]
    assert re.search(r"^\* calibrated with 1 of your runs on rtx-3090: scaled ", table, re.M), table
    assert "--no-user-calibration" in table
    carried = [line.split()[0] for line in table.splitlines() if re.match(r"^\S+ \+\s", line)]
    assert len(carried) == len(answer["per_gpu"]) - 1 and "rtx-3090" not in carried
    assert ("+ none of your runs measured these GPUs: their step times carry the calibration of your runs on "
            "rtx-3090 (memory as shipped)") in " ".join(table.split())


def test_estimate_without_a_calibration_marks_nothing(run):
    code, out, _ = run("estimate", MODEL, *JOB, "--gpu", "rtx-3090", "--json")
    assert code == 0 and json.loads(out)["calibrated_gpus"] == []


def test_estimate_on_one_calibrated_gpu_names_it(run, tmp_path):
    calibrate_3090(run, tmp_path)
    code, out, _ = run("estimate", MODEL, *JOB, "--gpu", "rtx-3090", "--json")
    assert code == 0 and json.loads(out)["calibrated_gpus"] == ["rtx-3090"]


def _calibration_lines(out):
    return " ".join(out.split())      # rich wraps at 80 columns


def test_recommend_says_memory_was_calibrated_only_when_a_run_measured_it(run, tmp_path):
    calibrate_3090(run, tmp_path)                   # no memory figures: calibrate says "not measured"
    code, out, err = run("recommend", MODEL, *JOB, "--gpus", "rtx-3090", "--steps", "1000")
    assert code == 0, err
    text = _calibration_lines(out)
    # was: "Step times and memory calibrated with 1 of your runs on rtx-3090 …"
    assert "Step times and memory" not in text
    assert "Step times calibrated with 1 of your runs on rtx-3090 (scaled: " in text
    assert "memory not measured: as shipped" in text

    calibrate_3090(run, tmp_path, peak_allocated_bytes=3 * GIB, peak_reserved_bytes=4 * GIB,
                   process_memory_bytes=5 * GIB)
    code, out, err = run("recommend", MODEL, *JOB, "--gpus", "rtx-3090", "--steps", "1000")
    assert code == 0, err
    assert "Step times and memory calibrated with 2 of your runs on rtx-3090" in _calibration_lines(out)


def test_recommend_json_says_what_each_calibration_covers(run, tmp_path):
    calibrate_3090(run, tmp_path)
    code, out, err = run("recommend", MODEL, *JOB, "--gpus", "rtx-3090", "--steps", "1000", "--json")
    assert code == 0, err
    [summary] = json.loads(out)["user_calibration"]
    assert summary.startswith("calibrated with 1 of your runs on rtx-3090 (scaled: ")
    assert summary.endswith("memory not measured: as shipped)")
