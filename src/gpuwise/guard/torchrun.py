"""``python -m gpuwise.guard.torchrun``: torchrun that keeps the guard's restart code.

torchrun ends with exit code 1 whenever a worker fails, whatever its code: ``torch.distributed.run.main``
lets the launcher's ``ChildFailedError`` escape, and Python exits 1. A preempted Guard worker exits 75
("checkpointed, restart me"), so a supervisor that restarts on 75 (``gpuwise.launch.torchrun.supervised``,
systemd's ``RestartForceExitStatus=75``) saw a failure instead. The same when the signal reaches torchrun
itself (``docker stop``, a scheduler signalling the launcher): torchrun forwards it to the workers, waits for
them, and lets a ``SignalException`` escape, a traceback and exit 1 although the workers checkpointed.

This entry point takes the same arguments as torchrun and exits 75, with one line, when the workers stopped
as preempted Guard workers do (:func:`workers_checkpointed`); any other failure keeps torchrun's code and
message.
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Collection

from gpuwise.errors import EXIT_RESTART


def workers_checkpointed(exit_codes: Collection[int], first_code: int | None = None) -> bool:
    """Whether the workers' exit codes mean "checkpointed and stopped, restart me": at least one exited 75
    (the first to stop did, where known) and every other one exited 75 or died of SIGTERM (the signal that
    torchrun sends the others once one stopped, or forwards when it was signalled itself; a Guard worker
    that was between steps may die of it before its handler runs)."""
    return (EXIT_RESTART in exit_codes and set(exit_codes) <= {EXIT_RESTART, -signal.SIGTERM}
            and first_code in (None, EXIT_RESTART))


def shut_down_worker_codes(exc: BaseException) -> list[int] | None:
    """The exit codes of the workers torchrun shut down on the signal that raised ``exc``, or None where they
    cannot be read. torchrun hands them back nowhere: they are read from its agent's process context, on the
    exception's traceback (``LocalElasticAgent.run`` waited for them before re-raising). A torch whose agent
    keeps them elsewhere gives None, and torchrun's own error stands."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        handlers = getattr(getattr(frame.f_locals.get("self"), "_pcontext", None), "subprocess_handlers", None)
        if isinstance(handlers, dict) and handlers:
            codes = [getattr(getattr(h, "proc", None), "returncode", None) for h in handlers.values()]
            return None if any(not isinstance(c, int) for c in codes) else codes
    return None


def _restart_line(what: str) -> str:
    return (f"gpuwise.guard: {what} (checkpointed and stopped): exiting {EXIT_RESTART}, restart to resume\n")


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(sys.argv[1:] if argv is None else argv)
    except ChildFailedError as exc:
        _, root_cause = exc.get_first_failure()
        if workers_checkpointed([f.exitcode for f in exc.failures.values()], first_code=root_cause.exitcode):
            sys.stderr.write(_restart_line(f"the workers exited {EXIT_RESTART}"))
            return EXIT_RESTART
        raise
    except SignalException as exc:
        codes = shut_down_worker_codes(exc)
        if codes is not None and workers_checkpointed(codes):
            sys.stderr.write(_restart_line(f"torchrun got {signal.Signals(exc.sigval).name}, passed it to the "
                                           f"workers, and they exited {EXIT_RESTART}"))
            return EXIT_RESTART
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
