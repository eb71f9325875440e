"""The anonymous export row, the benchmarks/contributed reader, measure.py's JSON, and the guard alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from gpuwise.calibrate import read_measurements
from gpuwise.calibrate.export import ROW_FORMAT, export_row, parse_row
from gpuwise.guard import Guard
from gpuwise.report.measured import PRIVATE_MODEL, public_model, read_measurement
from gpuwise.runlog import read_meta
from tests.calibrate.helpers import GIB, synthetic_log, write_model

REPO = Path(__file__).resolve().parents[2]


def test_public_models_are_kept_and_local_files_become_private():
    assert public_model("torchvision:resnet50") == "torchvision:resnet50"
    assert public_model("hf:meta-llama/Llama-3.1-8B") == "hf:meta-llama/Llama-3.1-8B"
    for local in ("/home/alice/net.py:factory", "hf:/data/alice/config.json", "hf:cfg/config.json", "net.py:make"):
        assert public_model(local) == PRIVATE_MODEL


def test_an_exported_row_names_no_path_host_or_user_and_reads_back(gpuwise, tmp_path):
    spec = write_model(tmp_path)
    log = synthetic_log(tmp_path / "run.db", workload={"model": spec, "batch_size": 16}, step_time_s=0.004)
    out = tmp_path / "rows.jsonl"
    r = gpuwise("calibrate", log, "--export", out)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    row = json.loads(text)
    assert row["format"] == ROW_FORMAT and row["gpu"] == "rtx-4090" and row["workload"]["model"] == PRIVATE_MODEL
    for secret in (str(tmp_path), os.uname().nodename, os.environ.get("USER") or "\0", "run.db"):
        assert secret not in text
    assert row["figures"]["step_time_s"] == 0.004 and row["figures"]["process_memory_bytes"] == 2 * GIB
    # and no calibration was written by an export
    assert not (tmp_path / "config" / "calibration.toml").exists()
    back = parse_row(row, "rows.jsonl:1")
    assert back.step_time_s == 0.004 and back.stack == {"driver": "550.54.15", "cuda": "12.4", "torch": "2.5.1"}


def test_benchmarks_contributed_reads_exported_rows(tmp_path):
    from gpuwise.report.measured import Measurement

    m = Measurement(gpu_name="NVIDIA GeForce RTX 4090", workload={"model": "torchvision:resnet18", "batch_size": 32},
                    step_time_s=0.02, timed_steps=50, peak_reserved_bytes=GIB, driver_version="550", torch_version="2.5.1")
    (tmp_path / "a.jsonl").write_text(json.dumps(export_row(m, "rtx-4090")) + "\n\n# a comment\n")
    r = subprocess.run([sys.executable, str(REPO / "benchmarks/contributed/load.py"), "--folder", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and rows[0]["step_time_s"] == 0.02 and rows[0]["workload"]["model"] == "torchvision:resnet18"
    (tmp_path / "b.jsonl").write_text('{"format": "something else"}\n')
    r = subprocess.run([sys.executable, str(REPO / "benchmarks/contributed/load.py"), "--folder", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "b.jsonl:1" in r.stderr


def test_measure_py_results_are_measurements_of_the_same_record(tmp_path):
    doc = {"gpu": {"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "cuda": "12.4", "torch": "2.5.1",
                   "dry_run": False},
           "results": [{"id": "r18", "workload": {"model": "torchvision:resnet18", "batch_size": 256,
                                                  "optimizer": "momentum"},
                        "status": "ok", "median_step_time_s": 0.05, "step_times_s": [0.05] * 10,
                        "max_memory_allocated_bytes": 5 * GIB, "max_memory_reserved_bytes": 6 * GIB,
                        "nvml_process_bytes": 7 * GIB},
                       {"id": "big", "workload": {"model": "hf:gpt2"}, "status": "oom"}]}
    p = tmp_path / "nvidia-h100.json"
    p.write_text(json.dumps(doc))
    [m] = read_measurements(p)
    assert (m.gpu_name, m.step_time_s, m.timed_steps, m.process_memory_bytes) == ("NVIDIA H100 80GB HBM3", 0.05, 10, 7 * GIB)
    assert m.workload["batch_size"] == 256 and m.workload["optimizer"] == "momentum" and m.torch_version == "2.5.1"


def test_the_guard_records_workload_step_times_and_versions(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(160, 8), torch.randint(0, 2, (160,)))
    log = tmp_path / "run.db"
    workload = {"model": "mine.py:factory", "batch_size": 16, "optimizer": "sgd"}
    with Guard(tmp_path / "ckpt", model, opt, run_log=log, workload=workload, verbose=False) as guard:
        guard.loader(data, batch_size=16, seed=0)
        for batch in guard.batches(max_steps=10):
            guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    meta = read_meta(log)
    assert json.loads(meta["workload"]) == workload and meta["torch_version"] == torch.__version__
    m = read_measurement(log)
    assert m.timed_steps == 5 and m.step_time_s > 0 and m.workload == workload
