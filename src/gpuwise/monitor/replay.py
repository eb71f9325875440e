"""A backend driven by recorded or scripted samples: tests, demos, and machines without a GPU.

A frames file is JSON: ``{"driver_version": "550.54.15", "frames": [[sample, ...], ...]}`` (or just the
list of frames). A sample is an object with ``GpuSample`` fields; fields left out are None, as NVML
reports unsupported fields. A sample may carry ``"processes": [{"pid": 1234, "used_memory_bytes": ...}]``:
the job's share is then worked out from ``watch_pids`` exactly as the NVML backend does, and
``processes()`` lists them (each may also record ``"user"`` and ``"command"``; else they are looked up
in /proc, as for NVML). Each call
returns the next frame, stamped with the current time; after the last frame the last one repeats (a lost
GPU stays lost). A gpuwise run log replays too: its samples grouped by time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.procs import GpuProcess, ProcessRow, attribute_memory, pid_exists, process_rows
from gpuwise.monitor.sample import GpuSample, sample_from_row
from gpuwise.runlog import is_run_log, read_gpu_samples

Frame = Sequence[Mapping[str, Any] | GpuSample]


class ReplayBackend:
    name = "replay"

    def __init__(self, frames: Sequence[Frame], *, driver_version: str | None = "replay",
                 loop: bool = False, stamp_now: bool = True) -> None:
        if not frames:
            raise MonitorError("a replay backend needs at least one frame of samples")
        self._frames = list(frames)
        self._driver_version = driver_version
        self._loop = loop
        self._stamp_now = stamp_now
        self._next = 0
        self.calls = 0
        self._processes: list[ProcessRow] = []

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> "ReplayBackend":
        p = Path(path)
        if is_run_log(p):
            frames: dict[float, list[dict]] = {}
            for row in read_gpu_samples(p):
                frames.setdefault(row["t_s"], []).append(row)
            return cls(list(frames.values()), **kwargs)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise MonitorError(f"cannot read replay frames from {p}: {exc}") from None
        if isinstance(data, dict):
            kwargs.setdefault("driver_version", data.get("driver_version", "replay"))
            data = data.get("frames", [])
        return cls(data, **kwargs)

    def sample(self, watch_pids: Set[int] | None = None) -> list[GpuSample]:
        frame = self._frames[self._next]
        if self._next + 1 < len(self._frames):
            self._next += 1
        elif self._loop:
            self._next = 0
        self.calls += 1
        now_s = time.time()
        self._processes = [row for s in frame for row in _frame_processes(s)]
        return [self._one(s, now_s, watch_pids) for s in frame]

    def processes(self) -> list[ProcessRow]:
        """The compute processes of the last frame sampled, per GPU (see the module docstring)."""
        return list(self._processes)

    def _one(self, raw: Mapping[str, Any] | GpuSample, now_s: float, watch_pids: Set[int] | None) -> GpuSample:
        if isinstance(raw, GpuSample):
            sample = raw
        else:
            sample = sample_from_row(raw)
            if raw.get("processes") is not None and not sample.lost:
                procs = [GpuProcess(int(p["pid"]), p.get("used_memory_bytes")) for p in raw["processes"]]
                process_bytes, match = attribute_memory(procs, watch_pids, pid_exists)
                sample = replace(sample, process_memory_bytes=process_bytes, process_match=match,
                                 process_count=len(procs))
        return sample.with_time(now_s) if self._stamp_now else sample

    def driver_version(self) -> str | None:
        return self._driver_version

    def close(self) -> None:
        pass


def _frame_processes(raw: Mapping[str, Any] | GpuSample) -> list[ProcessRow]:
    if isinstance(raw, GpuSample) or not raw.get("processes") or raw.get("lost"):
        return []
    entries = raw["processes"]
    procs = [GpuProcess(int(p["pid"]), p.get("used_memory_bytes")) for p in entries]
    recorded = {int(p["pid"]): p for p in entries if "user" in p or "command" in p}
    return process_rows(int(raw.get("gpu_index", 0)), raw.get("mig_index"), procs, recorded)
