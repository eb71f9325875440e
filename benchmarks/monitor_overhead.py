"""What sampling costs on the CPU side: the sampler thread + run-log writes, at 10 Hz, for 8 GPUs.

NVML's own call time is not in this figure (no GPU here): the replay backend stands in for it, so this
measures gpuwise's share (building samples, SQLite WAL writes, commits once a second) and the log's size
on disk per GPU-hour. Run: python -m benchmarks.monitor_overhead [seconds]   # writes results/monitor.md (+ .json)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import write_results
from benchmarks.machine import require_quiet_machine
from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.runlog import RunLog

GIB = 2**30


def frames(n_gpus: int = 8, n_frames: int = 50) -> list[list[dict]]:
    return [[{"gpu_index": g, "uuid": f"GPU-{g}", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": float((k * 7 + g) % 100),
              "memory_used_bytes": (10 + g) * GIB, "memory_total_bytes": 40 * GIB, "power_w": 200.0 + k % 50,
              "temperature_c": 60.0, "sm_clock_mhz": 1410.0, "mem_clock_mhz": 1215.0, "memory_util_pct": 20.0,
              "pcie_tx_bytes_per_s": 1e8, "pcie_rx_bytes_per_s": 2e8, "process_memory_bytes": (9 + g) * GIB,
              "process_count": 1, "process_match": "pid"} for g in range(n_gpus)] for k in range(n_frames)]


def main() -> None:
    require_quiet_machine("monitor_overhead")
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.db"
        runlog = RunLog(log)
        sampler = Sampler(ReplayBackend(frames(), loop=True), interval_s=0.1, runlog=runlog)
        cpu0, wall0 = time.process_time(), time.monotonic()
        sampler.start()
        time.sleep(seconds)
        sampler.stop(final_sample=False)
        cpu_s, wall_s = time.process_time() - cpu0, time.monotonic() - wall0
        runlog.close()
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        rows = sampler.samples_taken * 8
    gpu_hours = wall_s * 8 / 3600
    cpu_share, per_sample_ms = cpu_s / wall_s, cpu_s / sampler.samples_taken * 1e3
    bytes_per_sample, mb_per_gpu_hour = size / rows, size / gpu_hours / 1e6
    lines = ["# Monitor: sampling overhead and run-log size", "",
             f"`python -m benchmarks.monitor_overhead {seconds:g}` on {os.cpu_count()} shared CPU cores (load average "
             f"{os.getloadavg()[0]:.1f} at the end), replay backend standing in for NVML (no GPU here), 8 GPUs with "
             f"every field filled, 10 Hz, SQLite WAL run log; {sampler.samples_taken} samples in {wall_s:.1f} s:", "",
             "| figure | value |", "|---|---|",
             f"| gpuwise's CPU (sampler thread + run-log writes, commits once a second) | {cpu_share:.2%} of one core, "
             f"{per_sample_ms:.2f} ms per sample of 8 GPUs |",
             f"| run-log size | {bytes_per_sample:.0f} bytes per GPU sample: {mb_per_gpu_hour:.1f} MB per GPU-hour at "
             f"10 Hz, {mb_per_gpu_hour / 10:.2f} MB per GPU-hour at 1 Hz |",
             "| memory | bounded: rows on disk, 120 samples per device kept for the live view |", "",
             "Not included: NVML's own call time (about a dozen calls per GPU per sample; PCIe throughput and GPM "
             "are read at most once a second because the PCIe counter call itself samples for ~20 ms). To be "
             "measured on a GPU."]
    write_results("monitor_overhead", lines, {"seconds": wall_s, "samples": sampler.samples_taken,
                                              "cpu_share_of_one_core": cpu_share, "bytes_per_gpu_sample": bytes_per_sample})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
