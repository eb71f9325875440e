"""A run log keeps every field of a sample: replaying it gives the exporter the labels and values the live
sampler gave (a MIG instance's GPU instance ID, not its slot; free memory less the driver's reserved memory),
and a log written before those columns existed still reads, and takes new rows, with them NULL."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import fields
from pathlib import Path

from gpuwise.monitor import ReplayBackend
from gpuwise.monitor.exporter import series_labels
from gpuwise.monitor.sample import GpuSample, sample_from_row
from gpuwise.monitor.sampler import Sampler
from gpuwise.runlog import GPU_SAMPLE_COLUMNS, RunLog, read_gpu_samples

from monitor_fakes import GIB, gpuwise

FIXTURE = Path(__file__).parents[1] / "fixtures" / "replay_mig_a100_h100.json"

MIG = {"gpu_index": 0, "mig_index": 1, "gpu_instance_id": 9, "uuid": "MIG-bbbb",
       "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "memory_used_bytes": 20 * GIB,
       "memory_total_bytes": 40 * GIB, "memory_reserved_bytes": GIB // 2}

# The gpu_samples table as gpuwise created it before gpu_instance_id and memory_reserved_bytes were columns.
OLD_GPU_SAMPLES = """CREATE TABLE gpu_samples (t_s REAL NOT NULL, gpu_index INTEGER NOT NULL, uuid TEXT, name TEXT,
    utilization_pct REAL, memory_util_pct REAL, memory_used_bytes INTEGER, memory_total_bytes INTEGER,
    process_memory_bytes INTEGER, power_w REAL, temperature_c REAL, sm_clock_mhz REAL, mem_clock_mhz REAL,
    pcie_tx_bytes_per_s REAL, pcie_rx_bytes_per_s REAL, sm_activity_pct REAL, sm_occupancy_pct REAL,
    lost INTEGER NOT NULL DEFAULT 0, mig_index INTEGER, process_count INTEGER, process_match TEXT)"""


def _logged_and_replayed(tmp_path: Path, frame: list[dict]) -> GpuSample:
    log = tmp_path / "run.db"
    with RunLog(log) as run_log:
        Sampler(ReplayBackend([frame]), interval_s=1.0, runlog=run_log).sample_once()
    (replayed,) = ReplayBackend.from_file(log).sample()
    return replayed


def _old_log(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(f"""CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        INSERT INTO meta VALUES ('schema_version', '1');
        {OLD_GPU_SAMPLES};
        INSERT INTO gpu_samples (t_s, gpu_index, mig_index, name, memory_used_bytes, memory_total_bytes)
            VALUES (100.0, 0, 1, 'NVIDIA A100-SXM4-80GB MIG 3g.40gb', {20 * GIB}, {40 * GIB});""")
    conn.close()
    return path


def test_every_sample_field_is_a_run_log_column():
    assert [f.name for f in fields(GpuSample)] == [name for name, _ in GPU_SAMPLE_COLUMNS]


def test_replayed_run_log_keeps_the_gpu_instance_id_the_exporter_labels_with(tmp_path):
    live = sample_from_row(MIG)
    replayed = _logged_and_replayed(tmp_path, [MIG])
    assert replayed.gpu_instance_id == 9
    assert series_labels(replayed, None, "h") == series_labels(live, None, "h")


def test_replayed_run_log_keeps_the_reserved_memory_that_is_not_free(tmp_path):
    replayed = _logged_and_replayed(tmp_path, [MIG])
    assert replayed.memory_reserved_bytes == GIB // 2
    assert replayed.memory_free_bytes == sample_from_row(MIG).memory_free_bytes == 40 * GIB - 20 * GIB - GIB // 2


def test_watch_json_over_a_watch_log_shows_the_gpu_instance_ids_recorded(tmp_path):
    log = tmp_path / "w.db"
    recorded = gpuwise("watch", "--count", "1", "--log", str(log),
                       env=dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{FIXTURE}"))
    assert recorded.returncode == 0, recorded.stderr
    r = gpuwise("watch", "--json", env=dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{log}"))
    assert r.returncode == 0, r.stderr
    ids = {(g["gpu_index"], g["mig_index"]): g["gpu_instance_id"] for g in json.loads(r.stdout)["gpus"]}
    assert ids == {(0, None): None, (0, 0): 7, (0, 1): 9, (1, None): None}


def test_a_log_written_before_the_columns_reads_them_as_null(tmp_path):
    (row,) = read_gpu_samples(_old_log(tmp_path / "old.db"))
    assert row["gpu_instance_id"] is None and row["memory_reserved_bytes"] is None
    assert row["memory_used_bytes"] == 20 * GIB
    (replayed,) = ReplayBackend.from_file(tmp_path / "old.db").sample()
    assert replayed.mig_index == 1 and replayed.gpu_instance_id is None


def test_a_writer_of_a_log_written_before_the_columns_adds_them(tmp_path):
    old = _old_log(tmp_path / "old.db")
    with RunLog(old) as run_log:
        run_log.write_gpu_samples([{**MIG, "t_s": 200.0}])
    first, second = read_gpu_samples(old)
    assert (first["t_s"], first["gpu_instance_id"]) == (100.0, None)
    assert (second["t_s"], second["gpu_instance_id"], second["memory_reserved_bytes"]) == (200.0, 9, GIB // 2)

