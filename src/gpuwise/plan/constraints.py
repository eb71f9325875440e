"""What a recommendation is asked: how much work (``JobSize``), what must hold (``Constraints``: deadline,
budget, headroom, serving latency), and the one rule that excludes a quote missing them, applied to the
options and to the remedies alike."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

from gpuwise.plan import reasons
from gpuwise.plan.errors import PlanError
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION, check_headroom
from gpuwise.plan.money import convert
from gpuwise.plan.quote import Quote
from gpuwise.units import format_duration

SERVING_PRICED_TOKENS = 1_000_000   # a serving job without --samples is priced per million output tokens
# The most optimizer steps gpuwise counts (a job's, a log's, advise's --total-steps): the largest whole number a
# float holds exactly; more is no count of steps (and overflows the arithmetic of times and costs).
MAX_STEPS = 2**53
MAX_STEPS_TEXT = f"2^53 = {MAX_STEPS:,}, the largest step count a float holds exactly"


@dataclass(frozen=True)
class JobSize:
    """How much work: samples × epochs, or a number of optimizer steps. ``samples`` and ``steps`` are whole
    numbers >= 1, ``epochs`` a finite number > 0 (a fraction of an epoch is fine); PlanError otherwise, as
    the CLI refuses ``--steps 2.5``."""

    samples: int | None = None
    epochs: float = 1.0
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.samples is None and self.steps is None:
            raise PlanError("give the job's size: --samples N (with --epochs E) or --steps S")
        if self.samples is not None and self.steps is not None:
            raise PlanError("give the job's size as --samples N (with --epochs E) or as --steps S, not both")
        for flag, value in (("--samples", self.samples), ("--steps", self.steps)):
            if value is not None and not _is_whole(value):
                raise PlanError(f"{flag} must be a whole number, got {value!r}")
            if value is not None and value <= 0:
                raise PlanError(f"{flag} must be positive, got {value}")
            if value is not None and value > MAX_STEPS:
                raise PlanError(f"{flag} must be at most {MAX_STEPS_TEXT}, got {value:,}")
        if not _is_number(self.epochs):
            raise PlanError(f"--epochs must be a number, got {self.epochs!r}")
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise PlanError(f"--epochs must be positive, got {self.epochs}")
        if self.samples is not None and self.samples * self.epochs > MAX_STEPS:     # steps <= samples × epochs
            raise PlanError(f"--samples {self.samples:,} × --epochs {self.epochs:g} is {self.samples * self.epochs:.3g} "
                            f"samples: at batch 1 more steps than {MAX_STEPS_TEXT}; give a real job's size")

    @classmethod
    def serving(cls, new_tokens: int, tokens: int | None = None) -> "JobSize":
        """A serving job with no size given: the requests that generate ``tokens`` (a million by default,
        SERVING_PRICED_TOKENS) answers of ``new_tokens`` each, so its cost is the cost per million output tokens."""
        tokens = SERVING_PRICED_TOKENS if tokens is None else tokens
        return cls(samples=math.ceil(tokens / max(1, new_tokens)))

    def steps_per_epoch(self, effective_batch: int) -> int | None:
        """Optimizer steps of one pass over ``samples`` (None: the job is sized in steps): a data loader that
        keeps its last, short batch (``drop_last=False``, PyTorch's default) takes ceil(samples / batch)."""
        return None if self.samples is None else math.ceil(self.samples / effective_batch)

    def optimizer_steps(self, effective_batch: int) -> int:
        """The job's optimizer steps: ``steps``, or ``epochs`` passes of ``steps_per_epoch`` each, a fraction of a
        pass its share of the samples (10 epochs of 100 samples at batch 64 are 20 steps, not ceil(1000 / 64) = 16)."""
        if self.steps is not None:
            return self.steps
        whole = math.floor(self.epochs)
        # the last pass's samples, whole ones (1.1 epochs of 1,000 is 100 samples, not 100.00000000000009)
        part = math.ceil(round((self.epochs - whole) * self.samples, 6))
        return whole * self.steps_per_epoch(effective_batch) + math.ceil(part / effective_batch)


def _is_whole(value: object) -> bool:
    """An integer, not a bool (``True`` is no count) nor a float that happens to be whole (the CLI refuses 2.0)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Constraints:
    """What every option of a recommendation must meet (None: no such constraint). ``deadline_s``: the whole
    job's wall-clock time, in seconds (an option's ``total_time_s``). ``budget``: the whole job's cost, an
    amount in ``budget_currency`` (an ISO code such as "CNY" or "USD"; None: the ranking currency), converted at
    ``gpuwise.plan.money``'s dated rates. ``headroom_fraction``: the share of each GPU's memory kept free (the
    one fit rule, ``gpuwise.plan.fit``). ``max_ttft_s``/``max_tpot_s``: serving a decoder LLM, the time to the
    first token and per output token, in seconds. PlanError for a value out of range."""

    deadline_s: float | None = None
    budget: float | None = None
    budget_currency: str | None = None     # None: the ranking currency
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION
    # LLM serving targets a request must see (None: none): time to first token, time per output token
    max_ttft_s: float | None = None
    max_tpot_s: float | None = None

    def __post_init__(self) -> None:
        check_headroom(self.headroom_fraction)
        for flag, value in (("--ttft", self.max_ttft_s), ("--tpot", self.max_tpot_s)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise PlanError(f"{flag} must be a positive duration, got {value!r}")
        if self.deadline_s is not None and not (self.deadline_s > 0 and math.isfinite(self.deadline_s)):
            raise PlanError(f"--deadline must be a positive duration, got {self.deadline_s!r}")
        if self.budget is not None and not (self.budget > 0 and math.isfinite(self.budget)):
            raise PlanError(f"--budget must be a positive amount, got {self.budget!r}")

    @property
    def latency_targets(self) -> bool:
        return self.max_ttft_s is not None or self.max_tpot_s is not None


def latency_misses(o: Quote, c: Constraints) -> list[str]:
    """The serving latency targets an option misses, in words with the figures (empty: it meets them)."""
    out = []
    if c.max_ttft_s is not None and o.ttft_s is not None and o.ttft_s > c.max_ttft_s:
        out.append(f"time to first token {format_duration(o.ttft_s)} is over --ttft {format_duration(c.max_ttft_s)}")
    if c.max_tpot_s is not None and o.tpot_s is not None and o.tpot_s > c.max_tpot_s:
        out.append(f"time per output token {format_duration(o.tpot_s)} ({1 / o.tpot_s:,.0f} tokens/s a request) "
                   f"is over --tpot {format_duration(c.max_tpot_s)}")
    return out


def relative_misses(o: Quote, c: Constraints, ranking_currency: str) -> dict[str, float]:
    """How far an option misses each constraint set, as a share of it (0.25: 25 % over; 0: met), by kind
    (``reasons.LATENCY``, ``DEADLINE``, ``BUDGET``): what ranks the closest options when nothing meets them."""
    out = {}
    if c.latency_targets:
        ratio = max((o.ttft_s or 0.0) / c.max_ttft_s if c.max_ttft_s else 0.0,
                    (o.tpot_s or 0.0) / c.max_tpot_s if c.max_tpot_s else 0.0)
        out[reasons.LATENCY] = max(0.0, ratio - 1.0)
    if c.deadline_s is not None:
        out[reasons.DEADLINE] = max(0.0, (o.total_time_s or 0.0) / c.deadline_s - 1.0)
    if c.budget is not None:
        budget = convert(c.budget, c.budget_currency or ranking_currency, ranking_currency)
        out[reasons.BUDGET] = max(0.0, (o.total_cost_ranked or 0.0) / budget - 1.0)
    return out


def apply_constraints(options: list[Quote], c: Constraints, ranking_currency: str) -> list[Quote]:
    """Each option that fits, left out for every constraint it misses (``reasons.constraints_missed``:
    the serving targets, the deadline, the budget, each said); options left out already stay as they are."""
    budget = None
    if c.budget is not None:
        budget = convert(c.budget, c.budget_currency or ranking_currency, ranking_currency)
    out = []
    for o in options:
        if o.eligible:
            misses = []
            missed = latency_misses(o, c)
            if missed:
                misses.append(reasons.latency_missed(missed))
            if c.deadline_s is not None and o.total_time_s is not None and o.total_time_s > c.deadline_s:
                misses.append(reasons.deadline_missed(o.total_time_s - c.deadline_s))
            if budget is not None and o.total_cost_ranked is not None and o.total_cost_ranked > budget:
                # in the ranking currency, as the costs beside it are, and in the budget's where the user wrote another
                misses.append(reasons.over_budget(o.total_cost_ranked - budget, ranking_currency,
                                                  c.budget_currency or ranking_currency))
            if misses:
                o = replace(o, exclusion=reasons.constraints_missed(misses))
        out.append(o)
    return out
