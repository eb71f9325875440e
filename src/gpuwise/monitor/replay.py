"""A backend driven by recorded or scripted samples: tests, demos, and machines without a GPU.

A frames file is JSON: ``{"driver_version": "550.54.15", "frames": [[sample, ...], ...]}`` (or just the
list of frames). A sample is an object with ``GpuSample`` fields; fields left out are None, as NVML
reports unsupported fields. A sample may carry ``"processes": [{"pid": 1234, "used_memory_bytes": ...}]``:
the job's share is then worked out from ``watch_pids`` exactly as the NVML backend does, and
``processes()`` lists them (each may also record ``"user"`` and ``"command"``; else they are looked up
in /proc, as for NVML). Each call
returns the next frame, stamped with the current time; after the last frame the last one repeats (a lost
GPU stays lost). A gpuwise run log replays too: its samples grouped by time, each frame read when it is
sampled (a day's log on 8 GPUs is 86,400 frames).

Frames are checked when the backend is made, as readers check a run log (``sample_checks``): a sample
without ``gpu_index``, text where a number belongs, 500 % or NaN W is a MonitorError (exit 2, one line
naming the frame, the sample and the field) before anything is sampled or written. A run log's rows are
checked in one pass of SQLite (``first_bad_row``), and the frames replayed are those rows, however many a run
still being written appends meanwhile. A file that is neither JSON frames nor a run log (an nvidia-smi CSV, which
`gpuwise report` reads) is a MonitorError saying what a replay is.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.log_meta import DRIVER_VERSION_KEY
from gpuwise.monitor.procs import GpuProcess, ProcessRow, attribute_memory, pid_exists, process_rows
from gpuwise.monitor.sample import GpuSample, sample_from_row
from gpuwise.monitor.sample_checks import first_bad_row, row_problem, sample_problem
from gpuwise.runlog import is_run_log, last_gpu_sample_rowid, read_gpu_sample_times, read_gpu_samples_at, read_meta

Frame = Sequence[Mapping[str, Any] | GpuSample]
REPLAY_IS = "a replay is a JSON file of frames or a gpuwise run log"


class ReplayBackend:
    name = "replay"

    def __init__(self, frames: Sequence[Frame], *, driver_version: str | None = "replay",
                 loop: bool = False, stamp_now: bool = True, source: str = "replay frames",
                 lists_processes: bool = True, frames_checked: bool = False) -> None:
        """``source``: what the frames came from, for the error naming a bad one (MonitorError); kept, for
        any later message about them (a process filter a run log cannot serve).
        ``lists_processes`` False: the frames hold no process lists (a run log's): ``processes()`` is None.
        ``frames_checked``: the frames were checked already (a run log's, by ``check_run_log_frames``), and
        may be a sequence that reads each frame when asked for it (kept as given)."""
        if not frames:
            raise MonitorError(f"{source}: a replay backend needs at least one frame of samples")
        if not frames_checked:
            for i, frame in enumerate(frames, start=1):
                problem = frame_problem(frame)
                if problem:
                    raise MonitorError(f"{source}: frame {i}: {problem}")
        self._frames = frames if frames_checked else list(frames)
        self.source = source
        self._driver_version = driver_version
        self._loop = loop
        self._stamp_now = stamp_now
        self._next = 0
        self.calls = 0
        self._processes: list[ProcessRow] = []
        self._lists_processes = lists_processes

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> "ReplayBackend":
        p = Path(path)
        if is_run_log(p):
            last_rowid = last_gpu_sample_rowid(p)
            check_run_log_frames(p, up_to_rowid=last_rowid)
            # the driver the log was recorded on; a run log records no process list (only the counts)
            kwargs.setdefault("driver_version", read_meta(p).get(DRIVER_VERSION_KEY) or "replay")
            return cls(RunLogFrames(p, up_to_rowid=last_rowid), **{"source": str(p), "lists_processes": False, "frames_checked": True,
                                           **kwargs})
        try:
            text = p.read_text()
        except OSError as exc:
            raise MonitorError(f"cannot read replay frames from {p}: {exc}") from None
        except ValueError as exc:   # UnicodeDecodeError: a binary file that is no run log
            raise MonitorError(f"cannot read replay frames from {p}: {REPLAY_IS}, and this is not text ({exc})") \
                from None
        if not text.strip():
            raise MonitorError(f"cannot read replay frames from {p}: the file is empty")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise MonitorError(f"cannot read replay frames from {p}: {_not_json(text, exc, p)}") from None
        if isinstance(data, dict):
            kwargs.setdefault("driver_version", data.get("driver_version", "replay"))
            data = data.get("frames", [])
        if not isinstance(data, list):
            raise MonitorError(f"cannot read replay frames from {p}: 'frames' is not a list of frames")
        return cls(data, **{"source": str(p), **kwargs})

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

    def processes(self) -> list[ProcessRow] | None:
        """The compute processes of the last frame sampled, per GPU (see the module docstring); None for
        frames that hold no process lists (a run log's), as for a backend that cannot list them."""
        return list(self._processes) if self._lists_processes else None

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


def frame_problem(frame: object) -> str | None:
    """What is wrong with one frame (one phrase naming the sample and the field), or None: a frame is a
    list of samples, each a ``GpuSample`` or an object with a whole ``gpu_index`` and fields in their
    physical ranges (``sample_problem``), its ``processes`` a list of objects with a whole ``pid``."""
    if not isinstance(frame, (list, tuple)):
        return f"not a list of samples but {type(frame).__name__}"
    for j, raw in enumerate(frame, start=1):
        if isinstance(raw, GpuSample):
            problem = sample_problem(raw)
        elif not isinstance(raw, Mapping):
            problem = f"a {type(raw).__name__}, not an object"
        elif "gpu_index" not in raw:
            problem = "no gpu_index"
        else:
            problem = row_problem(raw) or _processes_problem(raw.get("processes"))
        if problem:
            return f"sample {j}: {problem}"
    return None


def _not_json(text: str, error: ValueError, path: Path) -> str:
    """Why ``text`` (of the file at ``path``) is no frames file, with what a replay is (``REPLAY_IS``): comma-separated
    text is most likely an nvidia-smi CSV, which `gpuwise report` reads; it is not replayed."""
    if _reads_as_csv(text):
        return (f"{REPLAY_IS}, and this is comma-separated text (an nvidia-smi CSV? `gpuwise report "
                f"{shlex.quote(str(path))}` reads those; they are not replayed)")
    return f"{REPLAY_IS}, and this is not JSON ({error})"


def _reads_as_csv(text: str) -> bool:
    """The first line that is not blank holds commas and opens no JSON object or list."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return "," in first and first[0] not in "[{"


class RunLogFrames(Sequence[list[dict]]):
    """A run log's samples as frames (one per distinct ``t_s``, in time order), each read from the log when
    asked for: a long log is not held in memory, and the first frame comes at once. ``up_to_rowid``: of the rows
    written up to it (those checked), not those a run still being written appends."""

    def __init__(self, path: Path, *, up_to_rowid: int | None = None) -> None:
        self._path = path
        self._up_to_rowid = up_to_rowid
        self._times_s = read_gpu_sample_times(path, up_to_rowid=up_to_rowid)

    def __len__(self) -> int:
        return len(self._times_s)

    def __getitem__(self, i: int) -> list[dict]:   # type: ignore[override]  (no slices: a frame at a time)
        return read_gpu_samples_at(self._path, self._times_s[i], up_to_rowid=self._up_to_rowid)


def check_run_log_frames(path: Path, *, up_to_rowid: int | None = None) -> None:
    """MonitorError naming the frame, the sample and the field of the first row of the run log at ``path`` (of
    those written up to ``up_to_rowid``) that ``frame_problem`` would refuse, in the order the frames replay."""
    bad = first_bad_row(path, up_to_rowid=up_to_rowid)
    if bad is not None:
        row, problem = bad
        raise MonitorError(f"{path}: frame {row['_frame_no']}: sample {row['_frame_row_no']}: {problem}")


def _processes_problem(entries: object) -> str | None:
    if entries is None:
        return None
    if not isinstance(entries, list):
        return "processes is not a list"
    for p in entries:
        pid = p.get("pid") if isinstance(p, Mapping) else None
        if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
            return f"processes: {str(p)[:60]} has no whole-number pid"
        used = p.get("used_memory_bytes")
        if used is not None and (isinstance(used, bool) or not isinstance(used, int) or used < 0):
            return f"processes: pid {pid} used_memory_bytes is {str(used)[:40]!r}, not a whole number >= 0"
    return None


def _frame_processes(raw: Mapping[str, Any] | GpuSample) -> list[ProcessRow]:
    if isinstance(raw, GpuSample) or not raw.get("processes") or raw.get("lost"):
        return []
    entries = raw["processes"]
    procs = [GpuProcess(int(p["pid"]), p.get("used_memory_bytes")) for p in entries]
    recorded = {int(p["pid"]): p for p in entries if "user" in p or "command" in p}
    return process_rows(int(raw.get("gpu_index", 0)), raw.get("mig_index"), procs, recorded)
