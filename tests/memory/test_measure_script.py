"""benchmarks/gpu/measure.py: the GPU ground-truth script, run here in its CPU dry-run mode."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "measure.py"


def test_suite_covers_the_required_workloads():
    out = subprocess.run([sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()]
    assert len(rows) >= 20
    models = {r["model"] for r in rows}
    for needed in ("torchvision:resnet18", "torchvision:resnet50", "torchvision:resnet101", "torchvision:vit_b_16",
                   "torchvision:efficientnet_b0", "torchvision:convnext_tiny", "torchvision:mobilenet_v3_large",
                   "hf:bert-base-uncased", "hf:bert-large-uncased", "hf:gpt2", "hf:gpt2-medium"):
        assert needed in models
    assert any("Llama" in m for m in models)
    assert {r.get("precision", "fp32") for r in rows} >= {"fp32", "amp-fp16", "amp-bf16"}
    assert {r.get("optimizer") for r in rows} >= {"sgd", "momentum", "adamw"}
    assert {r.get("seq_len") for r in rows if "bert" in r["model"]} >= {128, 512}
    # the stack inputs that move the peak (issue 15)
    assert {r.get("attention", "sdpa") for r in rows} >= {"sdpa", "eager"}
    assert {r.get("optimizer_impl", "foreach") for r in rows} >= {"foreach", "fused", "for-loop"}
    assert any(r.get("keep_grads") for r in rows)
    eager_large = {r["batch_size"] for r in rows if r["model"] == "hf:bert-large-uncased" and r.get("attention") == "eager"}
    assert eager_large >= {1, 4}
    # small-batch eager inference, the host-bound regime (issue 16: batch 1-16)
    small = {r["batch_size"] for r in rows if r["model"] == "torchvision:resnet50" and r.get("mode") == "infer"}
    assert small >= {1, 4, 16}


@pytest.mark.slow
def test_dry_run_honours_the_stack_inputs(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--only", "bert-base-s128-bs32-ampfp16-adamw-keepgrads,"
         "bert-large-s512-bs1-fp32-adamw-fused-eager", "--warmup", "1", "--steps", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,   # ~1 min here; a loaded CI machine may take several
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "cpu-dry-run.json").read_text())
    assert [r["status"] for r in doc["results"]] == ["ok", "ok"], [r.get("error") for r in doc["results"]]


@pytest.mark.slow
def test_dry_run_measures_a_vision_and_a_transformers_model_on_cpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--only", "resnet18-bs256-fp32,bert-base-s128-bs32-fp32",
         "--warmup", "1", "--steps", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,   # ~1 min here; a loaded CI machine may take several
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "cpu-dry-run.json").read_text())   # file named after the GPU
    assert doc["gpu"]["dry_run"] is True and doc["gpu"]["torch"]
    assert [r["id"] for r in doc["results"]] == ["resnet18-bs256-fp32-momentum", "bert-base-s128-bs32-fp32-adamw"]
    for row in doc["results"]:
        assert row["status"] == "ok", row.get("error")
        assert row["median_step_time_s"] > 0 and len(row["step_times_s"]) == 2
        assert row["param_count"] > 0
        assert "max_memory_allocated_bytes" not in row     # no CUDA call in a dry run
    # the host-cost probe ran first, one figure per call kind, in microseconds
    probe = doc["host_probe_us"]
    assert "error" not in probe, probe
    assert {"conv (nn.Conv2d 3x3)", "matmul (nn.Linear)", "bare aten op (Tensor.add)"} <= set(probe)
    assert all(0 < us < 1e5 for us in probe.values())


def test_unknown_workload_filter_is_an_error(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--only", "nonesuch", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "matches no workload" in proc.stderr
