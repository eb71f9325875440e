"""What the report tests share: run logs written through the monitor's Sampler (a ReplayBackend of frames, the
fake NVML's recorded form), and the terminal report as text."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.report.text import render_report
from gpuwise.runlog import RunLog


def _sample(runlog: RunLog, frames: list[list[dict]], *, watch_pid: int | None = None,
            samples: int | None = None) -> None:
    """``samples`` (default: one per frame) samples of ``frames`` at their own ``t_s``, into ``runlog``."""
    sampler = Sampler(ReplayBackend(frames, stamp_now=False), runlog=runlog, watch_pid=watch_pid)
    for _ in range(samples or len(frames)):
        sampler.sample_once()


def sampler_log(path: Path, frames: list[list[dict]], *, meta: dict | None = None, watch_pid: int | None = None,
                samples: int | None = None, events: tuple[tuple[str, str], ...] = ()) -> Path:
    """A run log as the library's Sampler writes it (no start or end in meta: not one run): ``meta`` first,
    then the samples, then ``events`` as (kind, message)."""
    with RunLog(path) as runlog:
        for key, value in (meta or {}).items():
            runlog.set_meta(key, value)
        _sample(runlog, frames, watch_pid=watch_pid, samples=samples)
        for kind, message in events:
            runlog.log_event(kind, message)
    return path


def gpuwise_run_log(path: Path, frames: list[list[dict]], *, ended: bool = True) -> Path:
    """A run log as `gpuwise run` writes it: its command and start (the first frame's time) in meta, the samples,
    and its end (the last frame's time, exit code 0) unless ``ended`` is False."""
    with RunLog(path) as runlog:
        runlog.set_meta("command", ["python", "train.py"])
        runlog.set_meta("start_t_s", frames[0][0].get("t_s", 0.0))
        _sample(runlog, frames)
        if ended:
            runlog.set_meta("end_t_s", frames[-1][0].get("t_s", 0.0))
            runlog.set_meta("exit_code", 0)
    return path


def ended_run_log(path: Path, frames: list[list[dict]], exit_code: int, events=(), *,
                  signal_name: str | None = None) -> Path:
    """``gpuwise_run_log`` ending with ``exit_code`` (and the ``signal`` meta where ``signal_name`` is given: a log
    written before gpuwise recorded it has none) after one training step and ``events`` ((kind, message) pairs)."""
    gpuwise_run_log(path, frames)
    with RunLog(path) as log:
        log.set_meta("exit_code", exit_code)
        if signal_name is not None:
            log.set_meta("signal", signal_name)
        log.log_train(7, t_s=102.0, loss=1.0)
        for kind, message in events:
            log.log_event(kind, message)
    return path


def text_of(report, width: int = 200) -> str:
    """The report as a terminal ``width`` columns wide shows it."""
    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, file=sink)
        console.print(render_report(report))
    return console.export_text()


def one_line(text: str) -> str:
    """``text`` with every run of white space (line breaks included) one space: phrases survive wrapping."""
    return " ".join(text.split())
