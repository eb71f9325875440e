"""How a `gpuwise run` job ended, as its run log records it (meta ``exit_code`` and, where a signal ended the
command, ``signal``: monitor.runner.exit_status; the events ``signals``, the signals gpuwise passed on, and
``kill``, its SIGKILL after the grace period), and the line the report opens with when the job did not end with
exit code 0 of its own accord: every figure after it (memory, busy share, the verdict) describes a run cut short,
not the job's whole work. A job the user stopped (a stop signal passed on: ``kill``, Ctrl-C, ``scancel``) is
said stopped, not failed, whatever code its handler exited with."""

from __future__ import annotations

import json
import re
import signal as signals
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuwise.errors import EXIT_RESTART
from gpuwise.monitor.runner import KILL_EVENT, SIGNALS_EVENT, STOPPING, signal_name
from gpuwise.report.sources import RUN_LOG_SOURCE, UsageLog
from gpuwise.runlog import EXIT_CODE_KEY, PREEMPTED_EVENT, SIGNAL_KEY, RunLogError, read_train_metrics

_SIGNAL_NAME = re.compile(r"^(SIG[A-Z0-9+]{1,16}|\d{1,3})$")   # what runner.signal_name writes
STOP_SIGNAL_NAMES = frozenset(signal_name(s) for s in STOPPING)   # those after which the grace period runs


@dataclass(frozen=True)
class RunEnd:
    """The recorded end of a job: ``exit_code`` (None: the log records none), the ``signal`` that ended it (its
    name, None where none did), the last training step the log holds (``last_step``: None where it holds none, or
    where the job was not cut short: only then is it read), whether the guard exited after a preemption, the stop
    signal gpuwise passed on to it (``stop_signal``: the first of SIGTERM, SIGINT, SIGHUP, SIGQUIT; None where none
    was) and whether gpuwise then sent SIGKILL after the grace period (``killed_after_grace``)."""

    exit_code: int | None
    signal: str | None = None
    last_step: int | None = None
    preempted: bool = False
    stop_signal: str | None = None
    killed_after_grace: bool = False

    @property
    def ended(self) -> str | None:
        """In one word, for --json: "ok" (exit code 0), "failed" (another code), "killed" (by a signal),
        "preempted" (the guard checkpointed and exited to be restarted), "stopped" (gpuwise passed a stop signal on:
        the user or the scheduler stopped it, whatever code or signal then ended it); None where the log records
        no exit."""
        if self.exit_code is None:
            return None
        if self.preempted:
            return "preempted"
        if self.stop_signal is not None:
            return "stopped"
        if self.signal is not None:
            return "killed"
        return "ok" if self.exit_code == 0 else "failed"

    @property
    def cut_short(self) -> bool:
        """A job whose figures describe less than its whole work: any recorded end but exit code 0 of its own."""
        return self.ended not in (None, "ok")

    @property
    def run_words(self) -> str | None:
        """What run the figures describe, for the verdict: "a failed run" (a crash, a signal not passed on by
        gpuwise), "a stopped run", "a preempted run"; None for a job not cut short."""
        if not self.cut_short:
            return None
        return f"a {self.ended} run" if self.ended in ("stopped", "preempted") else "a failed run"


def recorded_exit(meta: Mapping[str, str | None]) -> tuple[int | None, str | None]:
    """(exit code, signal name) as the meta records them; None for what it lacks or holds in another form (a log
    edited by hand, written by another tool)."""
    try:
        code = int(str(meta.get(EXIT_CODE_KEY)))
    except ValueError:
        code = None
    name = meta.get(SIGNAL_KEY)
    return code, (name if code is not None and name and _SIGNAL_NAME.match(name) else None)


def stop_signal_passed_on(events: Iterable[Mapping[str, object]]) -> str | None:
    """The first stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT) of the log's ``signals`` events; None where there
    is none, or where an event holds another form (another tool's, one edited by hand)."""
    for event in events:
        if event.get("kind") != SIGNALS_EVENT:
            continue
        try:
            names = json.loads(str(event.get("message")))
        except ValueError:
            continue
        if isinstance(names, list):
            stop = next((n for n in names if isinstance(n, str) and n in STOP_SIGNAL_NAMES), None)
            if stop is not None:
                return stop
    return None


def run_end(log: UsageLog) -> RunEnd | None:
    """How the job of a gpuwise run log ended; None for another log. The training metrics are read for the last
    step only when the job was cut short (a long log's metrics take a while to read)."""
    if log.source != RUN_LOG_SOURCE:
        return None
    code, name = recorded_exit(log.meta)
    kinds = {e.get("kind") for e in log.events}
    preempted = name is None and code == EXIT_RESTART and PREEMPTED_EVENT in kinds
    end = RunEnd(code, name, preempted=preempted, stop_signal=stop_signal_passed_on(log.events),
                 killed_after_grace=name == signal_name(signals.SIGKILL) and KILL_EVENT in kinds)
    if not end.cut_short:
        return end
    return RunEnd(code, name, last_logged_step(log.path), preempted, end.stop_signal, end.killed_after_grace)


def last_logged_step(path: str) -> int | None:
    """The highest step of the log's training metrics (the guard's); None where it holds none or cannot be read."""
    try:
        metrics = read_train_metrics(path)
    except RunLogError:
        return None
    return max((step for series in metrics.values() for step, _, _ in series), default=None)


def run_end_line(end: RunEnd | None) -> str | None:
    """The report's first line for a job cut short: how it ended and after which step, so that what follows is
    read as the figures of a failed, stopped or preempted run. None for a job that ended with exit code 0 of its
    own accord or whose end is not recorded."""
    if end is None or not end.cut_short:
        return None
    after = (f" after its last logged step (step {end.last_step})" if end.last_step is not None
             else ", with no training step logged")
    if end.preempted:
        return (f"The job was preempted: it checkpointed and exited with code {end.exit_code} to be restarted"
                f"{after}; the figures describe the run until then, not the whole job.")
    if end.stop_signal is not None:
        return (f"The job was stopped: gpuwise passed on {end.stop_signal}, {_after_stop(end)}{after}; the figures "
                "describe the run until it was stopped, not the whole job.")
    if end.signal is not None:
        how = f"was killed by signal {end.signal} (exit code {end.exit_code})"
    else:
        how = f"exited with code {end.exit_code}{_shell_signal(end.exit_code)}"
    return f"The job {how}{after}: its figures describe a failed run."


def _after_stop(end: RunEnd) -> str:
    """What ended a job after gpuwise passed a stop signal on: that signal, its SIGKILL after the grace period,
    another signal, or the job's own exit (its handler's code)."""
    if end.killed_after_grace:
        return f"and killed it with SIGKILL after the grace period (exit code {end.exit_code})"
    if end.signal == end.stop_signal:
        return f"which ended it (exit code {end.exit_code})"
    if end.signal is not None:
        return f"then signal {end.signal} ended it (exit code {end.exit_code})"
    return f"and it exited with code {end.exit_code}{_shell_signal(end.exit_code)}"


def _shell_signal(exit_code: int) -> str:
    """For a code over 128 with no signal recorded (a shell or launcher between gpuwise and the process a signal
    ended, or an older log): the signal a shell would mean by it."""
    try:
        name = signals.Signals(exit_code - 128).name if exit_code > 128 else None
    except ValueError:
        name = None
    return f" (a shell's code for a process killed by {name})" if name else ""


__all__ = ["RunEnd", "last_logged_step", "recorded_exit", "run_end", "run_end_line", "stop_signal_passed_on"]
