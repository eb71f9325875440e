"""The ``meta`` keys every monitor command writes into its run log (docs/runlog.md), from one place:
``gpuwise run``, ``gpuwise watch --log`` and ``gpuwise exporter --log`` all record where and how they sampled
(``host``, ``backend``, ``driver_version``, ``interval_s``, ``gpuwise_version``, ``start_t_s``) and, when they
stop, ``end_t_s`` (``run`` adds its command, workload, pid and exit code). A log without ``end_t_s`` was
written by a sampler that was killed, or is still running: the report says so."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise import __version__


def start_meta(backend: Any, interval_s: float,
               on_error: Callable[[Exception], None] | None = None) -> dict[str, object]:
    """The keys known when sampling starts. ``backend`` None: no driver (``backend`` "none", no driver
    version). A driver version that cannot be read is left out (``on_error`` is told why)."""
    meta: dict[str, object] = {"host": socket.gethostname(), "start_t_s": time.time(),
                               "gpuwise_version": __version__, "interval_s": interval_s,
                               "backend": backend.name if backend is not None else "none"}
    if backend is not None:
        try:
            meta["driver_version"] = backend.driver_version() or ""
        except Exception as exc:   # a driver gone between two calls: the log still records the rest
            if on_error is not None:
                on_error(exc)
    return meta


def end_meta(**extra: object) -> dict[str, object]:
    """The keys written when sampling ends: ``end_t_s`` and ``extra`` (``run``: ``exit_code``)."""
    return {"end_t_s": time.time(), **extra}


def write_meta(runlog: Any, values: Mapping[str, object]) -> None:
    """Every key of ``values`` into the run log's meta, committed now."""
    for key, value in values.items():
        runlog.set_meta(key, value)
    runlog.flush()
