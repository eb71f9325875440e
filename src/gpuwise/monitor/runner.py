"""``gpuwise run -- CMD``: start a command, sample the GPUs until it ends, pass signals on, keep its exit code.

Signals: the command runs in its own process group, and every signal gpuwise can catch (SIGINT, SIGTERM,
SIGHUP, SIGQUIT, SIGUSR1 (SLURM's preemption warning), SIGUSR2, SIGALRM, SIGWINCH, real-time signals, ...)
is passed on to that whole group, so workers a launcher started get it too. A terminal's Ctrl-C reaches
gpuwise and is passed on once. Ctrl-Z stops the command's group and then gpuwise; ``fg`` continues both.
Not passed on: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD, SIGPIPE, and the faults (SIGSEGV, ...).
Since the command is not in the terminal's foreground group, it cannot read from the terminal: one that tries
is stopped (SIGTTIN), and gpuwise says so once. A stop signal passed on is followed by SIGCONT to the group, so
a stopped command runs its handler rather than meet SIGKILL after the grace period. A command that takes the
signal but stops on the terminal before it acts on it (Python takes a SIGINT at once and acts on it between two
bytecodes; a read of the terminal in between stops it, and a bare SIGCONT only restarts that read) gets it once
more, with SIGCONT, when gpuwise sees that stop: it is no longer stopped in a read that waits for ever. A signal
gpuwise was started with ignored stays ignored, for gpuwise and the command (``nohup``, background jobs of a
non-interactive shell), as a shell leaves it.

A command that cannot start (127: not found, 126: not runnable) ends its run log like any other run:
``exit_code``, ``end_t_s`` and ``start_error`` in meta.

When gpuwise is killed outright (SIGKILL, the OOM killer) the command does not run on unmonitored, holding
the GPU: on Linux the kernel sends it SIGTERM as its parent dies (``PR_SET_PDEATHSIG``), and a watchdog
(:mod:`gpuwise.monitor.orphan_watch`, started beside it) sends its whole process group SIGTERM, then SIGKILL
after the grace period. Not covered: processes that left the group (``setsid``, daemons), and a SIGKILL of
the watchdog too (``kill -9 -- -PGID`` of gpuwise's own group leaves the grandchildren).

A command that does not stop within ``kill_after_s`` (default 30 s) of a SIGTERM, SIGINT, SIGHUP or SIGQUIT
passed on gets SIGKILL (its whole group), said on stderr and in the run log (event ``kill``). The grace period
is the group's, not only the direct child's: when the child has ended but a worker of its group (one that
ignores SIGTERM) is still alive, gpuwise waits for the group until the grace period ends, then SIGKILLs it;
the exit code stays the child's.

Without a stop signal, gpuwise ends with its command: processes of its group still running a second after it
ended (workers started in the background and not waited for) are left running, unsampled, and said (a warning,
the run log's event ``left_running``, ``RunResult.left_running``), as they may hold a rented GPU.

The run log holds this one run: without ``log_path`` it is a new ``gpuwise-run-YYYYmmdd-HHMMSS.db`` (``-2``,
``-3``, … when that name is taken, created exclusively: two runs in the same second get two logs); a
``log_path`` is created exclusively too (two runs given the same one at once: the second is refused), and one
that already holds something is refused (exit 2, the file untouched), so a second run never takes the first
one's meta (command, workload, exit code) or mixes its samples and events with them. A run that fails before
its command starts (exit 2: the log cannot be opened, no such monitor backend) removes the log it created.

The run log's meta records the GPUs the command could see (``cuda_visible_devices``: CUDA_VISIBLE_DEVICES as it got
it, null when unset): NVML lists, and the sampler samples, every GPU of the node, another user's too, and the report
counts as idle beside the job only those the job could see.

Exit code: the command's, or 128+N when signal N killed it, as in a shell, whatever happens to sampling,
the run log or the report: those failures are warnings on stderr. The run log's meta records it as
``exit_code``, and the signal's name as ``signal`` when one killed the command (``exit_status``).
"""

from __future__ import annotations

import logging

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuwise.monitor.backend import Backend, MonitorError, NoDriverError, open_backend
from gpuwise.monitor.hook import HOOK_DIR, RUNLOG_ENV
from gpuwise.monitor.log_meta import (COMMAND_KEY, EXIT_CODE_KEY, PID_KEY, SIGNAL_KEY, START_ERROR_KEY, end_meta,
                                      start_meta, write_meta)
from gpuwise.monitor.new_log import RUN_HINT, NewLog, create_new_log, default_log_path, discard_log, hold  # noqa: F401
from gpuwise.monitor.orphan_watch import POLL_S, group_alive, running_members
from gpuwise.monitor.sampler import Sampler, check_interval_s, open_run_log
from gpuwise.runlog import VISIBLE_DEVICES_ENV, VISIBLE_DEVICES_KEY, WORKLOAD_KEY, visible_devices_meta

logger = logging.getLogger(__name__)

_NOT_FORWARDED = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGPIPE, signal.SIGSEGV, signal.SIGBUS,
                  signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGTRAP, signal.SIGSYS, signal.SIGTTIN,
                  signal.SIGTTOU, signal.SIGXFSZ, signal.SIGXCPU}  # the last two: about gpuwise itself
FORWARDED = tuple(s for s in sorted(signal.valid_signals()) if s not in _NOT_FORWARDED)
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)  # after these, the grace period runs
TERMINAL_STOPS = (signal.SIGTTIN, signal.SIGTTOU)   # a command outside the terminal's foreground stops on these
DEFAULT_KILL_AFTER_S = 30.0
LEFT_RUNNING_SETTLE_S = 1.0   # a group's processes still exiting as the command ends are not "left running"
# the run log's events of a run (docs/runlog.md); report.run_end reads the signals and the kill
EXIT_EVENT = "exit"                   # "exit code N", or "could not start: …"
SIGNALS_EVENT = "signals"             # a JSON list of the names of the signals passed on to the command
KILL_EVENT = "kill"                   # why SIGKILL was sent to the command's group after the grace period
LEFT_RUNNING_EVENT = "left_running"   # the processes of the group still running after the command ended
_PR_SET_PDEATHSIG = 1
_WATCHDOG = Path(__file__).with_name("orphan_watch.py")


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
    killed: str | None = None    # why SIGKILL was sent (the command ignored a stop signal), None if not
    signal: str | None = None    # the signal that ended the command ("SIGKILL"), None when it exited itself
    left_running: list[int] = field(default_factory=list)   # pids of its group still running after it ended


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
    kill_after_s: float | None = DEFAULT_KILL_AFTER_S,
) -> RunResult:
    """Runs ``cmd`` to its end while sampling; returns its exit code and the log. ``backend`` None: NVML
    (or $GPUWISE_MONITOR_BACKEND); without a driver the command still runs, unsampled. Bad input (an
    interval, a log path that cannot be written) is a MonitorError before the command starts. Warnings go
    to the ``gpuwise.monitor`` logger (``announce`` False: none). ``workload``:
    the job as ``Workload.to_dict()``, recorded as meta ``workload`` (report and calibrate read it).
    ``kill_after_s``: the grace period after a stop signal passed on (None: wait for ever)."""
    interval_s = check_interval_s(interval_s)
    kill_after_s = check_kill_after_s(kill_after_s)
    # a run log holds one run: an explicit path must be new, the default one is created new (both exclusively)
    if log_path:
        claim = create_new_log(log_path, hint=RUN_HINT)
    else:
        default = default_log_path()
        claim = hold(default, os.open(default, os.O_RDONLY), created=True)
    log = claim.path
    runlog = None
    try:   # a failure before the command starts (exit 2) leaves no run log behind
        runlog = open_run_log(log)  # bad path: exit 2 before anything starts
        no_driver = None
        if backend is None:
            try:
                backend = open_backend()
            except NoDriverError as exc:
                no_driver = str(exc)
                if announce:
                    logger.warning("%s: running the command without GPU sampling", exc)
    except BaseException:
        if runlog is not None:
            _best_effort(False, "run log not closed", runlog.close)
        discard_log(claim)
        raise
    meta = start_meta(backend, interval_s, on_error=lambda exc: _warn(announce, "driver version not read", exc))
    meta[COMMAND_KEY] = cmd
    if workload is not None:
        meta[WORKLOAD_KEY] = workload
    env = dict(os.environ)
    # NVML lists every GPU of the node, whatever the command may use: the report counts as idle only those it could see
    meta[VISIBLE_DEVICES_KEY] = visible_devices_meta(env.get(VISIBLE_DEVICES_ENV))
    _best_effort(announce, "run log meta not written", lambda: write_meta(runlog, meta))
    if torch_hook:
        env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env[RUNLOG_ENV] = str(log.resolve())
    result = RunResult(0, log, backend is not None, no_driver)
    forwarder = _Forwarder(result, kill_after_s, announce)
    # Handlers before the child exists: a signal in between is delivered once the child runs.
    in_main = threading.current_thread() is threading.main_thread()
    previous = forwarder.install() if in_main else {}
    start = time.monotonic()
    try:
        child = subprocess.Popen(cmd, env=env, stdout=child_stdout, process_group=0,
                                 preexec_fn=_die_with_parent_fn())
    except OSError as exc:
        forwarder.uninstall(previous)
        # as a shell: 127 not found, 126 found but not runnable; the log records the end like any other run's
        exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
        message = f"could not start: {exc}"
        if backend is not None:
            _best_effort(announce, "GPU backend not closed", backend.close)
        _best_effort(announce, "run log meta not written",
                     lambda: write_meta(runlog, end_meta({EXIT_CODE_KEY: exit_code, START_ERROR_KEY: str(exc)})))
        _best_effort(announce, "run log not written", lambda: runlog.log_event(EXIT_EVENT, message))
        _best_effort(announce, "run log not closed", runlog.close)
        claim.release()
        if announce:
            logger.error("cannot run %r: %s", cmd[0], exc.strerror or exc)
        return RunResult(exit_code, log, False, no_driver, duration_s=time.monotonic() - start)
    forwarder.started(child.pid)
    watchdog = _start_watchdog(child.pid, kill_after_s, announce)
    _best_effort(announce, "run log meta not written", lambda: runlog.set_meta(PID_KEY, child.pid))
    sampler = None
    if backend is not None:
        try:
            sampler = Sampler(backend, interval_s=interval_s, runlog=runlog, watch_pid=child.pid).start()
        except Exception as exc:
            _warn(announce, "sampling did not start, the command runs unsampled", exc)
    try:
        returncode = _wait(child, forwarder)
        forwarder.wait_for_group()   # after a stop signal, the workers left in the group have the grace period too
    finally:
        forwarder.finish()
        forwarder.uninstall(previous)
        _stop_watchdog(watchdog)
    result.left_running = left_running(child.pid)
    if result.left_running:
        said = left_running_message(result.left_running)
        if announce:
            logger.warning("%s", said)
        _best_effort(announce, "run log not written", lambda: runlog.log_event(LEFT_RUNNING_EVENT, said))
    if sampler is not None:
        _best_effort(announce, "sampling did not stop cleanly", sampler.stop)
        result.samples_taken = sampler.samples_taken
    if backend is not None:
        _best_effort(announce, "GPU backend not closed", backend.close)
    result.duration_s = time.monotonic() - start
    status = exit_status(returncode)
    result.exit_code = status[EXIT_CODE_KEY]
    result.signal = status.get(SIGNAL_KEY)
    ended = sampler.end_meta if sampler is not None else end_meta
    _best_effort(announce, "run log meta not written", lambda: write_meta(runlog, ended(status)))
    if result.forwarded:
        forwarded_json = json.dumps(result.forwarded)
        _best_effort(announce, "run log not written", lambda: runlog.log_event(SIGNALS_EVENT, forwarded_json))
    if result.killed is not None:
        _best_effort(announce, "run log not written", lambda: runlog.log_event(KILL_EVENT, result.killed))
    _best_effort(announce, "run log not written", lambda: runlog.log_event(EXIT_EVENT, f"exit code {result.exit_code}"))
    _best_effort(announce, "run log not closed", runlog.close)
    claim.release()
    return result


def exit_status(returncode: int) -> dict[str, object]:
    """The run log's meta of how the command ended, from ``Popen.returncode``: ``exit_code`` as a shell gives it
    (128 + the signal's number for a command a signal ended), and ``signal`` (its name, "SIGKILL") only then, so a
    log tells a command killed by SIGKILL from one that exited with code 137 itself."""
    if returncode >= 0:
        return {EXIT_CODE_KEY: returncode}
    return {EXIT_CODE_KEY: 128 - returncode, SIGNAL_KEY: signal_name(-returncode)}


def left_running(pgid: int, settle_s: float = LEFT_RUNNING_SETTLE_S) -> list[int]:
    """The pids of the command's process group still running ``settle_s`` seconds after the command ended
    (workers it started in the background and did not wait for); [] when none, or where /proc cannot tell."""
    deadline_s = time.monotonic() + settle_s
    while True:
        members = running_members(pgid) or []
        if not members or time.monotonic() >= deadline_s:
            return members
        time.sleep(POLL_S)


def left_running_message(pids: list[int]) -> str:
    """One line for stderr and the run log's ``left_running`` event."""
    shown = ", ".join(str(p) for p in pids[:10]) + (", ..." if len(pids) > 10 else "")
    return (f"{len(pids)} process(es) of the command's group still run after it ended (pid {shown}): gpuwise "
            "neither samples nor stops them, and they may hold the GPU")


def check_kill_after_s(kill_after_s: float | None) -> float | None:
    if kill_after_s is None:
        return None
    if not (isinstance(kill_after_s, (int, float)) and 0 <= kill_after_s < float("inf")):
        raise MonitorError(f"--kill-after: the grace period before SIGKILL must be a number of seconds >= 0, "
                           f"got {kill_after_s!r}")
    return float(kill_after_s)


def _die_with_parent_fn() -> Callable[[], None] | None:
    """For Popen's ``preexec_fn`` on Linux: the child gets SIGTERM when gpuwise dies (``PR_SET_PDEATHSIG``;
    the kernel ties it to the thread that started the child). None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl   # resolved here: nothing to load after the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:   # gpuwise died before the prctl: nobody would send it
            os.kill(os.getpid(), signal.SIGTERM)

    return die_with_parent


def _start_watchdog(pgid: int, kill_after_s: float | None, announce: bool) -> subprocess.Popen | None:
    """The process that stops the command's group if gpuwise dies without a goodbye (see orphan_watch)."""
    grace_s = DEFAULT_KILL_AFTER_S if kill_after_s is None else kill_after_s
    try:
        return subprocess.Popen([sys.executable, "-I", str(_WATCHDOG), str(pgid), str(grace_s)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        _warn(announce, "no watchdog: if gpuwise is killed, the command runs on", exc)
        return None


def _stop_watchdog(watchdog: subprocess.Popen | None) -> None:
    if watchdog is None:
        return
    try:
        watchdog.stdin.write(b"x")   # goodbye: the run ended here, nothing to stop
        watchdog.stdin.close()
    except OSError:
        pass
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


def _wait(child: subprocess.Popen, forwarder: _Forwarder) -> int:
    """Waits for the command to end, its exit status as ``Popen.returncode``. Each stop of the command goes to
    ``forwarder.command_stopped`` (a command stopped on the terminal would otherwise wait there, unseen, for
    ever), with the count of stop signals passed on before it: a stop seen while one was passed on (with its
    SIGCONT) may be over already, so it is looked at again rather than taken for a stop after that signal."""
    while True:
        passed_on = forwarder.stops_passed_on
        try:
            stopped_by = _next_stop(child)
        except KeyboardInterrupt:  # only if SIGINT could not be forwarded (not the main thread): keep waiting
            continue
        if stopped_by is None:
            return child.wait()
        if forwarder.stops_passed_on != passed_on:
            continue   # still stopped: seen again at once; continued by that SIGCONT: no longer reported
        _take_stop(child)
        forwarder.command_stopped(stopped_by, passed_on)


def _next_stop(child: subprocess.Popen) -> int | None:
    """Blocks until the command stops or ends: the signal that stopped it, or None once it has ended (left
    for ``Popen.wait`` to reap, so Popen keeps its exit status). The stop is left reported (``_take_stop``
    takes it). None at once where ``waitid`` is missing."""
    if not hasattr(os, "waitid"):
        return None
    info = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WSTOPPED | os.WNOWAIT)
    if info is None or info.si_code != os.CLD_STOPPED:
        return None
    return info.si_status


def _take_stop(child: subprocess.Popen) -> None:
    """This stop is seen: ``_next_stop`` blocks on the next change."""
    os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOHANG)


def terminal_stop_message(signame: str) -> str:
    """One line for stderr: the command stopped on the terminal, why, and what to do."""
    reads = signame == "SIGTTIN"
    action, remedy = ("read from", "its input from a file or </dev/null") if reads else ("wrote to or set", "its output to a file")
    return (f"the command is stopped ({signame}): it {action} the terminal, which a command under gpuwise run "
            f"cannot (it is not in the terminal's foreground); Ctrl-C stops it; give it {remedy}")


class _Forwarder:
    """Passes signals to the child's process group; remembers those that came before the child existed."""

    def __init__(self, result: RunResult, kill_after_s: float | None = None, announce: bool = True) -> None:
        self.result = result
        self.kill_after_s = kill_after_s
        self.announce = announce
        self.pgid: int | None = None
        self.early: list[int] = []
        self.timer: threading.Timer | None = None
        self.done = threading.Event()
        self.child_ended = False     # the direct child has ended (its group may live on)
        self.said_terminal_stop = False
        self.stops_passed_on = 0     # stop signals (STOPPING) passed on so far
        self.unrepeated: int | None = None   # the last one passed on, while not yet passed on again

    def install(self) -> dict[int, Any]:
        """Our handler for every signal passed on, except those gpuwise was started with ignored (``nohup``'s
        SIGHUP, SIGINT and SIGQUIT of a background job in a non-interactive shell): they stay ignored, for
        gpuwise and, inherited across exec, for the command, as a shell leaves them. Returns what to restore."""
        previous = {}
        for s in FORWARDED:
            try:
                if signal.getsignal(s) == signal.SIG_IGN:
                    continue
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
        if signum in STOPPING and self.kill_after_s is not None and self.timer is None:
            self.timer = threading.Timer(self.kill_after_s, self.escalate, args=(signal_name(signum),))
            self.timer.daemon = True
            self.timer.start()
        if signum == signal.SIGTSTP:  # job control: the command's group stopped, now gpuwise itself
            os.kill(os.getpid(), signal.SIGSTOP)

    def command_stopped(self, stopped_by: int, stops_passed_on_before: int) -> None:
        """The command stopped (``_wait``), after ``stops_passed_on_before`` stop signals were passed on. Stopped
        on the terminal: said once, as it may stop there again; and when a stop signal was passed on before
        this stop, that signal once more, with SIGCONT (each at most once): the command cannot go on there, and
        either took the first one but stopped before it acted on it (a Ctrl-C just before an ``input()``), or
        asks on the terminal after acting on it, where it would wait for the grace period's SIGKILL. A stop by
        SIGTSTP or SIGSTOP (Ctrl-Z, a debugger) is left as it is."""
        if stopped_by not in TERMINAL_STOPS:
            return
        self._say_terminal_stop(signal_name(stopped_by))
        if self.unrepeated is None or self.stops_passed_on != stops_passed_on_before:
            return   # none passed on, or one just now: its SIGCONT came after this stop
        again, self.unrepeated = self.unrepeated, None
        logger.debug("the command stopped on the terminal after %s was passed on: passed on again",
                     signal_name(again))
        self._signal_group(again)

    def _say_terminal_stop(self, signame: str) -> None:
        if self.said_terminal_stop or not self.announce:
            return
        self.said_terminal_stop = True
        logger.warning("%s", terminal_stop_message(signame))

    def wait_for_group(self) -> None:
        """The direct child has ended. After a stop signal passed on (the SIGKILL timer running), the rest of
        its process group still has the grace period: wait until the group is empty or the timer has sent
        SIGKILL (``escalate``). Without a stop signal, or without a grace period (wait for ever), nothing
        is waited for: gpuwise ends with its command, as before."""
        if self.pgid is None or self.timer is None:
            return
        self.child_ended = True
        while self.timer.is_alive() and group_alive(self.pgid):
            time.sleep(POLL_S)

    def finish(self) -> None:
        """The command has ended: no SIGKILL any more."""
        self.done.set()
        if self.timer is not None:
            self.timer.cancel()

    def escalate(self, after: str) -> None:
        if self.done.is_set() or self.pgid is None or not group_alive(self.pgid):
            return
        if self.child_ended:
            self.result.killed = (f"processes of the command's group did not stop {self.kill_after_s:g} s after "
                                  f"{after} (the command itself had ended): SIGKILL sent to its process group")
        else:
            self.result.killed = (f"the command did not stop {self.kill_after_s:g} s after {after}: SIGKILL sent "
                                  "to its process group")
        if self.announce:
            logger.warning("%s", self.result.killed)
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def send(self, signum: int) -> None:
        if signum not in (signal.SIGWINCH, signal.SIGCONT):
            self.result.forwarded.append(signal_name(signum))
        if signum in STOPPING:
            self.stops_passed_on += 1
            self.unrepeated = signum
        self._signal_group(signum)

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pgid, signum)
            if signum in STOPPING:
                # a stopped process (on the terminal, Ctrl-Z, SIGSTOP) keeps a stop signal pending until it is
                # continued: without this it would meet only the SIGKILL after the grace period (systemd too
                # follows its SIGTERM with SIGCONT)
                os.killpg(self.pgid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass
