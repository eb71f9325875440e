"""The ``meta`` keys every monitor command writes into its run log (docs/runlog.md), from one place:
``gpuwise run``, ``gpuwise watch --log`` and ``gpuwise exporter --log`` all record where and how they sampled
(``host``, ``backend``, ``driver_version``, ``interval_s``, ``gpuwise_version``, ``start_t_s``) and, when they
stop, ``end_t_s`` (``run`` adds its command, workload, pid and exit code). A log without ``end_t_s`` was
written by a sampler that was killed, or is still running: the report says so.

The keys are named here, once (``*_KEY``): the monitor's writers use these names, and a reader (``report``)
should import them rather than spell the strings again."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise import __version__

# meta keys written when sampling starts (start_meta): where and how the samples were taken
HOST_KEY = "host"                          # socket.gethostname()
START_T_S_KEY = "start_t_s"                # Unix seconds
GPUWISE_VERSION_KEY = "gpuwise_version"
INTERVAL_S_KEY = "interval_s"              # seconds between samples: asked for, or kept (interval_meta)
BACKEND_KEY = "backend"                    # the backend's name ("nvml", "replay"), NO_BACKEND without a driver
DRIVER_VERSION_KEY = "driver_version"
# meta keys written when sampling ends (end_meta)
END_T_S_KEY = "end_t_s"                    # Unix seconds; absent: killed, or still running
REQUESTED_INTERVAL_S_KEY = "requested_interval_s"   # only when the interval kept was slower than asked for
# meta keys only `gpuwise run` writes (monitor.runner)
COMMAND_KEY = "command"                    # the command, a JSON list
PID_KEY = "pid"                            # the command's pid
EXIT_CODE_KEY = "exit_code"                # as a shell gives it: 128 + N when signal N ended the command
SIGNAL_KEY = "signal"                      # the signal's name ("SIGKILL"), only when a signal ended the command
START_ERROR_KEY = "start_error"            # why the command could not start (exit code 127 or 126)
MONITOR_META_KEYS = (HOST_KEY, START_T_S_KEY, GPUWISE_VERSION_KEY, INTERVAL_S_KEY, BACKEND_KEY, DRIVER_VERSION_KEY,
                     END_T_S_KEY, REQUESTED_INTERVAL_S_KEY, COMMAND_KEY, PID_KEY, EXIT_CODE_KEY, SIGNAL_KEY,
                     START_ERROR_KEY)
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
