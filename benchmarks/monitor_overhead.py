"""What sampling costs on the CPU side: the sampler thread + run-log writes, at 10 Hz, for 8 GPUs.

NVML's own call time is not in this figure (no GPU here): the replay backend stands in for it, so this
measures gpuwise's share (building samples, SQLite WAL writes, commits once a second) and the log's size
on disk per GPU-hour. Run: python benchmarks/monitor_overhead.py [seconds]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

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
    print(f"samples: {sampler.samples_taken} at 10 Hz x 8 GPUs in {wall_s:.1f} s")
    print(f"CPU: {cpu_s / wall_s * 100:.2f}% of one core ({cpu_s / sampler.samples_taken * 1e3:.2f} ms per sample of 8 GPUs)")
    print(f"log: {size / rows:.0f} bytes per GPU sample; {size / gpu_hours / 1e6:.1f} MB per GPU-hour at 10 Hz, "
          f"{size / gpu_hours / 10 / 1e6:.2f} MB per GPU-hour at 1 Hz")


if __name__ == "__main__":
    main()
