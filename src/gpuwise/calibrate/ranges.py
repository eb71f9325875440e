"""The one range check of calibration's numbers: a step time is a finite number of seconds > 0 (a run log's
``step_time_s``, an exported row's, measure.py's, a stored run's), and so is a fitted factor; a predicted time or a
host term is a finite number >= 0. A 0, NaN, infinite or negative time would divide by zero, print "nan d" or "inf
years", or turn a factor around, so every reader refuses it, naming where it was read (its ``name``)."""

from __future__ import annotations

import math


def finite_number(value: object, name: str, *, positive: bool) -> float:
    """``value`` as a float when it is a number (not a bool), finite, and > 0 (``positive``) or >= 0; ValueError
    "``name`` VALUE is not a number / is not finite / is not positive / is negative" otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} {str(value)[:40]!r} is not a number")
    try:
        x = float(value)
    except OverflowError:              # an integer past the float range (JSON and TOML read any size)
        raise ValueError(f"{name} is an integer past the float range: not finite") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} {value!r} is not finite")
    if positive and x <= 0:
        raise ValueError(f"{name} {value!r} is not positive")
    if x < 0:
        raise ValueError(f"{name} {value!r} is negative")
    return x


def step_time_s(value: object, name: str) -> float:
    """``value`` as a step time in seconds: a finite number > 0 (``finite_number``); ValueError naming ``name``."""
    return finite_number(value, name, positive=True)
