"""A run log may still be written while it is read: a reader checks its GPU samples (``bad_row_message``) and then
reads them, and a row the writer appends in between must not be read unchecked. Report, advise and the replay read
the rows written when the check began, and only those."""

from __future__ import annotations

import pytest

import gpuwise.advise.readers
import gpuwise.monitor.replay
import gpuwise.monitor.sample_checks
import gpuwise.report.sources
from gpuwise.advise import read_log
from gpuwise.monitor.replay import ReplayBackend
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog, read_gpu_samples

GIB = 2**30
# 500 % and more memory used than the GPU has: refused by every check, and loud wherever it is read as data
BAD_ROW = {"t_s": 200.0, "gpu_index": 2, "uuid": "GPU-2", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 500.0,
           "memory_used_bytes": 60 * GIB, "memory_total_bytes": 40 * GIB, "process_memory_bytes": 60 * GIB, "lost": 0}
# every module that may name the suspect-row reader the check calls, before and after the check had one home
CHECKERS = (gpuwise.monitor.sample_checks, gpuwise.report.sources, gpuwise.advise.readers, gpuwise.monitor.replay)


def _good(t_s: float, gpu: int) -> dict:
    return {"t_s": t_s, "gpu_index": gpu, "uuid": f"GPU-{gpu}", "name": "NVIDIA A100-SXM4-40GB",
            "utilization_pct": 40.0, "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB,
            "process_memory_bytes": GIB, "power_w": 150.0, "temperature_c": 50.0, "lost": 0}


@pytest.fixture
def live_log(tmp_path, monkeypatch):
    """A run log of two GPUs sampled three times and a loss curve, whose writer appends ``BAD_ROW`` as soon as a
    reader's check of the samples has looked at them."""
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.write_gpu_samples([_good(100.0 + k, g) for k in range(3) for g in (0, 1)])
        for step in range(20):
            log.log_train(step, t_s=100.0 + step, loss=2.0 - 0.01 * step)
    for module in CHECKERS:
        if hasattr(module, "read_gpu_samples_where"):
            monkeypatch.setattr(module, "read_gpu_samples_where", _appending_after(module.read_gpu_samples_where))
    return db


def _appending_after(check_read):
    def checked_then_appended(path, *args, **kwargs):
        rows = check_read(path, *args, **kwargs)
        with RunLog(path) as writer:
            writer.write_gpu_samples([BAD_ROW])
        return rows
    return checked_then_appended


def test_report_reads_only_the_rows_it_checked(live_log):
    log = load_usage_log(live_log)
    assert len(log.samples) == 6
    assert max(s.utilization_pct for s in log.samples) == 40.0
    assert len(read_gpu_samples(live_log)) == 7   # the row was appended, and left for the next read to check


def test_advise_takes_gpus_and_peak_only_from_the_rows_it_checked(live_log):
    log = read_log(live_log)
    assert (log.gpu_count, log.peak_memory_bytes) == (2, GIB)


def test_replay_replays_only_the_frames_it_checked(live_log):
    backend = ReplayBackend.from_file(live_log, stamp_now=False)
    replayed = [backend.sample() for _ in range(5)]   # three frames, then the last one repeats
    assert [[s.t_s for s in frame] for frame in replayed] == [[100.0] * 2, [101.0] * 2] + [[102.0] * 2] * 3

