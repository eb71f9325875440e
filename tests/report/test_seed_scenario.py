"""The seed's story end to end: an nvidia-smi CSV log of an A100 40GB at ~12 GB and ~30% busy ends in a report
naming cheaper GPUs that would have held the job, and the ¥ saved. Through the real CLI and the real catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEED = FIXTURES / "seed_a100_smi.csv"


def gpuwise(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "COLUMNS": "100"})


@pytest.fixture(scope="module")
def seed_json() -> dict:
    r = gpuwise("report", str(SEED), "--gpu-price", "¥15", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_fixture_is_what_its_script_writes(tmp_path):
    subprocess.run([sys.executable, str(FIXTURES / "make_seed_smi_log.py"), str(tmp_path / "seed.csv")],
                   check=True, capture_output=True)
    assert (tmp_path / "seed.csv").read_bytes() == SEED.read_bytes()


def test_seed_usage_is_about_12_gb_and_30_percent_busy(seed_json):
    assert seed_json["gpu_name"] == "NVIDIA A100-SXM4-40GB" and seed_json["source"] == "nvidia-smi csv"
    assert 11.5e9 < seed_json["needed_peak_bytes"] < 13.5e9
    assert 0.25 < seed_json["busy_share"] < 0.35
    assert seed_json["memory_basis"] == "used"
    stretches = seed_json["usage"]["devices"][0]["idle_stretches"]
    assert max(s["duration_s"] for s in stretches) >= 15 * 60  # the checkpoint-upload stall


def test_seed_report_names_cheaper_gpus_that_fit_and_the_yuan_saved(seed_json):
    rs = seed_json["right_sizing"]
    assert rs["rented_gpu_id"] == "a100-40gb-sxm4" and rs["currency"] == "CNY"
    assert rs["method"].startswith("datasheet ratio")
    cheaper = seed_json["cheaper"]
    assert "rtx-4090" in cheaper and any(g.startswith("v100") for g in cheaper)
    by_id = {o["gpu"]: o for o in rs["options"]}
    assert by_id["t4"]["fits"] and by_id["rtx-4090"]["fits"]
    for gpu_id in cheaper:
        o = by_id[gpu_id]
        assert o["fits"] and o["saving_per_hour"] > 0 and o["time_factor"] >= 0.5
        assert o["saving_per_month"] == pytest.approx(730 * o["saving_per_hour"])
    # A GPU smaller than the need is never offered: the one fit rule, 5% of each GPU's memory kept free.
    assert all(by_id[g]["gpu_memory_bytes"] * (1 - rs["headroom_fraction"]) >= rs["needed_bytes"] for g in cheaper)
    assert all(by_id[g]["spare_bytes"] >= 0 for g in cheaper)


def test_seed_report_text_says_it_in_yuan():
    r = gpuwise("report", str(SEED), "--gpu-price", "15")
    assert r.returncode == 0, r.stderr
    assert "rtx-4090" in r.stdout and "¥" in r.stdout and "Verdict" in r.stdout
    assert "datasheet ratio" in r.stdout and "kept free" in r.stdout


def test_a_malformed_log_exits_2_naming_the_line(tmp_path):
    lines = SEED.read_text().splitlines()
    lines[41] = lines[41].replace(" %,", " percent,", 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    r = gpuwise("report", str(bad))
    assert r.returncode == 2
    assert "bad.csv:42:" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_dmon_log_needs_the_gpu_named_and_then_right_sizes(tmp_path):
    dmon = tmp_path / "dmon.txt"
    rows = "\n".join(f"    0    {90 + i % 7}     45      -     {25 + i % 11}     10      0      0   1215   1410"
                     for i in range(60))
    dmon.write_text("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk\n"
                    "# Idx      W      C      C      %      %      %      %    MHz    MHz\n" + rows + "\n")
    r = gpuwise("report", str(dmon), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # dmon without -s m has no memory: the report says what it can and why it cannot right-size.
    assert out["busy_share"] == pytest.approx(0.299, abs=0.01) and out["right_sizing"] is None
    assert any("--gpu" in n for n in out["notes"])
