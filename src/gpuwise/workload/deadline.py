"""Time limits on the user's code that gpuwise runs: importing a ``file.py`` and calling its factory
(``GPUWISE_FACTORY_TIMEOUT_S``), and tracing the model's steps (``GPUWISE_TRACE_TIMEOUT_S``, trace/tracer.py).

A factory that hangs (waits on a network, loops) or a forward that never ends would otherwise hang
``estimate`` and ``recommend`` with no word. The limit is a SIGALRM timer: it interrupts Python code and
sleeps in the main thread, on POSIX; elsewhere (another thread, Windows) the code runs without one. The
timeout is raised as a BaseException so that the user's own ``except Exception`` cannot swallow it, and reaches the caller as a WorkloadError.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterator

from gpuwise.workload.errors import WorkloadError

FACTORY_TIMEOUT_ENV = "GPUWISE_FACTORY_TIMEOUT_S"
DEFAULT_FACTORY_TIMEOUT_S = 300.0   # building on the meta device takes seconds; imports of big libraries tens


class _Expired(BaseException):
    pass


def factory_timeout_s() -> float:
    """``GPUWISE_FACTORY_TIMEOUT_S`` when set (seconds > 0), else the default."""
    return timeout_from_env(FACTORY_TIMEOUT_ENV, DEFAULT_FACTORY_TIMEOUT_S)


def timeout_from_env(env: str, default_s: float) -> float:
    """The seconds ``env`` sets (a number > 0), else ``default_s``; WorkloadError for anything else."""
    raw = os.environ.get(env)
    if raw is None or raw.strip() == "":
        return default_s
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise WorkloadError(f"{env} is {raw!r}, not a number of seconds > 0")
    return value


@contextlib.contextmanager
def deadline(what: str, timeout_s: float | None = None, env: str = FACTORY_TIMEOUT_ENV) -> Iterator[None]:
    """Run the block for at most ``timeout_s`` (default: :func:`factory_timeout_s`); WorkloadError naming
    ``what``, the limit and ``env`` (the variable that raises it) when it runs out."""
    limit_s = factory_timeout_s() if timeout_s is None else timeout_s
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    start_s = time.monotonic()
    outer_fired = False

    def expire(signum: int, frame: object) -> None:
        nonlocal outer_fired
        if outer_first:      # an outer timer (a caller's own alarm) was due before this limit: it is the caller's
            outer_fired = True
            if callable(previous):
                previous(signum, frame)
            return
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    outer_s, outer_interval_s = signal.setitimer(signal.ITIMER_REAL, limit_s)   # what an outer timer had left
    outer_first = 0 < outer_s < limit_s
    if outer_first:
        signal.setitimer(signal.ITIMER_REAL, outer_s)
    try:
        yield
    except _Expired:
        raise WorkloadError(f"{what} did not finish within {limit_s:g} s; if it needs longer, set "
                            f"{env} to more seconds") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_s > 0 and not outer_fired:    # the outer timer goes on with what it has left
            signal.setitimer(signal.ITIMER_REAL, max(outer_s - (time.monotonic() - start_s), 1e-3), outer_interval_s)
        elif outer_fired and outer_interval_s > 0:   # a repeating one repeats
            signal.setitimer(signal.ITIMER_REAL, outer_interval_s, outer_interval_s)
