"""A bad GPU sample row of a run log is named in one line, written in one place (``bad_row_message``): report and
advise refuse the log with that line, and the replay names the same row by its frame and sample."""

from __future__ import annotations

import pytest

from gpuwise.advise import AdviseError, read_log
from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.replay import ReplayBackend
from gpuwise.monitor.sample_checks import bad_row_message
from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog, last_gpu_sample_rowid

GIB = 2**30


def _row(t_s: float, gpu: int, utilization_pct: float = 40.0) -> dict:
    return {"t_s": t_s, "gpu_index": gpu, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": utilization_pct,
            "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB, "process_memory_bytes": GIB, "lost": 0}


@pytest.fixture
def bad_log(tmp_path):
    """Two GPUs sampled twice, then a third GPU's row at 500 %, beside a loss curve."""
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.write_gpu_samples([_row(100.0 + k, g) for k in range(2) for g in (0, 1)] + [_row(200.0, 2, 500.0)])
        log.log_train(0, t_s=100.0, loss=2.0)
    return db


def test_the_line_names_the_row_its_gpu_time_and_problem(bad_log):
    assert bad_row_message(bad_log) == f"{bad_log}: gpu_samples row 5 (gpu 2, t_s 200.0): utilization_pct is 500 %, outside 0-100 %"


def test_rows_after_the_bound_are_not_judged(bad_log):
    assert bad_row_message(bad_log, up_to_rowid=last_gpu_sample_rowid(bad_log) - 1) is None


def test_report_and_advise_refuse_with_the_one_line(bad_log):
    with pytest.raises(ReportError) as by_report:
        load_usage_log(bad_log)
    with pytest.raises(AdviseError) as by_advise:
        read_log(bad_log)
    assert str(by_report.value) == str(by_advise.value) == bad_row_message(bad_log)


def test_replay_names_the_same_row_by_frame_and_sample(bad_log):
    with pytest.raises(MonitorError, match=r"frame 3: sample 1: utilization_pct is 500 %"):
        ReplayBackend.from_file(bad_log)
