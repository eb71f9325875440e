"""``gpuwise run -- CMD``: start a command, sample the GPUs until it ends, pass signals on, keep its exit code.

Signals: SIGTERM (what schedulers and preemption send to the main process) is always passed on to the
command. SIGINT is passed on too, except when gpuwise runs in the terminal's foreground process group: a
Ctrl-C there already reached the command (same group), and passing it on would interrupt it twice.
The command's exit code becomes ours; a command killed by signal N gives 128+N, as in a shell.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gpuwise import __version__
from gpuwise.monitor.backend import Backend, NoDriverError, open_backend
from gpuwise.monitor.hook import HOOK_DIR, RUNLOG_ENV
from gpuwise.monitor.sampler import Sampler, open_run_log

FORWARDED = (signal.SIGINT, signal.SIGTERM)


@dataclass
class RunResult:
    exit_code: int
    log_path: Path
    sampled: bool
    no_driver: str | None = None          # why nothing was sampled
    samples_taken: int = 0
    duration_s: float = 0.0
    forwarded: list[str] = field(default_factory=list)


def default_log_path() -> Path:
    return Path(f"gpuwise-run-{time.strftime('%Y%m%d-%H%M%S')}.db")


def _terminal_delivered_sigint() -> bool:
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def run_command(
    cmd: list[str],
    *,
    log_path: str | Path | None = None,
    interval_s: float = 1.0,
    torch_hook: bool = False,
    backend: Backend | None = None,
    child_stdout: IO | int | None = None,
    announce: IO | None = sys.stderr,
) -> RunResult:
    """Runs ``cmd`` to its end while sampling; returns its exit code and the log. ``backend`` None: NVML
    (or $GPUWISE_MONITOR_BACKEND); without a driver the command still runs, unsampled."""
    log = Path(log_path) if log_path else default_log_path()
    runlog = open_run_log(log)  # bad path: exit 2 before anything starts
    no_driver = None
    if backend is None:
        try:
            backend = open_backend()
        except NoDriverError as exc:
            no_driver = str(exc)
            if announce:
                print(f"gpuwise: {exc}: running the command without GPU sampling", file=announce, flush=True)
    runlog.set_meta("command", cmd)
    runlog.set_meta("host", socket.gethostname())
    runlog.set_meta("start_t_s", time.time())
    runlog.set_meta("gpuwise_version", __version__)
    runlog.set_meta("interval_s", interval_s)
    runlog.set_meta("backend", backend.name if backend else "none")
    if backend is not None:
        runlog.set_meta("driver_version", backend.driver_version() or "")
    runlog.flush()
    env = dict(os.environ)
    if torch_hook:
        env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env[RUNLOG_ENV] = str(log.resolve())
    start = time.monotonic()
    try:
        child = subprocess.Popen(cmd, env=env, stdout=child_stdout)
    except OSError as exc:
        runlog.log_event("exit", f"could not start: {exc}")
        runlog.close()
        if announce:
            print(f"gpuwise: cannot run {cmd[0]!r}: {exc.strerror or exc}", file=announce)
        return RunResult(127 if isinstance(exc, FileNotFoundError) else 126, log, False, no_driver)
    runlog.set_meta("pid", child.pid)
    result = RunResult(0, log, backend is not None, no_driver)

    def forward(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and _terminal_delivered_sigint():
            return
        result.forwarded.append(signal.Signals(signum).name)
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    # Signal handlers can only be set from the main thread (a library caller may be elsewhere).
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, forward) for s in FORWARDED} if in_main else {}
    sampler = Sampler(backend, interval_s=interval_s, runlog=runlog, watch_pid=child.pid).start() if backend else None
    try:
        returncode = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if sampler is not None:
            sampler.stop()
            result.samples_taken = sampler.samples_taken
            backend.close()
    result.duration_s = time.monotonic() - start
    result.exit_code = returncode if returncode >= 0 else 128 - returncode
    runlog.set_meta("end_t_s", time.time())
    runlog.set_meta("exit_code", result.exit_code)
    if result.forwarded:
        runlog.log_event("signals", json.dumps(result.forwarded))
    runlog.log_event("exit", f"exit code {result.exit_code}")
    runlog.close()
    return result
