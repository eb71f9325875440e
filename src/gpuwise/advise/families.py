"""Curve families a loss trend is fitted with: one small frozen record per family (like a registry).

Every family is linear in its coefficients once its shape parameter ``c`` is fixed (``design``), so a
fit is a 1-D search over ``c`` with a linear least-squares solve inside (variable projection): fast and
free of starting-point trouble. Each family works on ``u = t / t_scale`` (t: steps counted from 1,
t_scale: the last step) so that the numbers stay near 1. ``solve`` inverts the family (the u where the
trend reaches a loss) and ``slope`` is dL/du; both closed forms, so forecasts need no root finding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Family:
    name: str
    formula: str                      # in steps t, for people
    param_names: tuple[str, ...]      # coefficients first, then c when the family has one
    design: Callable[[np.ndarray, float], np.ndarray]                # (u, c) -> columns the coefficients multiply
    c_bounds: tuple[float, float] | None                             # search range of c; None: no c
    predict: Callable[[np.ndarray, np.ndarray], np.ndarray]          # (u, p) -> L
    slope: Callable[[np.ndarray, np.ndarray], np.ndarray]            # (u, p) -> dL/du
    solve: Callable[[np.ndarray, float], float]                      # (p, L) -> u, or inf when never
    asymptote: Callable[[np.ndarray], float]                         # p -> L at u -> inf
    in_steps: Callable[[np.ndarray, float], dict[str, float]]       # (p, t_scale) -> params for ``formula``
    decreasing: bool = True           # coefficient b (the second) must be >= 0: a loss that falls

    @property
    def n_params(self) -> int:
        return len(self.param_names)


def _power_solve(p: np.ndarray, target: float) -> float:
    a, b, c = p
    if target <= a or b <= 0:
        return np.inf
    return float(((target - a) / b) ** (-1.0 / c))


def _exp_solve(p: np.ndarray, target: float) -> float:
    a, b, c = p
    if target <= a or b <= 0:
        return np.inf
    return float(-np.log((target - a) / b) / c) if target < a + b else 0.0


def _loglin_solve(p: np.ndarray, target: float) -> float:
    a, b = p
    if b <= 0:
        return np.inf
    return float(np.exp((a - target) / b))


POWER = Family(
    name="power_law",
    formula="L(t) = a + b·t^(-c)",
    param_names=("a", "b", "c"),
    design=lambda u, c: np.column_stack([np.ones_like(u), u ** (-c)]),
    c_bounds=(1e-3, 5.0),
    predict=lambda u, p: p[0] + p[1] * u ** (-p[2]),
    slope=lambda u, p: -p[2] * p[1] * u ** (-p[2] - 1.0),
    solve=_power_solve,
    asymptote=lambda p: float(p[0]),
    in_steps=lambda p, s: {"a": p[0], "b": p[1] * s ** p[2], "c": p[2]},
)

EXPONENTIAL = Family(
    name="exponential",
    formula="L(t) = a + b·exp(-c·t)",
    param_names=("a", "b", "c"),
    design=lambda u, c: np.column_stack([np.ones_like(u), np.exp(-c * u)]),
    c_bounds=(1e-2, 500.0),
    predict=lambda u, p: p[0] + p[1] * np.exp(-p[2] * u),
    slope=lambda u, p: -p[2] * p[1] * np.exp(-p[2] * u),
    solve=_exp_solve,
    asymptote=lambda p: float(p[0]),
    in_steps=lambda p, s: {"a": p[0], "b": p[1], "c": p[2] / s},
)

LOG_LINEAR = Family(
    name="log_linear",
    formula="L(t) = a - b·ln(t)",
    param_names=("a", "b"),
    design=lambda u, c: np.column_stack([np.ones_like(u), -np.log(u)]),
    c_bounds=None,
    predict=lambda u, p: p[0] - p[1] * np.log(u),
    slope=lambda u, p: -p[1] / u,
    solve=_loglin_solve,
    asymptote=lambda p: -np.inf if p[1] > 0 else np.inf,
    in_steps=lambda p, s: {"a": p[0] + p[1] * np.log(s), "b": p[1]},
    decreasing=False,
)

CONSTANT = Family(
    name="constant",
    formula="L(t) = a",
    param_names=("a",),
    design=lambda u, c: np.ones((len(u), 1)),
    c_bounds=None,
    predict=lambda u, p: np.full(np.shape(u), p[0], dtype=float),
    slope=lambda u, p: np.zeros(np.shape(u)),
    solve=lambda p, target: 0.0 if target >= p[0] else np.inf,
    asymptote=lambda p: float(p[0]),
    in_steps=lambda p, s: {"a": p[0]},
    decreasing=False,
)

FAMILIES: tuple[Family, ...] = (POWER, EXPONENTIAL, LOG_LINEAR, CONSTANT)
