"""Fits of the loss trend with competing families, weighed by BIC, and forecasts with a bootstrap band.

Least squares on the raw (finite) losses: the per-step noise is what the likelihood is about, so AIC
and BIC (Gaussian errors) come from the residual sum of squares. The forecast is the BIC-weighted
average of the families (weights ∝ exp(−ΔBIC/2)): when two families fit the past equally well, which
one is right is exactly the uncertainty of the forecast, so both count. The band is for the trend,
not for single noisy losses: a moving-block bootstrap of the residuals (blocks keep the short-range
correlation of minibatch noise) refitted per family, pooled by weight, 5th to 95th percentile, widened by
how far the same fit of the curve's first half missed its last quarter (``_holdout_error_per_log``): the refits
say only how the noise moves each family, not how far the family misses a curve that is none of them.
For a loss that is never negative, families are held to a non-negative floor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.optimize import minimize_scalar

from gpuwise.advise.families import FAMILIES, Family


@dataclass(frozen=True, eq=False)
class FamilyFit:
    family: Family
    params: np.ndarray
    rss: float
    n_points: int
    aic: float
    bic: float

    def to_dict(self, t_scale: float) -> dict:
        return {"family": self.family.name, "formula": self.family.formula,
                "params": {k: float(f"{v:.6g}") for k, v in self.family.in_steps(self.params, t_scale).items()},
                "aic": round(float(self.aic), 2), "bic": round(float(self.bic), 2), "rss": float(f"{self.rss:.6g}")}


@dataclass(frozen=True, eq=False)
class TrendFit:
    """All family fits (best BIC first) with their weights and bootstrap refits.

    ``t_shift``: steps + t_shift = t (counted from 1); ``t_scale``: u = t / t_scale. ``weights[i]``
    belongs to ``candidates[i]`` (0 below 1 %); ``boot[i]``: (n_boot, n_params) refits of it.
    """

    candidates: tuple[FamilyFit, ...]
    weights: np.ndarray
    boot: tuple[np.ndarray, ...]
    t_shift: float
    t_scale: float
    first_step: int
    last_step: int
    residual_std: float
    level_offset: float = 0.0   # added to every forecast (``capped_at``); 0 for the plain fit
    holdout_error_per_log: float = 0.0   # loss units the fit of its first half missed by, per ln(t) ahead
    nonneg: bool = False        # a loss that is never negative (every logged value >= 0): no band below 0

    def u(self, steps: np.ndarray | float) -> np.ndarray:
        return (np.asarray(steps, dtype=float) + self.t_shift) / self.t_scale

    def _members(self):
        return [(f, w, b) for f, w, b in zip(self.candidates, self.weights, self.boot) if w > 0]

    def predict(self, steps: np.ndarray | float) -> np.ndarray:
        u = self.u(steps)
        return sum(w * f.family.predict(u, f.params) for f, w, _ in self._members()) + self.level_offset

    def slope_per_step(self, steps: np.ndarray | float) -> np.ndarray:
        u = self.u(steps)
        return sum(w * f.family.slope(u, f.params) for f, w, _ in self._members()) / self.t_scale

    @property
    def best(self) -> FamilyFit:
        """The family that carries the most weight: the best BIC, unless ``prefer_floor`` took its weight away
        (a plateau is forecast by the fits that level off), so what names the forecast's family names one in it."""
        return max(self._members(), key=lambda m: m[1])[0]

    def asymptote(self) -> float:
        """Where the weighted forecast goes as t grows: the weighted mean of the families' asymptotes
        (-inf with a log-linear member). Not a floor to state: see ``floor_range``."""
        return float(sum(w * f.family.asymptote(f.params) for f, w, _ in self._members())) + self.level_offset

    def floor_range(self) -> tuple[float, float] | None:
        """(lowest, highest) level where the families with weight level off (``fitted_floor``); None when one
        of them has no floor of its own: then the forecast has none to state, and a weighted mean of a floor
        and a bound (or -inf) would be no level the loss goes to."""
        floors = [fitted_floor(f, self.nonneg) for f, _, _ in self._members()]
        if not floors or any(x is None for x in floors):
            return None
        return min(floors) + self.level_offset, max(floors) + self.level_offset

    def agreed_floor(self) -> float | None:
        """The level the curve levels off at when the families with weight agree on it (``floor_range`` within
        ``FLOORS_AGREE_RELATIVE``): their weighted floor; None when they disagree or one has no floor."""
        span = self.floor_range()
        if span is None or span[1] - span[0] > FLOORS_AGREE_RELATIVE * max(abs(span[1]), abs(span[0])):
            return None
        return self.asymptote()

    def samples(self, n: int = 200) -> list[tuple[FamilyFit, np.ndarray]]:
        """Bootstrap refits pooled by weight: about ``n`` (family fit, params) pairs."""
        out = []
        for f, w, boot in self._members():
            if len(boot) == 0:
                continue
            take = np.resize(np.arange(len(boot)), max(1, int(round(w * n))))
            out += [(f, boot[i]) for i in take]
        return out

    def band(self, steps: np.ndarray, low_pct: float = 5.0, high_pct: float = 95.0) -> tuple[np.ndarray, np.ndarray]:
        """The bootstrap percentiles of the trend at ``steps``, each side widened by the hold-out miss taken as a
        normal error's standard deviation (at its own percentile: 1.645 of it for the default 90 % band); never
        below 0 for a loss that never is."""
        pool, u, mid = self.samples(), self.u(np.asarray(steps, dtype=float)), self.predict(steps)
        lo, hi = mid, mid
        if len(pool) >= 5:
            preds = np.array([f.family.predict(u, p) for f, p in pool]) + self.level_offset
            lo, hi = np.percentile(preds, low_pct, axis=0), np.percentile(preds, high_pct, axis=0)
        spread = self.holdout_error_per_log * np.log(np.maximum(u / self.u(self.last_step), 1.0))
        z_low, z_high = -NormalDist().inv_cdf(low_pct / 100.0), NormalDist().inv_cdf(high_pct / 100.0)
        low = mid - np.hypot(np.maximum(mid - lo, 0.0), z_low * spread)
        high = mid + np.hypot(np.maximum(hi - mid, 0.0), z_high * spread)
        return (np.maximum(low, 0.0) if self.nonneg else low), high

    def step_reaching(self, target: float, max_factor: float = 1e4) -> float:
        """The (fractional) step where the averaged trend first reaches ``target`` after the first fitted step;
        inf when not within ``max_factor`` times the steps done."""
        grid = np.geomspace(max(self.first_step, 1), max(self.last_step, 1) * max_factor, 4000)
        below = np.nonzero(self.predict(grid) <= target)[0]
        if not len(below):
            return np.inf
        if below[0] == 0:
            return float(grid[0])
        lo, hi = grid[below[0] - 1], grid[below[0]]
        for _ in range(40):  # bisection between the two grid points
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if self.predict(mid) <= target else (mid, hi)
        return float(hi)


def capped_at(fit: TrendFit, level: float) -> TrendFit:
    """``fit`` shifted down, where need be, so that it starts no higher than ``level`` at the last step.

    The families fall (or stay flat), so the forecast then never stands above the smoothed trend the
    run has already reached: a least-squares level on skewed minibatch noise can sit above the trend's
    (an average of losses that swing ±40 % is pulled up by the high ones), and "the loss will rise to
    where it already was" is no forecast."""
    excess = float(fit.predict(fit.last_step)) - level
    if not np.isfinite(excess) or excess <= 0:
        return fit
    return dataclasses.replace(fit, level_offset=fit.level_offset - excess)


def _coefficients(family: Family, u: np.ndarray, y: np.ndarray, c: float, floor_at_zero: bool = False,
                  sw: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Weighted least-squares coefficients for a fixed ``c`` (b clipped at 0 where the family must fall;
    with ``floor_at_zero`` the offset a clipped at 0 too), and the weighted RSS. ``sw``: √weight per point."""
    X = family.design(u, c)
    if sw is not None:
        X, y = X * sw[:, None], y * sw
    try:
        coef = np.linalg.solve(X.T @ X, X.T @ y)  # normal equations: 1 or 2 columns, well scaled (u near 1)
    except np.linalg.LinAlgError:
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    if family.decreasing and coef[1] < 0:
        coef = np.array([float(np.mean(y)), 0.0])
    if family.decreasing and floor_at_zero and coef[0] < 0:
        x1 = X[:, 1]
        coef = np.array([0.0, max(0.0, float(x1 @ y) / float(x1 @ x1))])
    resid = y - X @ coef
    return coef, float(resid @ resid)


def _fit_params(family: Family, u: np.ndarray, y: np.ndarray, grid: int = 40, floor_at_zero: bool = False,
                sw: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Variable projection: a log grid over c, then a bounded 1-D refinement around the best grid point."""
    if family.c_bounds is None:
        coef, rss = _coefficients(family, u, y, 0.0, sw=sw)
        return coef, rss

    def rss_at(log_c: float) -> float:
        return _coefficients(family, u, y, float(np.exp(log_c)), floor_at_zero, sw)[1]

    lo, hi = np.log(family.c_bounds[0]), np.log(family.c_bounds[1])
    log_cs = np.linspace(lo, hi, grid)
    rss = [rss_at(lc) for lc in log_cs]
    i = int(np.argmin(rss))
    left, right = log_cs[max(i - 1, 0)], log_cs[min(i + 1, grid - 1)]
    res = minimize_scalar(rss_at, bounds=(left, right), method="bounded", options={"xatol": 1e-4})
    c = float(np.exp(res.x)) if res.fun <= rss[i] else float(np.exp(log_cs[i]))
    coef, best = _coefficients(family, u, y, c, floor_at_zero, sw)
    return np.append(coef, c), best


def fit_family(family: Family, u: np.ndarray, y: np.ndarray, floor_at_zero: bool = False,
               sw: np.ndarray | None = None) -> FamilyFit | None:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        params, rss = _fit_params(family, u, y, floor_at_zero=floor_at_zero, sw=sw)
    if not np.isfinite(rss):
        return None
    n, k = len(y), family.n_params
    ll_term = n * np.log(max(rss, 1e-300) / n)
    return FamilyFit(family, params, rss, n, ll_term + 2 * k, ll_term + k * np.log(n))


def thin(steps: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, losses, points per row) with at most ``max_points`` rows: the first third kept point by point
    (where the curve bends, a group mean would be biased), the rest as means of consecutive groups, so a
    200k-step log fits as fast as a 2k-step one. Fits weigh each row by its count."""
    n = len(y)
    if n <= max_points:
        return steps, y, np.ones(n)
    keep = max_points // 3
    k = int(np.ceil((n - keep) / (max_points - keep)))
    m = (n - keep) // k * k
    tail_s = steps[keep:keep + m].reshape(-1, k).mean(axis=1)
    tail_y = y[keep:keep + m].reshape(-1, k).mean(axis=1)
    return (np.concatenate([steps[:keep], tail_s]), np.concatenate([y[:keep], tail_y]),
            np.concatenate([np.ones(keep), np.full(len(tail_y), float(k))]))


def fit_trend(steps: np.ndarray, loss: np.ndarray, *, n_boot: int = 30, seed: int = 0, max_points: int = 1500,
              families: tuple[Family, ...] = FAMILIES) -> TrendFit | None:
    """Fits every family to the finite points, weighs them by BIC. None with fewer than 8 points.

    A loss that was never negative keeps a non-negative floor: offsets a ≥ 0, and a family whose
    forecast crosses zero before 4× the fitted steps (a falling log-linear) is left out."""
    ok = np.isfinite(loss)
    steps, y = np.asarray(steps, dtype=float)[ok], np.asarray(loss, dtype=float)[ok]
    if len(y) < 8:
        return None
    first_step, last_step = int(steps[0]), int(steps[-1])
    steps, y, counts = thin(steps, y, max_points)
    sw = np.sqrt(counts)
    nonneg = bool(np.all(y >= 0))
    shift = 0.0 if steps.min() >= 1 else 1.0 - steps.min()
    scale = float(last_step + shift)
    u = (steps + shift) / scale
    fits, weights = _weighed_fits(u, y, sw, nonneg, families)
    boots = tuple(_block_bootstrap(f, u, y, sw, n_boot, seed, nonneg) if w > 0 else np.empty((0, f.family.n_params))
                  for f, w in zip(fits, weights))
    avg = sum(w * f.family.predict(u, f.params) for f, w in zip(fits, weights) if w > 0)
    return TrendFit(candidates=tuple(fits), weights=weights, boot=boots, t_shift=shift, t_scale=scale,
                    first_step=first_step, last_step=last_step, residual_std=float(np.std((y - avg) * sw)),
                    holdout_error_per_log=_holdout_error_per_log(u, y, sw, nonneg, families), nonneg=nonneg)


def _weighed_fits(u: np.ndarray, y: np.ndarray, sw: np.ndarray, nonneg: bool,
                  families: tuple[Family, ...]) -> tuple[list[FamilyFit], np.ndarray]:
    """Every family fitted, best BIC first, with its BIC weight (0 below 1 %)."""
    fits = [f for f in (fit_family(fam, u, y, nonneg, sw) for fam in families) if f is not None]
    if nonneg:
        fits = [f for f in fits if float(f.family.predict(np.array([4.0]), f.params)[0]) >= 0] or fits
    fits.sort(key=lambda f: f.bic)
    bic = np.array([f.bic for f in fits])
    weights = np.exp(-(bic - bic[0]) / 2.0)
    weights = weights / weights.sum()
    weights = np.where(weights >= 0.01, weights, 0.0)
    return fits, weights / weights.sum()


# the hold-out miss (one draw of the forecast's own error) is taken as its standard deviation (``TrendFit.band``)
HOLDOUT_FIT_FRACTION = 0.5     # the hold-out check fits the first half of the fitted steps ...
HOLDOUT_CHECK_FROM = 0.75      # ... and measures its miss on the last quarter


def _holdout_error_per_log(u: np.ndarray, y: np.ndarray, sw: np.ndarray, nonneg: bool,
                           families: tuple[Family, ...]) -> float:
    """How far the families miss when they forecast this curve's own past: the weighed fit of the points in the
    first half of the fitted steps, its mean miss (loss units) on the points of the last quarter, per unit of
    ln(t) it forecast ahead. 0 with fewer than 8 points to fit or to check.

    The bootstrap refits only say how the noise moves each family's fit; where no family is the curve's law
    (a shifted power law, a curve that bends still), or the noise hides which one is, the forecast misses by
    more than that, and by more the further ahead it goes: the hold-out miss measures it on the curve itself."""
    fit_part = u <= u[0] + HOLDOUT_FIT_FRACTION * (u[-1] - u[0])
    check = u >= u[0] + HOLDOUT_CHECK_FROM * (u[-1] - u[0])
    if fit_part.sum() < 8 or check.sum() < 8:
        return 0.0
    fits, weights = _weighed_fits(u[fit_part], y[fit_part], sw[fit_part], nonneg, families)
    pred = sum(w * f.family.predict(u[check], f.params) for f, w in zip(fits, weights) if w > 0)
    w_check = sw[check] ** 2
    miss = float(np.sum(w_check * (y[check] - pred)) / np.sum(w_check))
    ahead = float(np.sum(w_check * np.log(u[check] / u[fit_part][-1])) / np.sum(w_check))
    return abs(miss) / ahead if ahead > 0 and np.isfinite(miss) else 0.0


def _block_bootstrap(fit: FamilyFit, u: np.ndarray, y: np.ndarray, sw: np.ndarray, n_boot: int, seed: int,
                     floor_at_zero: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(y)
    block = max(1, n // 25)
    base = fit.family.predict(u, fit.params)
    resid = (y - base) * sw  # standardised: group means of k points have 1/√k of the noise
    out = []
    for _ in range(n_boot):
        starts = rng.integers(0, n - block + 1, size=int(np.ceil(n / block)))
        r = np.concatenate([resid[s:s + block] for s in starts])[:n] / sw
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            params, rss = _fit_params(fit.family, u, base + r, grid=15, floor_at_zero=floor_at_zero, sw=sw)
        if np.isfinite(rss):
            out.append(params)
    return np.array(out).reshape(len(out), fit.family.n_params)


# -- forecasts --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepEstimate:
    """A step with its bootstrap band; ``None`` means never (the trend levels off above the target).
    ``floor``: where a plausible fit with a floor levels off, when that is above the target."""

    step: int | None
    low: int | None
    high: int | None
    floor: float | None = None

    def to_dict(self) -> dict:
        out = {"step": self.step, "low": self.low, "high": self.high}
        if self.floor is not None:
            out["levels_off_at"] = float(f"{self.floor:.6g}")
        return out


PLAUSIBLE_DELTA_BIC = 10.0   # a family within this of the best BIC fits "about as well" (Kass & Raftery)
FLOORS_AGREE_RELATIVE = 0.005  # floors within 0.5 % of each other are one level (the output's 4 digits, about)


def fitted_floor(f: FamilyFit, nonneg: bool) -> float | None:
    """Where ``f`` levels off (its asymptote, before any ``level_offset``) when the data set that level; None for a
    family that falls for ever (log-linear) and for a floor held at the zero bound of a never-negative loss
    (``_coefficients``' ``floor_at_zero``): that fit wanted a floor below 0 and falls as far as the bound lets it,
    so its 0 is the bound's word, not the curve's."""
    floor = float(f.family.asymptote(f.params))
    if not np.isfinite(floor) or (nonneg and f.family.decreasing and floor <= 0.0):
        return None
    return floor


def plausible_floor(fit: TrendFit, flat: bool = False) -> float | None:
    """The level where the curve levels off by the best-BIC family that has a floor (power law or
    exponential) the data set (``fitted_floor``: not one held at the zero bound), when that family is
    plausible: within ``PLAUSIBLE_DELTA_BIC`` of the best fit, or any floored fit at all when ``flat`` (the run
    is on a plateau already). None when no such fit."""
    best_bic = fit.candidates[0].bic
    for f in fit.candidates:   # best BIC first
        floor = fitted_floor(f, fit.nonneg)
        if f.family.name == "constant" or floor is None:
            continue
        if flat or f.bic - best_bic <= PLAUSIBLE_DELTA_BIC:
            return floor + fit.level_offset
        return None
    return None


def prefer_floor(fit: TrendFit, flat: bool) -> TrendFit:
    """``fit`` without its unbounded families (log-linear, which falls for ever, and a fit whose floor is held at
    the zero bound, which falls as far as the bound lets it: ``fitted_floor``) when a family with a floor
    is plausible (``plausible_floor``) and the run is flat: a plateau and a forecast that falls for ever
    contradict each other, and the data cannot tell them apart, so the forecast keeps the floored fits
    and every statement made from it (target, progress per hour, plateau step, the level it levels off at)
    agrees with the plateau. ``TrendFit.best`` then names the floored family with the most weight."""
    if not flat or plausible_floor(fit, flat) is None:
        return fit
    keep = np.array([fitted_floor(f, fit.nonneg) is not None for f in fit.candidates])
    w = np.where(keep, fit.weights, 0.0)
    if w.sum() <= 0:   # the floored fits had weight < 1 %: weigh them among themselves by BIC
        bic = np.array([f.bic if k else np.inf for f, k in zip(fit.candidates, keep)])
        w = np.exp(-(bic - bic.min()) / 2.0)
    w = w / w.sum()
    w = np.where(w >= 0.01, w, 0.0)
    w = w / w.sum()
    return dataclasses.replace(fit, weights=w)


def steps_to_target(fit: TrendFit, target: float, flat: bool = False) -> StepEstimate:
    """The averaged trend's step for ``target``, with the 5th–95th percentile over the pooled bootstrap
    refits (a refit that never gets there counts as never: the high end is then None).

    The rule for "never": when a family with a floor (power law or exponential) fits about as well as
    the best one (``plausible_floor``: within ΔBIC 10, or at all when the run is ``flat``), and the
    target is below the level where it levels off, the target is not reached: step and high are None
    (the low end may still say when the most optimistic refit gets there). A log-linear fit, which falls
    for ever, then cannot turn an unreachable target into a date."""
    def as_step(x: float) -> int | None:
        return int(np.ceil(x)) if np.isfinite(x) else None

    point = fit.step_reaching(target)
    floor = plausible_floor(fit, flat)
    never = floor is not None and target < floor
    if never:
        point = np.inf
    pool = fit.samples()
    floor = floor if never else None
    if len(pool) < 5:
        return StepEstimate(as_step(point), as_step(point), as_step(point), floor)
    boot = []
    for f, p in pool:
        u = f.family.solve(p, target - fit.level_offset)
        boot.append(u * fit.t_scale - fit.t_shift if np.isfinite(u) else np.inf)
    boot = np.array(boot)
    lo, hi = np.percentile(boot, 5, method="lower"), np.percentile(boot, 95, method="higher")  # inf-safe
    band_lo, band_hi = _band_reaching(fit, target)   # the hold-out miss widens the steps as it widens the loss
    lo, hi = min(lo, band_lo), max(hi, band_hi)
    if never:
        hi = np.inf
    return StepEstimate(as_step(point), as_step(lo), as_step(hi), floor)


def _band_reaching(fit: TrendFit, target: float, max_factor: float = 1e4) -> tuple[float, float]:
    """The first steps after the last where the forecast band's low and its high end reach ``target`` (inf:
    not within ``max_factor`` times the steps done): the step range ``TrendFit.band`` gives for it."""
    if fit.holdout_error_per_log <= 0:
        return np.inf, 0.0
    grid = np.geomspace(max(fit.last_step, 1), max(fit.last_step, 1) * max_factor, 400)
    low, high = fit.band(grid)
    first = [grid[np.argmax(end <= target)] if np.any(end <= target) else np.inf for end in (low, high)]
    return first[0], first[1]


def diminishing_returns_step(fit: TrendFit, step_time_s: float, min_progress_per_hour: float,
                             max_factor: float = 1000.0) -> int | None:
    """The first step from now on where the trend falls by less than ``min_progress_per_hour`` (loss units)
    per hour of training at ``step_time_s``; the last step itself when that is already so; None when
    not within ``max_factor`` times the steps done."""
    grid = np.geomspace(max(fit.last_step, 1), max(fit.last_step, 1) * max_factor, 2000)
    per_hour = -fit.slope_per_step(grid) * 3600.0 / step_time_s
    below = np.nonzero(per_hour < min_progress_per_hour)[0]
    return int(round(grid[below[0]])) if len(below) else None


def forecast_points(fit: TrendFit, horizon_step: int, n: int = 40) -> list[dict]:
    steps = np.unique(np.round(np.geomspace(max(fit.last_step, 1), max(horizon_step, fit.last_step + 1), n)))
    mid = fit.predict(steps)
    low, high = fit.band(steps)
    return [{"step": int(s), "loss": float(f"{m:.6g}"), "low": float(f"{lo:.6g}"), "high": float(f"{hi:.6g}")}
            for s, m, lo, hi in zip(steps, mid, low, high)]
