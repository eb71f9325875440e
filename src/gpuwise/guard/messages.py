"""How the guard's lines reach a person: ``gpuwise.guard: …`` on stderr, unless the program set up logging.

The guard reports through the ``gpuwise.guard`` loggers at WARNING. A training script usually configures no
logging, and Python's last-resort handler would then print the bare message (no ``gpuwise.guard:``). This
module puts one handler on the ``gpuwise.guard`` logger (never on the root logger) that writes
``gpuwise.guard: <message>`` to the current ``sys.stderr`` only while no other handler would receive the
record: once the program (``logging.basicConfig``, a framework, the ``gpuwise`` command) configures a handler
on the way up, the record goes there alone, formatted as the program chose, never twice.

It also words the lines the plain Guard and the framework callbacks share (a preemption's save and exit), so
that they say the same.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

LOGGER_NAME = "gpuwise.guard"
PREFIX = "gpuwise.guard: "


class _FallbackHandler(logging.Handler):
    """``gpuwise.guard: <message>`` on stderr when no handler of the program's would show the record."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if _other_handler_for(record):
            return
        try:
            sys.stderr.write(PREFIX + record.getMessage() + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - as logging.Handler.handleError: a broken stderr stops nothing
            self.handleError(record)


def _other_handler_for(record: logging.LogRecord) -> bool:
    """Whether a handler other than the fallback receives ``record`` on its way up (as ``Logger.callHandlers``)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if any(not isinstance(h, _FallbackHandler) and record.levelno >= h.level for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent  # type: ignore[assignment]
    return False


def install() -> None:
    """Idempotent: one fallback handler on the ``gpuwise.guard`` logger."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(h, _FallbackHandler) for h in logger.handlers):
        logger.addHandler(_FallbackHandler())


def preempted(step: int, preemption: Any) -> str:
    """What a preemption's save says, alike from the Guard and from the HF and Lightning callbacks
    (``preemption``: their ``PreemptionHandler``; the grace left is said where a watchdog counts it)."""
    left = preemption.seconds_left() if preemption.grace_s > 0 else None
    return f"signal received; checkpointing step {step}" + (f" ({left:.1f}s of grace left)" if left is not None else "")


def exiting(code: int) -> str:
    """The last line after a preemption's save, alike from the Guard and from the callbacks."""
    return f"exiting with code {code} (restart me to resume)"
