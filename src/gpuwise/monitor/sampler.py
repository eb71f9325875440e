"""A background thread that samples a backend at a fixed rate, writes the run log, and keeps a short
in-memory history for live views.

Memory stays bounded however long the run: samples go to disk (the run log) and only the last
``history`` samples per device stay in memory, of the devices the latest sample holds (one the backend
stopped reporting leaves the history; the NVML backend lists its devices once, at its start). Crash safety: the log is committed at least once
per ``commit_period_s``, so a killed sampler loses at most that much.

Samples are scheduled on a clock (``next_sample_at``), not by sleeping an interval after each one, so the
time NVML and a live view take is not added to the interval. A sampler that still cannot keep up (many
GPUs, a slow driver) skips rather than bursts, and its run log then records the interval it kept
(``interval_meta``): ``interval_s`` is the interval the samples were taken at.
"""

from __future__ import annotations

import logging

import math
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

from gpuwise.monitor.backend import Backend, MonitorError
from gpuwise.monitor.log_meta import INTERVAL_S_KEY, REQUESTED_INTERVAL_S_KEY, end_meta, start_meta, write_meta
from gpuwise.monitor.new_log import NewLog, create_new_log, discard_log
from gpuwise.monitor.procs import process_tree
from gpuwise.monitor.sample import GpuSample
from gpuwise.runlog import GPU_LOST_EVENT, RunLog

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.1  # 10 Hz: NVML's utilisation counters themselves update no faster than this
PID_REFRESH_S = 1.0
MAX_INTERVAL_S = 86_400.0  # a sample a day; beyond, timers overflow the platform's time_t
KEPT_INTERVAL_SLACK = 1.1  # a kept interval more than 10 % above the one asked for is recorded as kept


def check_interval_s(interval_s: object) -> float:
    """The sampling interval in seconds, or MonitorError (exit 2, one line) unless a finite number from
    MIN_INTERVAL_S to MAX_INTERVAL_S. Faster than MIN_INTERVAL_S is refused, not quietly slowed down: the
    interval a run log records is the one its samples were taken at (run, watch and exporter alike)."""
    try:
        value = float(interval_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise MonitorError(f"--interval must be a number of seconds from {MIN_INTERVAL_S:g} (10 Hz, the fastest: "
                           f"NVML's counters update no faster) to {MAX_INTERVAL_S:g}, got {interval_s!r}")
    return value


def next_sample_at(due_s: float, now_s: float, interval_s: float) -> tuple[float, float]:
    """The clock time (``time.monotonic``) of the sample after the one due at ``due_s``, and the seconds to
    wait for it from ``now_s``: one interval after the last one was due, not after it ended. Behind by more
    than that (slow NVML), the next sample is taken now: skip, never burst to catch up."""
    next_s = due_s + interval_s
    if next_s < now_s:
        return now_s, 0.0
    return next_s, next_s - now_s


def interval_meta(requested_s: float, kept_s: float | None) -> dict[str, float]:
    """The run-log meta of the interval actually kept: ``interval_s`` (the median gap between samples) and
    ``requested_interval_s`` when samples came more than ``KEPT_INTERVAL_SLACK`` times slower than asked;
    nothing when the requested interval was kept (already recorded at the start) or is unknown."""
    if kept_s is None or kept_s <= requested_s * KEPT_INTERVAL_SLACK:
        return {}
    return {INTERVAL_S_KEY: round(kept_s, 6), REQUESTED_INTERVAL_S_KEY: requested_s}


class MedianGap:
    """The (lower) median of the gaps between samples, in bounded memory however long the run: gaps counted in
    bins 0.1 % wide on a log scale, the median bin's mean gap reported. A median, not the mean: one pause (a
    suspended process, a stalled driver) is one long gap, not a slower interval over the whole run."""

    def __init__(self) -> None:
        self.count = 0
        self._bins: dict[int, list[float]] = {}     # log-scale bin -> [gaps, their sum in seconds]

    def add(self, gap_s: float) -> None:
        b = self._bins.setdefault(round(math.log(max(gap_s, 1e-9)) * 1000), [0, 0.0])
        b[0] += 1
        b[1] += gap_s
        self.count += 1

    def median_s(self) -> float | None:
        if not self.count:
            return None
        seen, middle = 0, (self.count - 1) // 2
        for key in sorted(self._bins):
            n, total_s = self._bins[key]
            seen += n
            if seen > middle:
                return total_s / n
        return None


def open_run_log(path: str | Path) -> RunLog:
    """A RunLog, or MonitorError (exit 2, one line) when the file cannot be written."""
    try:
        return RunLog(path)
    except (OSError, sqlite3.Error) as exc:
        raise MonitorError(f"cannot write the run log {path}: {exc}") from None


class Sampler:
    def __init__(
        self,
        backend: Backend,
        *,
        interval_s: float = 1.0,
        runlog: RunLog | None = None,
        history: int = 120,
        watch_pid: int | None = None,
        commit_period_s: float = 1.0,
    ) -> None:
        """``watch_pid``: the root of the process tree whose GPU memory is the job's (None: every process)."""
        self.backend = backend
        self.interval_s = check_interval_s(interval_s)
        self.runlog = runlog
        self.watch_pid = watch_pid
        self.commit_period_s = commit_period_s
        self.samples_taken = 0
        self.write_error: Exception | None = None
        self._history: dict[tuple[int, int | None], deque[GpuSample]] = {}
        self._history_len = history
        self._latest: list[GpuSample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch_pids: frozenset[int] | None = None
        self._pids_at_s = -1e18
        self._committed_at_s = time.monotonic()
        self._lost: set[tuple[int, int | None]] = set()
        self._warned_locked = False
        self._last_at_s: float | None = None      # time.monotonic() of the last sample
        self._gaps = MedianGap()
        self.log_claim: NewLog | None = None      # the run log held (open_sampler), released by close_sampler

    # -- one sample ------------------------------------------------------------------------------
    def sample_once(self) -> list[GpuSample]:
        samples = self.backend.sample(self._current_watch_pids())
        with self._lock:
            self._latest = samples
            for s in samples:
                self._history.setdefault(s.key, deque(maxlen=self._history_len)).append(s)
            reporting = {s.key for s in samples}
            for key in [k for k in self._history if k not in reporting]:
                del self._history[key]     # stopped reporting: its last numbers would pass for current
        self.samples_taken += 1
        now_s = time.monotonic()
        if self._last_at_s is not None:
            self._gaps.add(now_s - self._last_at_s)
        self._last_at_s = now_s
        self._write(samples)
        return samples

    def _current_watch_pids(self) -> frozenset[int] | None:
        if self.watch_pid is None:
            return None
        now = time.monotonic()
        if now - self._pids_at_s >= PID_REFRESH_S:
            self._watch_pids = process_tree(self.watch_pid)
            self._pids_at_s = now
        return self._watch_pids

    def _write(self, samples: Iterable[GpuSample]) -> None:
        if self.runlog is None or self.write_error is not None:
            return
        try:
            samples = list(samples)
            for s in samples:
                if s.lost and s.key not in self._lost:
                    self._lost.add(s.key)
                    self.runlog.log_event(GPU_LOST_EVENT, f"GPU {s.label} ({s.name}) fell off the bus", t_s=s.t_s)
            self.runlog.write_gpu_samples(s.to_row() for s in samples)
            if time.monotonic() - self._committed_at_s >= self.commit_period_s:
                self.runlog.flush()
                self._committed_at_s = time.monotonic()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                self._give_up_writing(exc)
            elif not self._warned_locked:  # another writer held the file too long: this sample is skipped
                self._warned_locked = True
                log.warning("run log busy, a sample was skipped: %s", exc)
        except Exception as exc:  # a full disk must not kill the job being watched
            self._give_up_writing(exc)

    def _give_up_writing(self, exc: Exception) -> None:
        self.write_error = exc
        log.warning("run log write failed, sampling goes on without it: %s", exc)

    # -- the thread ------------------------------------------------------------------------------
    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._loop, name="gpuwise-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        due_s = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # never let a sampling bug take the watched job down
                log.error("sampling failed: %s", exc)
            due_s, delay_s = next_sample_at(due_s, time.monotonic(), self.interval_s)
            self._stop.wait(delay_s)

    @property
    def kept_interval_s(self) -> float | None:
        """The median seconds between the samples taken so far (None before the second): a pause does not
        count as a slower interval."""
        return self._gaps.median_s()

    def end_meta(self, extra: Mapping[str, object] | None = None) -> dict[str, object]:
        """The run-log meta written when sampling ends: ``end_t_s``, the interval kept where it was not the
        one asked for (``interval_meta``), and ``extra``."""
        return end_meta({**interval_meta(self.interval_s, self.kept_interval_s), **(extra or {})})

    def stop(self, final_sample: bool = True) -> None:
        """Stops the thread, takes one last sample, and commits the log (the log stays open)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if final_sample:
            try:
                self.sample_once()
            except Exception:
                pass
        if self.runlog is not None and self.write_error is None:
            try:
                self.runlog.flush()
            except Exception as exc:
                self._give_up_writing(exc)

    # -- reading ---------------------------------------------------------------------------------
    def latest(self) -> list[GpuSample]:
        with self._lock:
            return list(self._latest)

    def history(self) -> dict[tuple[int, int | None], list[GpuSample]]:
        with self._lock:
            return {k: list(v) for k, v in self._history.items()}


def open_sampler(backend: Backend, *, interval_s: float, log_path: str | Path | None = None) -> Sampler:
    """A Sampler over ``backend`` for ``watch`` and ``exporter``, writing the run log ``log_path`` when given:
    a new file, claimed as ``gpuwise run`` claims its own (``new_log.create_new_log``: one that already holds
    a run is refused, exit 2, the file untouched), its meta (``log_meta.start_meta``) written first. Bad
    input (the interval, a log that exists or cannot be written) is a MonitorError before anything is
    written. ``close_sampler`` ends it."""
    interval_s = check_interval_s(interval_s)
    if not log_path:
        return Sampler(backend, interval_s=interval_s)
    claim = create_new_log(log_path)
    try:
        runlog = open_run_log(claim.path)
    except BaseException:
        discard_log(claim)
        raise
    try:
        write_meta(runlog, start_meta(backend, interval_s,
                                      on_error=lambda exc: log.warning("driver version not read: %s", exc)))
    except BaseException:
        runlog.close()
        discard_log(claim)
        raise
    sampler = Sampler(backend, interval_s=interval_s, runlog=runlog)
    sampler.log_claim = claim
    return sampler


def close_sampler(sampler: Sampler, *, discard_log_file: bool = False) -> None:
    """Stops ``sampler`` (no last sample), records the end in its run log (``Sampler.end_meta``) and closes
    it, and the backend. ``discard_log_file``: the command failed before it started (the exporter could not
    bind): the run log it created is removed, as ``gpuwise run`` removes one when its command never starts."""
    sampler.stop(final_sample=False)
    try:
        if sampler.runlog is not None:
            if sampler.write_error is None and not discard_log_file:
                try:
                    write_meta(sampler.runlog, sampler.end_meta())
                except Exception as exc:   # a full disk: the samples already written stand
                    log.warning("run log end not written: %s", exc)
            sampler.runlog.close()
    finally:
        try:
            sampler.backend.close()
        finally:
            if sampler.log_claim is not None:
                if discard_log_file:
                    discard_log(sampler.log_claim)
                else:
                    sampler.log_claim.release()
                sampler.log_claim = None
