"""What a new user's trial of `gpuwise report` found: figures on one stated basis for several GPUs, the
checkable table, notes where a log cannot say (no memory, no end), an overriding --gpu said and checked,
and messages that name what is wrong with a log (real run logs, real subprocesses)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from gpuwise.report import build_report
from gpuwise.report.predicted_vs_measured import Figure, PredictedVsMeasured
from gpuwise.runlog import read_meta

from tests.report.helpers import gpuwise_run_log, one_line, text_of

GIB = 2**30
PY = sys.executable
A100 = "NVIDIA A100-SXM4-40GB"


def two_gpus(k: int, *, power=(150.0, 150.0), used=(10 * GIB, 12 * GIB), busy=(60.0, 60.0)):
    return [{"t_s": 60.0 * k, "gpu_index": i, "name": A100, "utilization_pct": busy[i], "memory_used_bytes": used[i],
             "memory_total_bytes": 40 * GIB, "power_w": power[i]} for i in range(2)]


def test_power_of_several_gpus_is_said_per_gpu_and_in_all_on_one_basis(tmp_path, catalog):
    # the defect: "mean 600 W, peak 300 W": the mean summed over the GPUs, the peak of one GPU
    frames = [two_gpus(k, power=(100.0 + 100 * (k % 2), 300.0)) for k in range(6)]
    report = build_report(gpuwise_run_log(tmp_path / "p.db", frames), catalog, gpu_price=(15.0, "CNY"))
    p = report.usage.power
    means = [d.mean_power_w for d in report.usage.job_devices]
    peaks = [d.peak_power_w for d in report.usage.job_devices]
    assert p.gpu_count == 2 and p.mean_per_gpu_w == pytest.approx(sum(means) / 2)
    assert p.peak_per_gpu_w == max(peaks) and p.mean_total_w == pytest.approx(sum(means))
    assert p.mean_per_gpu_w <= p.peak_per_gpu_w
    assert report.to_dict()["usage"]["power"]["mean_per_gpu_w"] == pytest.approx(p.mean_per_gpu_w)
    line = next(l for l in text_of(report, 120).splitlines() if l.startswith("Power"))
    assert f"per GPU: mean {p.mean_per_gpu_w:.0f} W, peak {p.peak_per_gpu_w:.0f} W" in line
    assert f"2 GPUs together: mean {p.mean_total_w:.0f} W" in line


def test_the_multi_gpu_table_is_checkable_work_is_price_times_time(tmp_path, catalog):
    # the defect: price/h was one GPU's while work/h was all GPUs': work/h != price/h × time×
    frames = [two_gpus(k) for k in range(6)]
    report = build_report(gpuwise_run_log(tmp_path / "t.db", frames), catalog, gpu_price=(15.0, "CNY"))
    r = report.right_sizing
    assert r.gpu_count == 2
    priced = [o for o in r.options if o.cost_per_job_hour is not None]
    assert priced
    for o in priced:
        assert o.price_per_hour_all_gpus == pytest.approx(o.price_per_gpu_hour * 2)
        assert o.cost_per_job_hour == pytest.approx(o.price_per_hour_all_gpus * o.time_factor)
        assert o.to_dict()["price_per_hour_all_gpus"] == pytest.approx(o.price_per_hour_all_gpus)
    text = text_of(report, 120)
    best = r.cheaper[0]
    row = next(l for l in text.splitlines() if l.startswith(f"{best.gpu_id} ×2 "))
    cells = row.split()
    price_cell, work_cell = cells[4], cells[5]   # id, ×2, GiB, time×, price/h, work/h
    assert float(price_cell.strip("¥").replace(",", "")) == pytest.approx(best.price_per_hour_all_gpus, abs=0.006)
    assert float(work_cell.strip("¥").replace(",", "")) == pytest.approx(best.cost_per_job_hour, abs=0.006)
    assert "price/h: 2 GPUs together" in " ".join(text.split())


def test_a_log_without_memory_figures_says_why_there_is_no_right_sizing(tmp_path, catalog):
    frames = [[{"t_s": 10.0 * k, "gpu_index": 0, "name": A100, "utilization_pct": 50.0, "power_w": 100.0}]
              for k in range(4)]
    report = build_report(gpuwise_run_log(tmp_path / "nomem.db", frames), catalog)
    assert report.right_sizing is None
    said = [n for n in report.to_dict()["notes"] if "no memory" in n]
    assert len(said) == 1 and "no cheaper GPU" in said[0]
    assert "no memory" in text_of(report, 200) and "no cheaper GPU" in text_of(report, 200)


def test_a_gpu_override_is_said_checked_against_the_peak_and_the_footnote_needs_a_star(tmp_path, catalog):
    frames = [[{"t_s": 10.0 * k, "gpu_index": 0, "name": A100, "utilization_pct": 50.0,
                "memory_used_bytes": 30 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(4)]
    path = gpuwise_run_log(tmp_path / "r80.db", frames)
    report = build_report(path, catalog, gpu="rtx-4090")
    text = one_line(text_of(report, 200))
    assert "compared as NVIDIA GeForce RTX 4090 (--gpu)" in text and A100 in text
    assert report.to_dict()["compared_as"] == "NVIDIA GeForce RTX 4090"
    (warning,) = report.warnings
    assert "30.0 GiB" in warning and "24.0 GiB" in warning and "--gpu rtx-4090" in warning
    assert f"warning: {warning}" in text and report.to_dict()["warnings"] == [warning]
    # neither the rented GPU nor any other fits 30 GiB with 99% kept free: no table, no footnote
    empty = build_report(path, catalog, gpu="rtx-4090", headroom_fraction=0.99)
    assert "* the rented GPU" not in text_of(empty, 80) and "No GPU in the catalog holds" in text_of(empty, 80)
    assert "* the rented GPU" not in text          # the 4090 cannot hold 30 GiB: no starred row
    # the logged GPU named again: no override, no warning, the starred row and its footnote
    same = build_report(path, catalog, gpu="a100-40gb-sxm4")
    assert same.compared_as is None and not same.warnings and "* the rented GPU" in text_of(same, 80)


def _committed_samples(log) -> int:
    """The samples a reader sees in ``log`` so far (0 before it has its table)."""
    if not log.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{log}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT COUNT(DISTINCT t_s) FROM gpu_samples").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_a_run_killed_outright_is_reported_as_unfinished(tmp_path, catalog):
    # the defect: a log of a run that never ended was reported as complete
    frames = tmp_path / "frames.json"
    frames.write_text(json.dumps({"frames": [two_gpus(0)]}))
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}")
    log = tmp_path / "killed.db"
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--interval", "0.1", "--",
                             PY, "-c", "import time; time.sleep(30)"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # sampled, and committed (the log commits at least once a second): waited for, not timed
        deadline = time.monotonic() + 120
        while _committed_samples(log) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, "no samples committed"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)      # gpuwise and its command: nothing can write the end
        proc.wait(timeout=60)
    assert "exit_code" not in read_meta(log)
    r = subprocess.run([PY, "-m", "gpuwise.cli.app", "report", str(log), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["run_ended"] is False and any("records no end" in n for n in out["notes"])
    ended = build_report(gpuwise_run_log(tmp_path / "ended.db", [two_gpus(k) for k in range(3)]), catalog)
    assert ended.run_ended is True and not any("records no end" in n for n in ended.notes)


def _report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gpuwise.cli.app", "report", *args], capture_output=True, text=True, timeout=120)


def test_a_damaged_run_log_is_called_damaged(tmp_path):
    whole = gpuwise_run_log(tmp_path / "whole.db", [two_gpus(k) for k in range(200)])
    cut = tmp_path / "cut.db"
    cut.write_bytes(whole.read_bytes()[:5000])
    r = _report(str(cut))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "damaged run log" in r.stderr and "not a gpuwise run log" not in r.stderr


def test_a_run_log_without_an_events_table_is_read(tmp_path):
    path = gpuwise_run_log(tmp_path / "old.db", [two_gpus(k) for k in range(3)])
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE events")
    r = _report(str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu_count"] == 2


def test_an_empty_file_is_called_empty(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    r = _report(str(empty))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "is empty" in r.stderr and "nvidia-smi" not in r.stderr


def test_an_unknown_gpu_names_the_valid_ones(tmp_path, catalog):
    # the one resolver every command uses: the closest names, or where to find them all
    path = gpuwise_run_log(tmp_path / "g.db", [two_gpus(k) for k in range(3)])
    r = _report(str(path), "--gpu", "nosuchgpu")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "gpuwise gpus" in r.stderr
    close = _report(str(path), "--gpu", "rtx-4909")
    assert close.returncode == 2 and "did you mean" in close.stderr and "rtx-4090" in close.stderr


def test_an_idle_stretch_at_the_start_says_from_the_start(tmp_path, catalog):
    frames = [[{"t_s": 10.0 * k, "gpu_index": 0, "name": A100, "utilization_pct": 0.0 if k < 8 else 80.0,
                "memory_used_bytes": 4 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(20)]
    text = one_line(text_of(build_report(gpuwise_run_log(tmp_path / "idle.db", frames), catalog), 200))
    assert "longest 80.0 s from the start" in text and "from 0.0 ms" not in text
    later = [[{**f[0], "utilization_pct": 80.0 if k < 4 or k >= 12 else 0.0}] for k, f in enumerate(frames)]
    text = one_line(text_of(build_report(gpuwise_run_log(tmp_path / "idle2.db", later), catalog), 200))
    assert "longest 80.0 s from 40.0 s in" in text


def test_predicted_vs_measured_never_wraps_a_phrase_at_80_columns(tmp_path, catalog):
    # the defect: "error not / measured" split over two lines
    frames = [[{"t_s": 10.0 * k, "gpu_index": 0, "name": A100, "utilization_pct": 50.0,
                "memory_used_bytes": 12 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(4)]
    report = build_report(gpuwise_run_log(tmp_path / "pvm.db", frames), catalog)
    comparison = PredictedVsMeasured("a100-40gb-sxm4", {"model": "torchvision:resnet50"}, None, (
        Figure("step time", "s", 0.1234, None), Figure("peak allocated", "bytes", 11.5 * GIB, None),
        Figure("peak reserved", "bytes", 12.25 * GIB, None), Figure("nvidia-smi total", "bytes", 13.1 * GIB, 12 * GIB)))
    lines = text_of(dataclasses.replace(report, predicted_vs_measured=comparison), 80).splitlines()
    for name in ("step time", "peak allocated", "peak reserved"):
        row = next(l for l in lines if l.strip().startswith(name))
        assert row.rstrip().endswith("not measured") and len(row) <= 80, row
    assert not any(l.strip() == "measured" for l in lines)


def test_the_docs_seed_example_is_the_tools_real_output():
    # the defect: docs/report.md showed `a40 48` GiB where the tool prints 45 (the doc was not re-captured)
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "report.md").read_text()
    command = "$ gpuwise report tests/fixtures/seed_a100_smi.csv --gpu-price ¥15 --html seed.html\n"
    shown = doc[doc.index(command) + len(command):].split("HTML report: seed.html")[0].splitlines()
    r = subprocess.run([PY, "-m", "gpuwise.cli.app", "report", "tests/fixtures/seed_a100_smi.csv", "--gpu-price", "¥15"],
                       capture_output=True, text=True, timeout=120, cwd=root, env=dict(os.environ, COLUMNS="100"))
    assert r.returncode == 0, r.stderr
    assert shown == r.stdout.splitlines(), "re-capture the example in docs/report.md from the tool's output"
