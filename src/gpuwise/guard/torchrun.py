"""``python -m gpuwise.guard.torchrun``: torchrun that keeps the guard's restart code.

torchrun ends with exit code 1 whenever a worker fails, whatever its code: ``torch.distributed.run.main``
lets the launcher's ``ChildFailedError`` escape, and Python exits 1. A preempted Guard worker exits 75
("checkpointed, restart me"), so a supervisor that restarts on 75 (``gpuwise.launch.torchrun.supervised``,
systemd's ``RestartForceExitStatus=75``) saw a failure instead. This entry point takes the same arguments
as torchrun and exits 75 when the first worker to stop exited 75 and the others 75 or of torchrun's own SIGTERM;
any other failure keeps torchrun's code and message.
"""

from __future__ import annotations

import signal
import sys

from gpuwise.errors import EXIT_RESTART


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(sys.argv[1:] if argv is None else argv)
    except ChildFailedError as exc:
        _, root_cause = exc.get_first_failure()
        # Once one worker stopped, torchrun ends the others with SIGTERM: a Guard worker checkpoints and
        # exits 75 then, but one that was between steps may die of the signal first.
        others = {failure.exitcode for failure in exc.failures.values()} - {EXIT_RESTART, -signal.SIGTERM}
        if root_cause.exitcode == EXIT_RESTART and not others:
            sys.stderr.write(f"gpuwise.guard: the workers exited {EXIT_RESTART} (checkpointed and "
                             f"stopped): exiting {EXIT_RESTART}, restart to resume\n")
            return EXIT_RESTART
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
