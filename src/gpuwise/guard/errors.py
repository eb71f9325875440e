"""The guard's one error type, and the check of numeric arguments that raises it."""

from __future__ import annotations

import numbers

from gpuwise.errors import GpuwiseError


class GuardError(GpuwiseError):
    """A checkpoint cannot be written or read, or the guard was configured wrongly (one clear line)."""


def check_number(name: str, value: object, minimum: float, *, whole: bool = False, above: bool = False,
                 none: str = "") -> None:
    """GuardError, one line naming ``name``, unless ``value`` is a number >= ``minimum`` (> with ``above``),
    a whole one with ``whole``; None passes where ``none`` says what it means (``"no clipping"``)."""
    if value is None and none:
        return
    kind = numbers.Integral if whole else numbers.Real
    if (isinstance(value, bool) or not isinstance(value, kind) or value != value  # NaN
            or (value <= minimum if above else value < minimum)):
        bound = f"{'>' if above else '>='} {minimum:g}"
        also = f" (or None: {none})" if none else ""
        raise GuardError(f"{name} must be {'a whole number' if whole else 'a number'} {bound}{also}, got {value!r}")


def check_flag(name: str, value: object) -> None:
    """GuardError, one line naming ``name``, unless ``value`` is True or False (a string "false" is true)."""
    if not isinstance(value, bool):
        raise GuardError(f"{name} must be True or False, got {value!r}")
