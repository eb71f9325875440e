"""Reports from gpuwise run logs: per-process memory, MIG instances, a lost GPU, PyTorch's peaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuwise.report import build_report
from gpuwise.report.errors import ReportError
from gpuwise.runlog import RunLog

from tests.report.helpers import sampler_log

GIB = 2**30
MIG_NAME = "NVIDIA A100-SXM4-40GB MIG 3g.20gb"


def record(path, frames, events=()):
    """The Sampler's log of ``frames``, watching this process (its memory is the job's)."""
    return sampler_log(path, frames, watch_pid=os.getpid(), events=tuple(events))


def test_process_memory_is_the_need_when_the_log_has_it(tmp_path, catalog):
    me = os.getpid()
    frames = [[{"t_s": 100.0 + 10 * k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 50.0,
                "memory_used_bytes": 14 * GIB, "memory_total_bytes": 40 * GIB,
                "processes": [{"pid": me, "used_memory_bytes": (8 + k) * GIB}, {"pid": 1, "used_memory_bytes": 4 * GIB}]}]
              for k in range(4)]
    report = build_report(record(tmp_path / "r.db", frames), catalog, gpu_price=(15.0, "CNY"))
    assert report.usage.needed_peak_bytes == 11 * GIB  # ours, not the other process's 4 GiB
    assert report.usage.job_devices[0].memory_basis == "process"
    assert report.usage.duration_s == 30.0


def test_mig_instances_are_right_sized_by_their_own_use(tmp_path, catalog):
    me = os.getpid()
    frames = [[
        {"t_s": 10.0 * k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_used_bytes": 9 * GIB,
         "memory_total_bytes": 40 * GIB, "power_w": 200.0},
        {"t_s": 10.0 * k, "gpu_index": 0, "mig_index": 0, "name": MIG_NAME, "utilization_pct": 70.0,
         "memory_used_bytes": 7 * GIB, "memory_total_bytes": 20 * GIB,
         "processes": [{"pid": me, "used_memory_bytes": 6 * GIB}]},
        {"t_s": 10.0 * k, "gpu_index": 0, "mig_index": 1, "name": MIG_NAME, "utilization_pct": 0.0,
         "memory_used_bytes": 2 * GIB, "memory_total_bytes": 20 * GIB, "processes": [{"pid": 1, "used_memory_bytes": 2 * GIB}]},
    ] for k in range(5)]
    report = build_report(record(tmp_path / "mig.db", frames), catalog)
    assert [d.label for d in report.usage.devices] == ["0/mig0", "0/mig1"]  # the parent row only repeats them
    assert report.usage.job_labels == ("0/mig0",)
    assert report.usage.needed_peak_bytes == 6 * GIB
    # the slice, not the whole A100 40GB (docs/catalog.md, MIG slices): its 20 GB, and no whole GPU's price
    assert report.right_sizing.rented_gpu_id == "a100-40gb-sxm4-mig-3g.20gb"
    assert report.right_sizing.rented_price_per_gpu_hour is None


def test_a_lost_gpu_is_reported_and_the_others_still_count(tmp_path, catalog):
    frames = [[
        {"t_s": 10.0 * k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 40.0,
         "memory_used_bytes": 10 * GIB, "memory_total_bytes": 40 * GIB},
        {"t_s": 10.0 * k, "gpu_index": 1, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 40.0,
         "memory_used_bytes": 12 * GIB, "memory_total_bytes": 40 * GIB, "lost": int(k >= 3)},
    ] for k in range(6)]
    report = build_report(record(tmp_path / "lost.db", frames), catalog)
    lost = {d.label: d.lost for d in report.usage.devices}
    assert lost == {"0": False, "1": True}
    assert report.usage.needed_peak_bytes == 12 * GIB and report.right_sizing.gpu_count == 2
    assert any("fell off the bus" in n for n in report.notes)


def test_pytorch_peaks_from_the_hook_are_in_the_report(tmp_path, catalog):
    frames = [[{"t_s": float(k), "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 40.0,
                "memory_used_bytes": 10 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(3)]
    message = json.dumps({"pid": 77, "devices": [{"device": 0, "max_allocated_bytes": 6 * GIB, "max_reserved_bytes": 9 * GIB}]})
    report = build_report(record(tmp_path / "t.db", frames, events=[("torch_memory", message)]), catalog)
    (peak,) = report.usage.torch_peaks
    assert (peak.pid, peak.max_allocated_bytes, peak.max_reserved_bytes) == (77, 6 * GIB, 9 * GIB)
    assert report.to_dict()["usage"]["torch_peaks"][0]["max_reserved_bytes"] == 9 * GIB


def test_an_empty_run_log_is_bad_input_not_a_report_of_zero_gpus(tmp_path, catalog):
    # the defect: an empty run log exited 0 with "0 × unknown GPU"
    path = tmp_path / "empty.db"
    RunLog(path).close()
    with pytest.raises(ReportError, match="no GPU samples"):
        build_report(path, catalog)
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no GPU samples" in r.stderr
    # it asked "was the job run under `gpuwise run`?" of a log that gpuwise run wrote
    assert "no NVIDIA driver or GPU was found while the job ran" in r.stderr and "was the job run" not in r.stderr


def test_a_run_log_of_training_metrics_only_points_to_advise(tmp_path, catalog):
    # the defect: a gpuwise.guard run log (metrics, no GPU samples) got "nothing to report", not where to go
    path = tmp_path / "guard.db"
    with RunLog(path) as log:
        for step in range(1, 9):
            log.log_train(step, loss=1.0 / step, lr=0.01)
    says = (f"{path}: the gpuwise run log has no GPU samples (no NVIDIA driver or GPU was found while the job ran) "
            f"but holds training metrics of 8 step(s): `gpuwise advise {path}` reads them")
    with pytest.raises(ReportError) as refused:
        build_report(path, catalog)
    assert str(refused.value) == says
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"gpuwise: error: {says}"], r.stderr
    advised = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "advise", str(path)], capture_output=True,
                             text=True)
    assert advised.returncode == 0, advised.stderr


@pytest.mark.parametrize("make, says", [
    (lambda p: p.mkdir(), "is a directory"),                                        # was "no such log"
    (lambda p: p.write_text("step,loss\n1,2.0\n2,1.8\n"), "goes to `gpuwise advise`"),   # a loss log
])
def test_a_log_report_cannot_read_says_what_it_is_and_where_it_goes(tmp_path, make, says):
    path = tmp_path / "the-log"
    make(path)
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
