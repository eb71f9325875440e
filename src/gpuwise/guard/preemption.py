"""Preemption: a signal asks for a checkpoint at the next step boundary and a clean, restartable exit.

Cloud and rental platforms stop an instance with SIGTERM and a grace period (AutoDL, spot instances,
Kubernetes: 30 s by default), SLURM can send SIGUSR1 before its deadline, torchrun forwards SIGTERM to
its workers. Saving inside the signal handler would run in the middle of an optimizer step and could
capture a half-updated model; so the handler only sets a flag, and the training loop saves when the
current step has finished. A watchdog ends the process when the grace period runs out anyway (a save in
progress then leaves the previous checkpoint, if any, intact: saves are atomic).

Exit code 75 is ``EX_TEMPFAIL`` of sysexits.h, "temporary failure; the user is invited to retry": it
tells a supervisor (a shell loop, systemd ``RestartForceExitStatus=75``, torchrun's ``--max-restarts``, which
restarts on any non-zero code) that the job did not fail and should be started again, where it will resume.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable

from gpuwise.errors import EXIT_RESTART
from gpuwise.guard.errors import GuardError, check_number


class PreemptionHandler:
    """Turns the given signals into a flag; ``install()`` from the main thread, ``uninstall()`` to undo."""

    def __init__(self, signals: Iterable[int | str] = ("SIGTERM",), grace_s: float = 25.0,
                 exit_code: int = EXIT_RESTART, on_grace_expired: Callable[[], None] | None = None,
                 restart_point: Callable[[], str] | None = None) -> None:
        """``grace_s``: seconds from the signal until the watchdog ends the process (0: no watchdog).
        ``restart_point``: says what a restart resumes from, for the watchdog's last line (e.g. "no
        complete checkpoint yet: the run restarts from step 0"). GuardError (one line) for a signal that
        does not exist or cannot be caught, or a negative ``grace_s``."""
        check_number("grace_s", grace_s, 0)
        self.signals = [_signal_number(s) for s in signals]
        self.grace_s = grace_s
        self.exit_code = exit_code
        self.requested_at_s: float | None = None
        self.signal_received: int | None = None
        self._previous: dict[int, object] = {}
        self._watchdog: threading.Timer | None = None
        self._on_grace_expired = on_grace_expired
        self._restart_point = restart_point

    @property
    def requested(self) -> bool:
        return self.requested_at_s is not None

    def install(self) -> "PreemptionHandler":
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("signal handlers can only be installed from the main thread")
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)  # type: ignore[arg-type]
        self._previous.clear()
        self.cancel_watchdog()

    def request(self, signum: int | None = None) -> None:
        """What the handler does; callable directly (e.g. from a platform's 'instance will stop' hook)."""
        if self.requested_at_s is not None:
            return  # a second SIGTERM changes nothing: the first one's deadline stands
        self.requested_at_s = time.monotonic()
        self.signal_received = signum
        if self.grace_s > 0:
            self._watchdog = threading.Timer(self.grace_s, self._grace_expired)
            self._watchdog.daemon = True
            self._watchdog.start()

    def seconds_left(self) -> float | None:
        if self.requested_at_s is None:
            return None
        return self.grace_s - (time.monotonic() - self.requested_at_s)

    def cancel_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _handle(self, signum: int, frame: object) -> None:
        self.request(signum)

    def _grace_expired(self) -> None:
        if self._on_grace_expired is not None:
            try:
                self._on_grace_expired()
            except Exception:  # noqa: BLE001 - we are about to exit regardless
                pass
        where = "a save in progress is abandoned; complete checkpoints are intact"
        if self._restart_point is not None:
            try:
                where = self._restart_point()
            except Exception:  # noqa: BLE001 - the exit must happen
                pass
        # Written directly, not logged: the main thread may be stuck holding a logging lock.
        sys.stderr.write(f"gpuwise.guard: grace period of {self.grace_s:g}s ran out; exiting with "
                         f"{self.exit_code} ({where})\n")
        sys.stderr.flush()
        os._exit(self.exit_code)


def _signal_number(sig: int | str) -> int:
    """The number of ``sig`` (``"SIGUSR1"``, ``"USR1"``, ``signal.SIGUSR1``, 10); GuardError for one that does
    not exist here or that no handler can catch."""
    try:
        if isinstance(sig, str):
            name = sig.upper() if sig.upper().startswith("SIG") else "SIG" + sig.upper()
            number = signal.Signals[name]
        else:
            number = signal.Signals(sig)
    except (KeyError, ValueError, TypeError):
        raise GuardError(f"preempt_signals: unknown signal {sig!r}") from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise GuardError(f"preempt_signals: {number.name} cannot be caught")
    return int(number)
