"""A calibration of a GPU that only a `--catalog` file defines applies wherever that catalog is passed: estimate,
recommend, report and advise each read the user's calibration against the catalog they loaded (before, they read
it against the shipped and user catalogs: the table was left out, with a warning to delete it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODEL = "torchvision:resnet18"
JOB = ["-b", "64", "--precision", "amp-fp16", "--optimizer", "momentum"]
WORKLOAD = {"model": MODEL, "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}
GPU = "my-a100-250w"
CATALOG = f"""
[[gpu]]
id = "{GPU}"
based_on = "NVIDIA A100-SXM4-40GB"
name = "A100 40GB capped at 250 W"
tdp_w = 250
"""
SMI_LOG = Path(__file__).parents[1] / "fixtures" / "seed_a100_smi.csv"
DROPPED = "is no GPU of the catalog"


@pytest.fixture
def calibrated(gpuwise, tmp_path):
    """The --catalog file, with a calibration of its GPU in the user's calibration file."""
    catalog = tmp_path / "cat.toml"
    catalog.write_text(CATALOG)
    row = {"format": "gpuwise-measurement/1", "gpu": GPU, "gpu_name": "A100 40GB capped at 250 W",
           "workload": WORKLOAD, "figures": {"step_time_s": 0.05, "timed_steps": 20}}
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    r = gpuwise("calibrate", rows, "--catalog", catalog)
    assert r.returncode == 0, r.stderr
    return catalog


def test_estimate_applies_the_calibration_of_a_catalog_file_gpu(gpuwise, calibrated):
    r = gpuwise("estimate", MODEL, *JOB, "--gpu", GPU, "--catalog", calibrated, "--json")
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr
    assert json.loads(r.stdout)["calibrated_gpus"] == [GPU]


def test_recommend_applies_the_calibration_of_a_catalog_file_gpu(gpuwise, calibrated):
    r = gpuwise("recommend", MODEL, *JOB, "--steps", "1000", "--gpus", f"{GPU},rtx-4090", "--catalog", calibrated,
                "--json")
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr
    assert json.loads(r.stdout)["user_calibration_carried_from"] == GPU


def test_report_keeps_the_calibration_of_a_catalog_file_gpu(gpuwise, calibrated):
    r = gpuwise("report", SMI_LOG, "--catalog", calibrated, "--json")
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr


def test_advise_keeps_the_calibration_of_a_catalog_file_gpu(gpuwise, calibrated, tmp_path):
    log = tmp_path / "loss.csv"
    log.write_text("step,loss\n" + "".join(f"{s},{2 + 3 * s ** -0.5:.5f}\n" for s in range(1, 301)))
    r = gpuwise("advise", log, "--model", MODEL, *JOB, "--gpu", GPU, "--step-time-s", "0.1", "--catalog", calibrated,
                "--json")
    assert r.returncode == 0, r.stderr
    assert DROPPED not in r.stderr
