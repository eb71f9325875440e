"""How a guarded run ended, as far as the guard can know it, recorded in its run log.

A run without ``gpuwise run`` around it has nobody else to write its end: its log otherwise read the same
whether the loop finished, was preempted, crashed or was interrupted. The guard knows: ``close()`` after the
loop (``finished``), a preemption's save and exit (``preempted``, with the exit code it exits with), an
exception out of ``step`` or out of a ``with Guard(...)`` block (``crashed``; ``interrupted`` for Ctrl-C; a
``sys.exit`` there is the program's chosen end: ``finished`` for code 0 or None, else ``stopped`` with the
code), and, at interpreter exit, a run that never reached ``close()`` (the uncaught exception Python printed,
else ``stopped``: ``sys.exit`` or a script without ``close()``). A process killed outright (``kill -9``, the
grace watchdog's ``os._exit``) records nothing: its log has no ``train_end``.

Meta keys (of the log's last attempt: a restart writing the same log replaces them): ``train_end`` (the
outcome), ``train_end_step`` (steps completed), ``train_end_t_s``, ``train_end_detail``; and one
``train_end`` event per attempt, ``<outcome> at step N[: detail]``. ``gpuwise run``'s ``exit_code`` stays
the command's own. The names are the run log's (``gpuwise.runlog.TRAIN_END_*``), where advise reads them too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpuwise.runlog import (TRAIN_END_DETAIL_CHARS, TRAIN_END_DETAIL_KEY, TRAIN_END_EVENT, TRAIN_END_KEY,
                            TRAIN_END_OUTCOMES, TRAIN_END_STEP_KEY, TRAIN_END_T_S_KEY, RunLog)
from gpuwise.text import clipped

FINISHED, PREEMPTED, CRASHED, INTERRUPTED, STOPPED = TRAIN_END_OUTCOMES


@dataclass(frozen=True)
class TrainEnd:
    """``outcome`` (one of the names above) after ``step`` completed optimizer steps; ``detail``: one line."""

    outcome: str
    step: int
    detail: str = ""

    @property
    def message(self) -> str:
        return f"{self.outcome} at step {self.step}" + (f": {self.detail}" if self.detail else "")


def exception_text(exc: BaseException) -> str:
    """``Type: message`` on one line, clipped (a multi-line error stays one row of the log)."""
    text = " ".join(str(exc).split())
    return clipped(f"{type(exc).__name__}{': ' + text if text else ''}", TRAIN_END_DETAIL_CHARS)


def is_clean_exit(exc: BaseException | None) -> bool:
    """Whether ``exc`` is ``sys.exit`` with the code a process exits 0 with (0, None, False): the program's chosen,
    successful end, not a failure. ``sys.exit(0.0)`` or ``sys.exit("done")`` exit 1, so they are not."""
    return isinstance(exc, SystemExit) and (exc.code is None or (isinstance(exc.code, int) and exc.code == 0))


def exit_text(exc: SystemExit) -> str:
    """``sys.exit(3)``, ``sys.exit('bad config')``, ``sys.exit()``: the call with its code, on one line, clipped."""
    code = "" if exc.code is None else " ".join(repr(exc.code).split())
    return clipped(f"sys.exit({code})", TRAIN_END_DETAIL_CHARS)


def end_of_exception(exc: BaseException, step: int, prefix: str = "", *, in_step: bool = False) -> TrainEnd:
    """The end ``exc`` makes: ``interrupted`` for Ctrl-C; for ``sys.exit`` (the program chose to end) ``finished``
    with a clean code (``is_clean_exit``), else ``stopped``, the call in the detail; else ``crashed``. ``prefix``
    says where it came from; ``in_step``: raised inside a step, which it left incomplete (a clean ``sys.exit``
    there is ``stopped``: nothing after the last whole step is saved, so the run did not finish)."""
    if isinstance(exc, SystemExit):
        finished = is_clean_exit(exc) and not in_step
        return TrainEnd(FINISHED if finished else STOPPED, step, prefix + exit_text(exc))
    outcome = INTERRUPTED if isinstance(exc, KeyboardInterrupt) else CRASHED
    return TrainEnd(outcome, step, prefix + exception_text(exc))


def record_train_end(run_log: RunLog, end: TrainEnd) -> None:
    """Write ``end`` into ``run_log``: the ``train_end*`` meta keys and a ``train_end`` event (committed)."""
    run_log.set_meta(TRAIN_END_KEY, end.outcome)
    run_log.set_meta(TRAIN_END_STEP_KEY, end.step)
    run_log.set_meta(TRAIN_END_T_S_KEY, time.time())
    run_log.set_meta(TRAIN_END_DETAIL_KEY, end.detail)
    run_log.log_event(TRAIN_END_EVENT, end.message)
