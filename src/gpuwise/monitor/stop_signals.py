"""How ``watch`` and ``exporter`` stop: SIGINT (Ctrl-C), SIGTERM (kill, systemd, docker stop) and SIGHUP (the
terminal closed) set one event, so the loop ends where it is and the run log gets its last samples and its
end (``end_t_s``) instead of the process dying half-way. A signal the process was started with ignored
(``nohup``'s SIGHUP) stays ignored, as ``gpuwise run`` leaves it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_on_signals(signals: Sequence[int] = STOP_SIGNALS) -> Iterator[threading.Event]:
    """An event set when one of ``signals`` arrives (from the main thread only, as Python delivers them);
    the previous handlers are back on exit."""
    stop = threading.Event()
    previous = {}
    for s in signals:
        if signal.getsignal(s) == signal.SIG_IGN:
            continue
        previous[s] = signal.signal(s, lambda *_: stop.set())
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
