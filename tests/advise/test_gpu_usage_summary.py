"""advise takes a run log's GPU name, GPU count and peak memory from one grouped SQLite pass (``read_gpu_usage``),
not a dict per sample: the run's GPUs are those its processes held memory on, else every GPU sampled."""

from __future__ import annotations

from gpuwise.advise import read_log
from gpuwise.runlog import RunLog, read_gpu_usage

GIB = 2**30


def _row(t_s: float, gpu: int, name: str | None, used_gib: float, process_gib: float | None) -> dict:
    return {"t_s": t_s, "gpu_index": gpu, "name": name, "memory_used_bytes": int(used_gib * GIB),
            "memory_total_bytes": 80 * GIB, "lost": 0,
            "process_memory_bytes": None if process_gib is None else int(process_gib * GIB)}


def _log(tmp_path, rows: list[dict]):
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.write_gpu_samples(rows)
        for step in range(10):
            log.log_train(step, t_s=100.0 + step, loss=2.0 - 0.01 * step)
    return db


def test_the_gpus_the_run_held_memory_on_give_count_name_and_peak(tmp_path):
    # GPU 0 busy with another job (70 GiB used, none of it ours), GPUs 1-2 the run's, GPU 3 idle
    rows = [r for k in range(3) for r in (_row(100.0 + k, 0, "NVIDIA H100 80GB HBM3", 70, None),
                                           _row(100.0 + k, 1, "NVIDIA A100-SXM4-80GB", 30, 20 + k),
                                           _row(100.0 + k, 2, "NVIDIA A100-SXM4-80GB", 31, 0 if k == 0 else 25),
                                           _row(100.0 + k, 3, "NVIDIA A100-SXM4-80GB", 0.5, 0))]
    log = read_log(_log(tmp_path, rows))
    assert (log.gpu_name, log.gpu_count, log.peak_memory_bytes) == ("NVIDIA A100-SXM4-80GB", 2, 25 * GIB)


def test_without_process_memory_every_gpu_counts_and_the_used_memory_peaks(tmp_path):
    rows = [_row(100.0, 0, None, 0, None), _row(100.0, 1, "NVIDIA L4", 9, None), _row(101.0, 0, "NVIDIA T4", 12, 0)]
    log = read_log(_log(tmp_path, rows))
    assert (log.gpu_name, log.gpu_count, log.peak_memory_bytes) == ("NVIDIA L4", 2, 12 * GIB)


def test_usage_is_one_group_per_gpu_name_and_whether_it_held_memory(tmp_path):
    rows = [_row(100.0 + k, g, "NVIDIA A100-SXM4-80GB", 30, 20 + k) for k in range(1000) for g in range(8)]
    usage = read_gpu_usage(_log(tmp_path, rows))
    assert [(g["gpu_index"], g["held_memory"], g["peak_bytes"]) for g in usage] == [(g, 1, 1019 * GIB) for g in range(8)]
