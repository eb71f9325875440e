"""How a `gpuwise run` job ended, as its run log records it (meta ``exit_code`` and, where a signal ended the
command, ``signal``: monitor.runner.exit_status), and the line the report opens with when the job failed: every
figure after it (memory, busy share, the verdict) describes a run cut short, not the job's whole work."""

from __future__ import annotations

import re
import signal as signals
from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.errors import EXIT_RESTART
from gpuwise.report.sources import RUN_LOG_SOURCE, UsageLog
from gpuwise.runlog import RunLogError, read_train_metrics

_SIGNAL_NAME = re.compile(r"^(SIG[A-Z0-9+]{1,16}|\d{1,3})$")   # what runner.signal_name writes
PREEMPTED_EVENT = "preempted"   # the guard's event before it checkpoints and exits with EXIT_RESTART


@dataclass(frozen=True)
class RunEnd:
    """The recorded end of a job: ``exit_code`` (None: the log records none), the ``signal`` that ended it (its
    name, None where none did), the last training step the log holds (``last_step``: None where it holds none, or
    where the job did not fail: only then is it read) and whether the guard exited after a preemption."""

    exit_code: int | None
    signal: str | None = None
    last_step: int | None = None
    preempted: bool = False

    @property
    def failed(self) -> bool:
        """A job that did not end with exit code 0 (a preempted one included: its work is not done)."""
        return self.exit_code not in (None, 0)

    @property
    def ended(self) -> str | None:
        """In one word, for --json: "ok" (exit code 0), "failed" (another code), "killed" (by a signal),
        "preempted" (the guard checkpointed and exited to be restarted); None where the log records no exit."""
        if self.exit_code is None:
            return None
        if self.signal is not None:
            return "killed"
        if self.preempted:
            return "preempted"
        return "ok" if self.exit_code == 0 else "failed"


def recorded_exit(meta: Mapping[str, str | None]) -> tuple[int | None, str | None]:
    """(exit code, signal name) as the meta records them; None for what it lacks or holds in another form (a log
    edited by hand, written by another tool)."""
    try:
        code = int(str(meta.get("exit_code")))
    except ValueError:
        code = None
    name = meta.get("signal")
    return code, (name if code is not None and name and _SIGNAL_NAME.match(name) else None)


def run_end(log: UsageLog) -> RunEnd | None:
    """How the job of a gpuwise run log ended; None for another log. The training metrics are read for the last
    step only when the job failed (a long log's metrics take a while to read)."""
    if log.source != RUN_LOG_SOURCE:
        return None
    code, name = recorded_exit(log.meta)
    preempted = (name is None and code == EXIT_RESTART
                 and any(e.get("kind") == PREEMPTED_EVENT for e in log.events))
    end = RunEnd(code, name, preempted=preempted)
    if not end.failed:
        return end
    return RunEnd(code, name, last_logged_step(log.path), preempted)


def last_logged_step(path: str) -> int | None:
    """The highest step of the log's training metrics (the guard's); None where it holds none or cannot be read."""
    try:
        metrics = read_train_metrics(path)
    except RunLogError:
        return None
    return max((step for series in metrics.values() for step, _, _ in series), default=None)


def failed_run_line(end: RunEnd | None) -> str | None:
    """The report's first line for a job that failed: how it ended and after which step, so that what follows is
    read as the figures of a failed run. None for a job that ended with exit code 0 or whose end is not recorded."""
    if end is None or not end.failed:
        return None
    after = (f" after its last logged step (step {end.last_step})" if end.last_step is not None
             else ", with no training step logged")
    if end.preempted:
        return (f"The job was preempted: it checkpointed and exited with code {end.exit_code} to be restarted"
                f"{after}; the figures describe the run until then, not the whole job.")
    if end.signal is not None:
        how = f"was killed by signal {end.signal} (exit code {end.exit_code})"
    else:
        how = f"exited with code {end.exit_code}{_shell_signal(end.exit_code)}"
    return f"The job {how}{after}: its figures describe a failed run."


def _shell_signal(exit_code: int) -> str:
    """For a code over 128 with no signal recorded (a shell or launcher between gpuwise and the process a signal
    ended, or an older log): the signal a shell would mean by it."""
    try:
        name = signals.Signals(exit_code - 128).name if exit_code > 128 else None
    except ValueError:
        name = None
    return f" (a shell's code for a process killed by {name})" if name else ""


__all__ = ["RunEnd", "failed_run_line", "last_logged_step", "recorded_exit", "run_end"]
