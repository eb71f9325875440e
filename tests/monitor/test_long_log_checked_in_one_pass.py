"""A long run log is checked by SQLite in one pass (``suspect_row_sql``) and only the rows it picks are judged
by ``row_problem``: every value the per-row check refuses must still be picked, refused with the same words,
and named by the same row, frame and sample, by the report and by the replay."""

from __future__ import annotations

import pytest

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.replay import ReplayBackend
from gpuwise.monitor.sample_checks import MAX_GPU_MEMORY_BYTES, row_problem, suspect_row_sql
from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog, read_gpu_samples, read_gpu_samples_where

GIB = 2**30

HOSTILE = [
    ("utilization_pct", 500.0), ("utilization_pct", -1.0), ("utilization_pct", "busy"),
    ("utilization_pct", float("inf")), ("utilization_pct", b"\x00"), ("sm_activity_pct", 100.5),
    ("memory_used_bytes", 41 * GIB), ("memory_used_bytes", -1), ("process_memory_bytes", 41 * GIB),
    ("memory_total_bytes", MAX_GPU_MEMORY_BYTES * 2), ("memory_reserved_bytes", -5),
    ("power_w", 20_000.0), ("power_w", -5.0), ("power_w", "150 W"), ("temperature_c", float("-inf")),
    ("sm_clock_mhz", -1.0), ("pcie_tx_bytes_per_s", -2.0), ("gpu_index", -1), ("gpu_index", 1.5),
    ("gpu_index", "zero"), ("mig_index", 0.5), ("lost", "yes"), ("lost", 0.5), ("lost", -1),
    ("process_count", -2), ("gpu_instance_id", 2.5), ("uuid", b"GPU-blob"), ("process_match", b"pid"),
    ("name", b"\xff\xfe"), ("t_s", "noon"),
]


def _good(t_s: float, gpu: int) -> dict:
    return {"t_s": t_s, "gpu_index": gpu, "uuid": f"GPU-{gpu}", "name": "NVIDIA A100-SXM4-40GB",
            "utilization_pct": 40.0, "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB,
            "process_memory_bytes": GIB, "power_w": 150.0, "temperature_c": 50.0, "lost": 0}


def _log(tmp_path, bad: dict, *, frames: int = 3, bad_frame: int = 2, bad_gpu: int = 1):
    """Two GPUs sampled ``frames`` times; GPU ``bad_gpu``'s row of frame ``bad_frame`` (1-based) takes ``bad``."""
    db = tmp_path / "run.db"
    rows = [_good(100.0 + k, g) for k in range(frames) for g in (0, 1)]
    rows[(bad_frame - 1) * 2 + bad_gpu].update(bad)
    with RunLog(db) as log:
        log.write_gpu_samples(rows)
    return db


@pytest.mark.parametrize("field, value", HOSTILE, ids=[f"{f}={v!r}"[:40] for f, v in HOSTILE])
def test_sqlite_picks_every_row_the_per_row_check_refuses(tmp_path, field, value):
    db = _log(tmp_path, {field: value})
    refused = [r for r in read_gpu_samples(db) if row_problem(r)]
    picked = read_gpu_samples_where(db, suspect_row_sql())
    assert len(refused) == 1
    assert [(r["t_s"], r["gpu_index"], row_problem(r)) for r in picked if row_problem(r)] == \
        [(refused[0]["t_s"], refused[0]["gpu_index"], row_problem(refused[0]))]


def test_sqlite_picks_no_plausible_row(tmp_path):
    assert read_gpu_samples_where(_log(tmp_path, {"utilization_pct": 100.0, "power_w": 0.0}), suspect_row_sql()) == []


@pytest.mark.parametrize("field, value", [("utilization_pct", 500.0), ("power_w", "150 W"), ("lost", "yes"),
                                          ("uuid", b"GPU-blob")])
def test_report_names_the_refused_row_in_reading_order(tmp_path, field, value):
    db = _log(tmp_path, {field: value}, bad_frame=2, bad_gpu=1)
    problem = row_problem({**_good(101.0, 1), field: value})
    with pytest.raises(ReportError) as info:
        load_usage_log(db)
    assert str(info.value) == f"{db}: gpu_samples row 4 (gpu 1, t_s 101.0): {problem}"


@pytest.mark.parametrize("field, value", [("utilization_pct", 500.0), ("memory_used_bytes", 41 * GIB),
                                          ("lost", 0.5)])
def test_replay_refuses_a_later_frame_before_the_first_sample(tmp_path, field, value):
    db = _log(tmp_path, {field: value}, frames=5, bad_frame=4, bad_gpu=1)
    problem = row_problem({**_good(103.0, 1), field: value})
    with pytest.raises(MonitorError) as info:
        ReplayBackend.from_file(db)
    assert str(info.value) == f"{db}: frame 4: sample 2: {problem}"


def test_rows_of_one_gpu_at_one_time_are_numbered_as_written(tmp_path):
    """MIG instances share their GPU's index and time: the second one written is row 2, sample 2."""
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.write_gpu_samples([{**_good(100.0, 0), "mig_index": 0},
                               {**_good(100.0, 0), "mig_index": 1, "utilization_pct": 250.0}])
    with pytest.raises(ReportError, match=r"gpu_samples row 2 \(gpu 0, t_s 100.0\): utilization_pct is 250 %"):
        load_usage_log(db)
    with pytest.raises(MonitorError, match=r"frame 1: sample 2: utilization_pct is 250 %"):
        ReplayBackend.from_file(db)


def test_replay_of_a_run_log_gives_its_frames_in_order_then_repeats_the_last(tmp_path):
    db = _log(tmp_path, {"lost": 1, "utilization_pct": None}, frames=3, bad_frame=3, bad_gpu=1)
    backend = ReplayBackend.from_file(db, stamp_now=False)
    frames = [backend.sample() for _ in range(5)]
    assert [[(s.t_s, s.gpu_index, s.lost) for s in f] for f in frames] == \
        [[(100.0, 0, 0), (100.0, 1, 0)], [(101.0, 0, 0), (101.0, 1, 0)]] + [[(102.0, 0, 0), (102.0, 1, 1)]] * 3
