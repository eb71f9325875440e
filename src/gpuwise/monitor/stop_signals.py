"""How ``watch`` and ``exporter`` stop: SIGINT (Ctrl-C), SIGTERM (kill, systemd, docker stop) and SIGHUP (the
terminal closed) set one flag, so the loop ends where it is and the run log gets its last samples and its
end (``end_t_s``) instead of the process dying half-way. A signal the process was started with ignored
(``nohup``'s SIGHUP) stays ignored, as ``gpuwise run`` leaves it.

The handler takes no lock: Python runs it in the main thread between two bytecodes, possibly inside a
``threading.Event.wait`` that holds the event's lock, where ``Event.set`` would wait on that lock for ever.
It sets a plain flag and writes a byte to a pipe; ``StopFlag.wait`` waits on the pipe (``poll``)."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopFlag:
    """Set once (by a stop signal); waited on by the main thread. ``set`` is safe in a signal handler."""

    def __init__(self) -> None:
        self._set = False
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)   # a pipe already holding a byte: the flag is set anyway
        self._poll = select.poll()
        self._poll.register(self._read_fd, select.POLLIN)

    def set(self, *_signal_args: object) -> None:
        self._set = True
        try:
            os.write(self._write_fd, b"\0")
        except OSError:
            pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout_s: float | None = None) -> bool:
        """Until the flag is set or ``timeout_s`` seconds have passed (None: no limit); whether it is set."""
        if not self._set:
            self._poll.poll(None if timeout_s is None else max(0.0, timeout_s) * 1000.0)
        return self._set

    def close(self) -> None:
        os.close(self._read_fd)
        os.close(self._write_fd)


@contextmanager
def stop_on_signals(signals: Sequence[int] = STOP_SIGNALS) -> Iterator[StopFlag]:
    """A flag set when one of ``signals`` arrives (Python runs handlers in the main thread only: wait there);
    the previous handlers are back on exit."""
    stop = StopFlag()
    previous = {}
    try:
        for s in signals:
            if signal.getsignal(s) == signal.SIG_IGN:
                continue
            previous[s] = signal.signal(s, stop.set)
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        stop.close()
