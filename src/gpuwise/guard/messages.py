"""How the guard's lines reach a person: ``gpuwise.guard: …`` on stderr, unless the program set up logging.

The guard reports through the ``gpuwise.guard`` loggers at WARNING. A training script usually configures no
logging, and Python's last-resort handler would then print the bare message (no ``gpuwise.guard:``). This
module puts one handler on the ``gpuwise.guard`` logger (never on the root logger) that writes
``gpuwise.guard: <message>`` to the current ``sys.stderr`` only while no other handler would receive the
record: once the program (``logging.basicConfig``, a framework, the ``gpuwise`` command) configures a handler
on the way up, the record goes there alone, formatted as the program chose, never twice.
"""

from __future__ import annotations

import logging
import sys

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
