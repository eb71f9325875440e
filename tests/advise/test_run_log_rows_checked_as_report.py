"""advise checks a run log's GPU samples as report does (``suspect_row_sql`` in SQLite, ``row_problem`` for the
rows it picks): the same bad row is refused, named by the same place, in the same words."""

from __future__ import annotations

import pytest

from gpuwise.advise import AdviseError, read_log
from gpuwise.monitor.sample_checks import MAX_GPU_MEMORY_BYTES
from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog

GIB = 2**30


def _good(t_s: float, gpu: int) -> dict:
    return {"t_s": t_s, "gpu_index": gpu, "uuid": f"GPU-{gpu}", "name": "NVIDIA A100-SXM4-40GB",
            "utilization_pct": 40.0, "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB,
            "process_memory_bytes": GIB, "power_w": 150.0, "temperature_c": 50.0, "lost": 0}


def _run_log(tmp_path, bad: dict):
    """Two GPUs sampled three times, GPU 1's second sample taking ``bad``, beside a loss curve."""
    db = tmp_path / "run.db"
    rows = [_good(100.0 + k, g) for k in range(3) for g in (0, 1)]
    rows[3].update(bad)
    with RunLog(db) as log:
        log.write_gpu_samples(rows)
        for step in range(20):
            log.log_train(step, t_s=100.0 + step, loss=2.0 - 0.01 * step)
    return db


@pytest.mark.parametrize("bad", [{"utilization_pct": 500.0}, {"power_w": "150 W"}, {"lost": "yes"},
                                 {"memory_used_bytes": 41 * GIB}, {"memory_total_bytes": 2 * MAX_GPU_MEMORY_BYTES}],
                         ids=lambda bad: next(iter(bad)))
def test_a_bad_gpu_sample_is_refused_in_reports_words(tmp_path, bad):
    db = _run_log(tmp_path, bad)
    with pytest.raises(ReportError) as by_report:
        load_usage_log(db)
    with pytest.raises(AdviseError) as by_advise:
        read_log(db)
    assert str(by_advise.value) == str(by_report.value)
    assert "gpu_samples row 4 (gpu 1, t_s 101.0)" in str(by_advise.value)


def test_plausible_gpu_samples_give_the_runs_gpus_and_peak(tmp_path):
    log = read_log(_run_log(tmp_path, {"process_memory_bytes": 3 * GIB}))
    assert (log.gpu_count, log.gpu_name, log.peak_memory_bytes) == (2, "NVIDIA A100-SXM4-40GB", 3 * GIB)
