"""`gpuwise report` on a day's run log of 8 GPUs (691,200 rows) took 20-40 s and over a GiB: every row became a
dict, then a ``GpuSample``, then was summarised and plotted one Python object at a time. The report now reads the
columns it uses into arrays, a chunk of rows at a time (``report.sample_table``), and summarises them vectorised,
with the same figures: the irregular log below (gaps, a lost GPU, MIG instances, missing readings, an idle stretch)
is summarised to figures checked by hand, which the per-row code gave too."""

from __future__ import annotations

import sqlite3
import tracemalloc

import pytest

from gpuwise.monitor.sample import GpuSample
from gpuwise.report.sources import load_usage_log
from gpuwise.report.sample_table import sample_table
from gpuwise.report.usage import Gap, IdleStretch, summarize
from gpuwise.runlog import RunLog, iter_gpu_sample_rows

GIB = 2**30
T0 = 1000.0
A100 = "NVIDIA A100-SXM4-80GB"
MIG = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"


def _gpu0(t: float) -> dict:
    """Every 10 s over 0-200 s and 1000-1100 s (an 800 s gap); idle (2 %) from 50 s to 150 s; 20 GiB at 100 s;
    no power reading at 30 s; its first sample names no GPU."""
    idle = 50 <= t <= 150
    return dict(t_s=T0 + t, gpu_index=0, uuid="GPU-a", name="" if t == 0 else A100,
                utilization_pct=2.0 if idle else (50.0 if t <= 200 else 80.0),
                process_memory_bytes=(20 if t == 100 else 10) * GIB, memory_used_bytes=21 * GIB,
                memory_total_bytes=80 * GIB, power_w=None if t == 30 else 100.0)


def _gpu1(t: float) -> dict:
    """Every 10 s, falling off the bus at 70 s."""
    if t >= 70:
        return dict(t_s=T0 + t, gpu_index=1, uuid="GPU-b", name=A100, lost=1)
    return dict(t_s=T0 + t, gpu_index=1, uuid="GPU-b", name=A100, utilization_pct=90.0,
                process_memory_bytes=5 * GIB, memory_used_bytes=6 * GIB, memory_total_bytes=80 * GIB, power_w=200.0)


def _gpu2(t: float) -> list[dict]:
    """Two MIG instances (SM activity only, the GPU's power) and the parent row repeating their sum."""
    parent = dict(t_s=T0 + t, gpu_index=2, uuid="GPU-c", name=A100, memory_used_bytes=7 * GIB,
                  memory_total_bytes=80 * GIB, power_w=300.0)
    return [parent] + [dict(t_s=T0 + t, gpu_index=2, mig_index=m, uuid=f"MIG-c{m}", name=MIG, sm_activity_pct=sm,
                            process_memory_bytes=(3 + m) * GIB, memory_used_bytes=(3 + m) * GIB,
                            memory_total_bytes=40 * GIB, power_w=300.0) for m, sm in ((0, 40.0), (1, 60.0))]


@pytest.fixture
def irregular_log(tmp_path):
    path = tmp_path / "irregular.db"
    with RunLog(path) as log:
        for t in sorted({*range(0, 201, 10), *range(1000, 1101, 10)}):
            frame = [_gpu0(t)] + ([_gpu1(t)] if t <= 80 else []) + (_gpu2(t) if t <= 100 else [])
            log.write_gpu_samples(frame[::-1])      # written out of GPU order: the reader orders them
    return path


def test_an_irregular_run_log_is_summarised_to_the_figures_checked_by_hand(irregular_log):
    log = load_usage_log(irregular_log)
    u = summarize(log)
    assert len(log.samples) == 32 + 9 + 11 * 3
    assert isinstance(log.samples[0], GpuSample) and (log.samples[0].gpu_index, log.samples[0].t_s) == (0, T0)
    assert [d.label for d in u.devices] == ["0", "1", "2/mig0", "2/mig1"]       # the MIG parent row left out
    assert u.job_labels == ("0", "1", "2/mig0", "2/mig1")
    assert u.start_t_s == T0
    assert u.duration_s == 300.0                          # 0-200 s and 1000-1100 s
    assert u.gaps == (Gap(start_s=200.0, duration_s=800.0),)
    gpu0, gpu1, mig0, mig1 = u.devices
    assert (gpu0.name, gpu0.uuid, gpu0.samples, gpu0.duration_s) == (A100, "GPU-a", 32, 300.0)
    assert (gpu0.peak_memory_bytes, gpu0.p95_memory_bytes, gpu0.memory_basis) == (20 * GIB, 10 * GIB, "process")
    assert gpu0.mean_busy_pct == pytest.approx((11 * 2.0 + 10 * 50.0 + 11 * 80.0) / 32)
    assert gpu0.idle_stretches == (IdleStretch(start_s=50.0, duration_s=110.0),)   # until the busy sample at 160 s
    assert gpu0.idle_share == pytest.approx(110.0 / 300.0)
    assert (gpu0.mean_power_w, gpu0.peak_power_w) == (100.0, 100.0)
    assert gpu0.energy_kwh == pytest.approx(100.0 * 300.0 / 3.6e6)   # the 800 s gap is not run time
    assert (gpu1.lost, gpu1.samples, gpu1.duration_s) == (True, 7, 60.0)
    assert gpu1.energy_kwh == pytest.approx(200.0 * 60.0 / 3.6e6)
    assert (mig0.busy_basis, mig0.mean_busy_pct, mig1.mean_busy_pct) == ("sm_activity", 40.0, 60.0)
    assert (mig0.uuid, mig0.name, mig0.memory_total_bytes, mig1.peak_memory_bytes) == ("MIG-c0", MIG, 40 * GIB, 4 * GIB)
    assert (u.needed_peak_bytes, u.needed_p95_bytes) == (20 * GIB, 10 * GIB)
    p = u.power          # GPU 2's power once, for both its instances
    assert (p.gpu_count, p.mean_total_w, p.peak_per_gpu_w, p.mig_gpu_labels) == (3, 600.0, 300.0, ("2",))
    assert p.energy_kwh == pytest.approx((100.0 * 300.0 + 200.0 * 60.0 + 300.0 * 100.0) / 3.6e6)


def _long_log(path, seconds: int, gpus: int):
    with RunLog(path) as log:
        for t in range(seconds):
            log.write_gpu_samples(
                dict(t_s=T0 + t + 0.001 * g, gpu_index=g, uuid=f"GPU-{g}", name=A100, utilization_pct=float(t % 100),
                     sm_activity_pct=t % 90 + 0.5, memory_used_bytes=(10 + t % 7) * GIB + t,
                     memory_total_bytes=80 * GIB, process_memory_bytes=(9 + t % 7) * GIB + t, power_w=100.0 + t % 300,
                     temperature_c=60.0, process_count=1, process_match="pid") for g in range(gpus))
    return path


def test_a_long_run_log_is_read_without_a_python_object_per_row(tmp_path):
    # was: a dict and a GpuSample per row, some 1.5 KB each (over a GiB for a day on 8 GPUs)
    rows = 60_000
    path = _long_log(tmp_path / "long.db", rows // 2, 2)
    tracemalloc.start()
    try:
        log = load_usage_log(path)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(log.samples) == rows
    assert peak_bytes / rows < 500     # numbers in arrays (~80 B a row, a few copies) and one chunk of rows at a time


def test_rows_are_read_in_chunks_in_the_order_written_with_null_for_a_column_an_older_log_lacks(tmp_path):
    path = _long_log(tmp_path / "log.db", 5, 2)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE gpu_samples DROP COLUMN memory_reserved_bytes")     # as a log written before it
    conn.commit()
    conn.close()
    chunks = list(iter_gpu_sample_rows(path, ("t_s", "gpu_index", "memory_reserved_bytes"), rows_per_chunk=4))
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert [row for c in chunks for row in c] == [(T0 + t + 0.001 * g, g, None) for t in range(5) for g in range(2)]


def test_an_empty_sample_table_has_no_devices():
    assert sample_table([]).devices() == []
