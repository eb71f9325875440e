"""``gpuwise run -- CMD``: start a command, sample the GPUs until it ends, pass signals on, keep its exit code.

Signals: the command runs in its own process group, and every signal gpuwise can catch (SIGINT, SIGTERM,
SIGHUP, SIGQUIT, SIGUSR1 (SLURM's preemption warning), SIGUSR2, SIGALRM, SIGWINCH, real-time signals, ...)
is passed on to that whole group, so workers a launcher started get it too. A terminal's Ctrl-C reaches
gpuwise and is passed on once. Ctrl-Z stops the command's group and then gpuwise; ``fg`` continues both.
Not passed on: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD, SIGPIPE, and the faults (SIGSEGV, ...).
Since the command is not in the terminal's foreground group, it cannot read from the terminal.

Exit code: the command's, or 128+N when signal N killed it, as in a shell, whatever happens to sampling,
the run log or the report: those failures are warnings on stderr.
"""

from __future__ import annotations

import logging

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuwise import __version__
from gpuwise.monitor.backend import Backend, NoDriverError, open_backend
from gpuwise.monitor.hook import HOOK_DIR, RUNLOG_ENV
from gpuwise.monitor.sampler import Sampler, check_interval_s, open_run_log

logger = logging.getLogger(__name__)

_NOT_FORWARDED = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGPIPE, signal.SIGSEGV, signal.SIGBUS,
                  signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS, signal.SIGTTIN,
                  signal.SIGTTOU, signal.SIGXFSZ, signal.SIGXCPU}  # the last two: about gpuwise itself
FORWARDED = tuple(s for s in sorted(signal.valid_signals()) if s not in _NOT_FORWARDED)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}" if signal.SIGRTMIN <= signum <= signal.SIGRTMAX else str(signum)


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


def _warn(announce: bool, what: str, exc: BaseException) -> None:
    if announce:
        logger.warning("%s: %s", what, exc)


def _best_effort(announce: bool, what: str, action: Callable[[], Any]) -> None:
    """Run ``action``; a failure (a full disk under the run log, a backend gone) is a warning, never the
    end of the run: the command's exit code matters more than our bookkeeping."""
    try:
        action()
    except Exception as exc:
        _warn(announce, what, exc)


def run_command(
    cmd: list[str],
    *,
    log_path: str | Path | None = None,
    interval_s: float = 1.0,
    torch_hook: bool = False,
    backend: Backend | None = None,
    child_stdout: IO | int | None = None,
    announce: bool = True,
    workload: dict | None = None,
) -> RunResult:
    """Runs ``cmd`` to its end while sampling; returns its exit code and the log. ``backend`` None: NVML
    (or $GPUWISE_MONITOR_BACKEND); without a driver the command still runs, unsampled. Bad input (an
    interval, a log path that cannot be written) is a MonitorError before the command starts. Warnings go
    to the ``gpuwise.monitor`` logger (``announce`` False: none). ``workload``:
    the job as ``Workload.to_dict()``, recorded as meta ``workload`` (report and calibrate read it)."""
    interval_s = check_interval_s(interval_s)
    log = Path(log_path) if log_path else default_log_path()
    runlog = open_run_log(log)  # bad path: exit 2 before anything starts
    no_driver = None
    if backend is None:
        try:
            backend = open_backend()
        except NoDriverError as exc:
            no_driver = str(exc)
            if announce:
                logger.warning("%s: running the command without GPU sampling", exc)
    meta: dict[str, object] = {"command": cmd, "host": socket.gethostname(), "start_t_s": time.time(),
                               "gpuwise_version": __version__, "interval_s": interval_s,
                               "backend": backend.name if backend else "none"}
    if workload is not None:
        meta["workload"] = workload
    if backend is not None:
        _best_effort(announce, "driver version not read", lambda: meta.update(driver_version=backend.driver_version() or ""))
    _best_effort(announce, "run log meta not written", lambda: _write_meta(runlog, meta))
    env = dict(os.environ)
    if torch_hook:
        env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env[RUNLOG_ENV] = str(log.resolve())
    result = RunResult(0, log, backend is not None, no_driver)
    forwarder = _Forwarder(result)
    # Handlers before the child exists: a signal in between is delivered once the child runs.
    in_main = threading.current_thread() is threading.main_thread()
    previous = forwarder.install() if in_main else {}
    start = time.monotonic()
    try:
        child = subprocess.Popen(cmd, env=env, stdout=child_stdout, process_group=0)
    except OSError as exc:
        forwarder.uninstall(previous)
        message = f"could not start: {exc}"
        _best_effort(announce, "run log not written", lambda: runlog.log_event("exit", message))
        _best_effort(announce, "run log not closed", runlog.close)
        if announce:
            logger.error("cannot run %r: %s", cmd[0], exc.strerror or exc)
        return RunResult(127 if isinstance(exc, FileNotFoundError) else 126, log, False, no_driver)
    forwarder.started(child.pid)
    _best_effort(announce, "run log meta not written", lambda: runlog.set_meta("pid", child.pid))
    sampler = None
    if backend is not None:
        try:
            sampler = Sampler(backend, interval_s=interval_s, runlog=runlog, watch_pid=child.pid).start()
        except Exception as exc:
            _warn(announce, "sampling did not start, the command runs unsampled", exc)
    try:
        returncode = _wait(child)
    finally:
        forwarder.uninstall(previous)
    if sampler is not None:
        _best_effort(announce, "sampling did not stop cleanly", sampler.stop)
        result.samples_taken = sampler.samples_taken
    if backend is not None:
        _best_effort(announce, "GPU backend not closed", backend.close)
    result.duration_s = time.monotonic() - start
    result.exit_code = returncode if returncode >= 0 else 128 - returncode
    end = {"end_t_s": time.time(), "exit_code": result.exit_code}
    _best_effort(announce, "run log meta not written", lambda: _write_meta(runlog, end))
    if result.forwarded:
        _best_effort(announce, "run log not written", lambda: runlog.log_event("signals", json.dumps(result.forwarded)))
    _best_effort(announce, "run log not written", lambda: runlog.log_event("exit", f"exit code {result.exit_code}"))
    _best_effort(announce, "run log not closed", runlog.close)
    return result


def _write_meta(runlog: Any, values: dict[str, object]) -> None:
    for key, value in values.items():
        runlog.set_meta(key, value)
    runlog.flush()


def _wait(child: subprocess.Popen) -> int:
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # only if SIGINT could not be forwarded (not the main thread): keep waiting
            continue


class _Forwarder:
    """Passes signals to the child's process group; remembers those that came before the child existed."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        self.pgid: int | None = None
        self.early: list[int] = []

    def install(self) -> dict[int, Any]:
        previous = {}
        for s in FORWARDED:
            try:
                previous[s] = signal.signal(s, self.handle)
            except (OSError, ValueError, RuntimeError):
                continue  # reserved by the C library on this platform
        return previous

    def uninstall(self, previous: dict[int, Any]) -> None:
        for s, handler in previous.items():
            try:
                signal.signal(s, handler)
            except (OSError, ValueError, TypeError):
                pass

    def started(self, pid: int) -> None:
        self.pgid = pid
        for signum in self.early:
            self.send(signum)

    def handle(self, signum: int, _frame: object) -> None:
        if self.pgid is None:
            self.early.append(signum)
            return
        self.send(signum)
        if signum == signal.SIGTSTP:  # job control: the command's group stopped, now gpuwise itself
            os.kill(os.getpid(), signal.SIGSTOP)

    def send(self, signum: int) -> None:
        if signum not in (signal.SIGWINCH, signal.SIGCONT):
            self.result.forwarded.append(signal_name(signum))
        try:
            os.killpg(self.pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass
