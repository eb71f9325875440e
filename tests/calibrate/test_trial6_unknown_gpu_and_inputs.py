"""A trial of `gpuwise calibrate`: a run on a GPU the catalog lacks (a TITAN RTX) was refused with "run `gpuwise gpus`
to list the known GPUs", no way on; a plain-text file said "junk.db:1: not JSON", not what calibrate reads."""

from __future__ import annotations

import json

from tests.calibrate.helpers import synthetic_log, write_model

TITAN_NAME = "NVIDIA TITAN RTX"
# docs/catalog.md's example of a GPU the catalog lacks
TITAN_TABLE = """
[[gpu]]
id = "titan-rtx"
name = "NVIDIA TITAN RTX"
arch = "turing"
compute_capability = "7.5"
sm_count = 72
cuda_cores = 4608
tensor_cores = 576
memory = "24GiB"
memory_bandwidth_gbs = 672
l2 = "6MiB"
peak_tflops = { fp32 = 16.3, fp16 = 130.5, int8 = 261 }
tdp_w = 280
pcie_gen = 3
source = "NVIDIA TITAN RTX spec page"
"""
FULL_TABLE_KEYS = ("id", "arch", "compute_capability", "sm_count", "cuda_cores", "tensor_cores", "memory", "l2",
                   "memory_bandwidth_gbs", "peak_tflops", "tdp_w", "pcie_gen", "source")


def mlp_log(tmp_path, gpu_name: str | None = None, name: str = "run.db"):
    workload = {"model": write_model(tmp_path), "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    extra = {"gpu_name": gpu_name} if gpu_name else {}
    return synthetic_log(tmp_path / name, workload=workload, step_time_s=0.05, **extra)


def one_line(stderr: str) -> str:
    (line,) = stderr.strip().splitlines()
    return line


def test_a_run_on_a_gpu_the_catalog_lacks_says_which_table_to_add_and_where(gpuwise, config_dir, tmp_path):
    r = gpuwise("calibrate", mlp_log(tmp_path, TITAN_NAME))
    assert r.returncode == 2 and r.stdout == ""
    line = one_line(r.stderr)
    assert f"'{TITAN_NAME}', is not in the catalog" in line and "run `gpuwise gpus`" not in line
    assert f'[[gpu]] table with name = "{TITAN_NAME}"' in line
    assert all(key in line for key in FULL_TABLE_KEYS) and "based_on" in line
    assert "--catalog FILE" in line and str(config_dir / "catalog.toml") in line and "docs/catalog.md" in line


def test_the_table_the_refusal_asks_for_makes_the_run_calibrate_from_either_file(gpuwise, config_dir, tmp_path):
    log = mlp_log(tmp_path, TITAN_NAME)
    mine = tmp_path / "mine.toml"
    mine.write_text(TITAN_TABLE)
    r = gpuwise("calibrate", log, "--catalog", mine, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calibration"]["gpu"] == "titan-rtx"
    gpuwise("calibrate", "--reset")
    config_dir.mkdir(exist_ok=True)
    (config_dir / "catalog.toml").write_text(TITAN_TABLE)         # the user catalog, read by default
    r = gpuwise("calibrate", log, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calibration"]["gpu"] == "titan-rtx"


def test_a_plain_text_file_is_said_to_be_none_of_the_inputs_calibrate_reads(gpuwise, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_text("hello\n")
    r = gpuwise("calibrate", junk)
    assert r.returncode == 2 and r.stdout == ""
    line = one_line(r.stderr)
    assert line.startswith(f"gpuwise: error: {junk}: not a run log (SQLite")
    assert "measure.py result" in line and "exported rows (JSON lines" in line


def test_a_json_document_of_another_kind_is_said_to_be_json_of_the_wrong_kind(gpuwise, tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{\n  "loss": 1.0\n}\n')
    line = one_line(gpuwise("calibrate", other).stderr)
    assert f"{other}: JSON, but not a measure.py result" in line and ":1: not JSON" not in line


def test_a_rows_file_damaged_after_its_first_row_names_the_bad_line(gpuwise, tmp_path):
    rows = tmp_path / "rows.jsonl"
    assert gpuwise("calibrate", mlp_log(tmp_path), "--export", rows).returncode == 0
    rows.write_text(rows.read_text() + "{broken\n")
    line = one_line(gpuwise("calibrate", rows).stderr)
    assert f"{rows}:2: not JSON" in line

