"""The ``meta`` keys every monitor command writes into its run log (docs/runlog.md), from one place:
``gpuwise run``, ``gpuwise watch --log`` and ``gpuwise exporter --log`` all record where and how they sampled
(``host``, ``backend``, ``driver_version``, ``interval_s``, ``gpuwise_version``, ``start_t_s``) and, when they
stop, ``end_t_s`` (``run`` adds its command, workload, pid, exit code and the GPUs the command could see,
``cuda_visible_devices``). A log without ``end_t_s`` was
written by a sampler that was killed, or is still running: the report says so.

The keys are named once, in ``gpuwise.runlog`` (``*_KEY``, ``MONITOR_META_KEYS``), and imported here: the
monitor's writers use these names, and a reader (``report``) imports them from ``gpuwise.runlog`` rather than spell
the strings again."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise import __version__

# The keys' one home is gpuwise.runlog (the run log's schema, which every reader imports); named here too, for the
# monitor's writers and for code that imported them from here.
from gpuwise.runlog import (BACKEND_KEY, COMMAND_KEY, DRIVER_VERSION_KEY, END_T_S_KEY, EXIT_CODE_KEY,  # noqa: F401
                            GPUWISE_VERSION_KEY, HOST_KEY, INTERVAL_S_KEY, MONITOR_META_KEYS, PID_KEY,
                            REQUESTED_INTERVAL_S_KEY, SIGNAL_KEY, START_ERROR_KEY, START_T_S_KEY,
                            VISIBLE_DEVICES_KEY)

NO_BACKEND = "none"                        # the backend recorded when no driver was found


def start_meta(backend: Any, interval_s: float,
               on_error: Callable[[Exception], None] | None = None) -> dict[str, object]:
    """The keys known when sampling starts. ``backend`` None: no driver (``backend`` "none", no driver
    version). A driver version that cannot be read is left out (``on_error`` is told why)."""
    meta: dict[str, object] = {HOST_KEY: socket.gethostname(), START_T_S_KEY: time.time(),
                               GPUWISE_VERSION_KEY: __version__, INTERVAL_S_KEY: interval_s,
                               BACKEND_KEY: backend.name if backend is not None else NO_BACKEND}
    if backend is not None:
        try:
            meta[DRIVER_VERSION_KEY] = backend.driver_version() or ""
        except Exception as exc:   # a driver gone between two calls: the log still records the rest
            if on_error is not None:
                on_error(exc)
    return meta


def end_meta(extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """The keys written when sampling ends: ``end_t_s`` and ``extra`` (``run``: ``exit_code``)."""
    return {END_T_S_KEY: time.time(), **(extra or {})}


def write_meta(runlog: Any, values: Mapping[str, object]) -> None:
    """Every key of ``values`` into the run log's meta, committed now."""
    for key, value in values.items():
        runlog.set_meta(key, value)
    runlog.flush()
