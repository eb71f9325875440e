"""The recommendation: every GPU × count on offer, whether it fits, how long, what it costs, and why
each option that lost did lose."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from gpuwise.catalog.model import GPU, Catalog, Offer
from gpuwise.errors import GpuwiseError, did_you_mean
from gpuwise.plan.money import RATES_CHECKED, convert
from gpuwise.plan.profile import WorkloadModel, largest_fitting_batch, usable_bytes
from gpuwise.units import format_bytes, format_duration, format_money
from gpuwise.workload import Workload

GPU_COUNTS = (1, 2, 4, 8)


class PlanError(GpuwiseError):
    pass


@dataclass(frozen=True)
class JobSize:
    """How much work: samples × epochs, or a number of optimizer steps."""

    samples: int | None = None
    epochs: float = 1.0
    steps: int | None = None

    def __post_init__(self) -> None:
        if (self.samples is None) == (self.steps is None):
            raise PlanError("give the job's size as --samples N (with --epochs E) or as --steps S, not both")
        if self.samples is not None and self.samples <= 0:
            raise PlanError(f"--samples must be positive, got {self.samples}")
        if self.steps is not None and self.steps <= 0:
            raise PlanError(f"--steps must be positive, got {self.steps}")
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise PlanError(f"--epochs must be positive, got {self.epochs}")

    def optimizer_steps(self, effective_batch: int) -> int:
        if self.steps is not None:
            return self.steps
        return math.ceil(self.samples * self.epochs / effective_batch)


@dataclass(frozen=True)
class Constraints:
    deadline_s: float | None = None
    budget: float | None = None
    budget_currency: str | None = None     # None: the ranking currency
    headroom_fraction: float = 0.05


@dataclass(frozen=True)
class Option:
    """One way to run the job: ``count`` GPUs of one kind from one offer."""

    gpu: str
    gpu_name: str
    count: int
    provider: str
    currency: str
    price_per_hour: float            # for all ``count`` GPUs
    spot: bool
    fits: bool
    batch_size: int | None           # micro-batch per GPU
    grad_accum_steps: int
    effective_batch_size: int
    gpu_memory_bytes: int
    peak_total_bytes: int | None
    step_time_s: float | None
    total_time_s: float | None
    total_cost: float | None          # in ``currency``
    bound: str | None
    excluded_because: str | None = None
    warnings: tuple[str, ...] = ()
    ranking_cost: float | None = None  # total_cost in the ranking currency

    @property
    def eligible(self) -> bool:
        return self.excluded_because is None

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu, "gpu_name": self.gpu_name, "count": self.count, "provider": self.provider,
            "currency": self.currency, "price_per_hour": self.price_per_hour, "spot": self.spot,
            "fits": self.fits, "batch_size": self.batch_size, "grad_accum_steps": self.grad_accum_steps,
            "effective_batch_size": self.effective_batch_size, "gpu_memory_bytes": self.gpu_memory_bytes,
            "peak_total_bytes": self.peak_total_bytes, "step_time_s": self.step_time_s,
            "total_time_s": self.total_time_s, "total_cost": self.total_cost, "bound": self.bound,
            "excluded_because": self.excluded_because, "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Recommendation:
    workload: Workload
    method: str
    ranking_currency: str
    options: tuple[Option, ...]
    best: Option | None
    fastest: Option | None
    best_value: Option | None
    nothing_meets: str | None = None
    closest: tuple[Option, ...] = ()
    notes: tuple[str, ...] = ()
    remedies: tuple[dict, ...] = field(default=())

    def to_dict(self) -> dict:
        def opt(o: Option | None):
            return None if o is None else o.to_dict()

        return {
            "workload": self.workload.to_dict(), "method": self.method,
            "ranking_currency": self.ranking_currency,
            "options": [o.to_dict() for o in self.options],
            "best": opt(self.best), "fastest": opt(self.fastest), "best_value": opt(self.best_value),
            "nothing_meets": self.nothing_meets, "closest": [o.to_dict() for o in self.closest],
            "remedies": list(self.remedies), "notes": list(self.notes),
        }


# -- offers -----------------------------------------------------------------------------------------
def select_offers(
    catalog: Catalog, *, provider: str | None, gpu_ids: Iterable[str] | None, spot: bool
) -> list[Offer]:
    """The offers to consider. Unknown provider names are bad input (exit 2); a known provider with no
    offer for the chosen GPUs is an answer ("nothing meets"), handled by the caller."""
    offers = list(catalog.offers)
    if provider is not None:
        providers = sorted({o.provider for o in offers})
        if provider.lower() not in {p.lower() for p in providers}:
            raise PlanError(
                f"--provider: unknown provider {provider!r}{did_you_mean(provider, providers)}; "
                f"known: {', '.join(providers)}"
            )
        offers = [o for o in offers if o.provider.lower() == provider.lower()]
    if gpu_ids is not None:
        wanted = set(gpu_ids)
        offers = [o for o in offers if o.gpu_id in wanted]
    if not spot:
        offers = [o for o in offers if not o.spot]
    return offers


def _offer_for_count(offers: list[Offer], count: int, currency: str) -> Offer | None:
    """The cheapest offer for exactly ``count`` GPUs; else a single-GPU offer priced × count."""
    exact = [o for o in offers if o.count == count]
    if exact:
        return min(exact, key=lambda o: convert(o.price_per_hour, o.currency, currency))
    singles = [o for o in offers if o.count == 1]
    if count == 1 or not singles:
        return None
    cheapest = min(singles, key=lambda o: convert(o.price_per_hour, o.currency, currency))
    return replace(cheapest, count=count, price_per_hour=cheapest.price_per_hour * count,
                   source=cheapest.source + f" (single-GPU price × {count})")


# -- evaluation -------------------------------------------------------------------------------------
def recommend(
    model: WorkloadModel,
    catalog: Catalog,
    *,
    job: JobSize,
    constraints: Constraints = Constraints(),
    provider: str | None = None,
    gpu_ids: Iterable[str] | None = None,
    max_gpus: int = 8,
    spot: bool = False,
    auto_batch: bool = False,
    effective_batch: int | None = None,
    currency: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Recommendation:
    if max_gpus < 1:
        raise PlanError(f"--max-gpus must be at least 1, got {max_gpus}")
    progress = progress or (lambda _m: None)
    workload = model.workload
    offers = select_offers(catalog, provider=provider, gpu_ids=gpu_ids, spot=spot)
    ranking_currency = currency or _single_currency(offers) or "CNY"
    # Without --effective-batch, every GPU runs the user's micro-batch (one trace serves all options);
    # with it, micro-batch × accumulation × GPUs is kept equal to it on every option.
    keep_effective = effective_batch is not None or auto_batch
    effective = effective_batch or workload.batch_size * workload.grad_accum_steps
    gpus = {g.id: g for g in catalog.gpus}

    options: list[Option] = []
    by_gpu: dict[str, list[Offer]] = {}
    for o in offers:
        by_gpu.setdefault(o.gpu_id, []).append(o)
    for gpu_id in sorted(by_gpu):
        gpu = gpus[gpu_id]
        progress(f"estimating on {gpu.name}")
        for count in (c for c in GPU_COUNTS if c <= max_gpus):
            offer = _offer_for_count(by_gpu[gpu_id], count, ranking_currency)
            if offer is None:
                continue
            target = effective if keep_effective else effective * count
            options.append(_evaluate(model, gpu, offer, count, job, constraints, target,
                                     auto_batch, ranking_currency))

    options = _apply_constraints(options, constraints, ranking_currency)
    eligible = [o for o in options if o.eligible]
    fitting = [o for o in options if o.fits and o.total_time_s is not None]
    best = min(eligible, key=lambda o: (o.ranking_cost, o.total_time_s), default=None)
    fastest = min(fitting, key=lambda o: (o.total_time_s, o.ranking_cost), default=None)
    # Best value: the least cost × time among those that meet every constraint (the knee of the front).
    best_value = min(eligible, key=lambda o: o.ranking_cost * o.total_time_s, default=None)
    nothing, closest = None, ()
    if best is None:
        nothing, closest = _nothing_meets(options, constraints, provider, ranking_currency)
    notes = (
        f"costs ranked in {ranking_currency}; exchange rates indicative as of {RATES_CHECKED}",
        "times are for PyTorch 2.x eager mode with cuDNN (DESIGN.md: the software stack assumed)",
    )
    options.sort(key=lambda o: (not o.eligible, not o.fits,
                                o.ranking_cost if o.ranking_cost is not None else math.inf, o.gpu, o.count))
    return Recommendation(workload, model.method, ranking_currency, tuple(options), best, fastest, best_value,
                          nothing, tuple(closest), notes)


def _single_currency(offers: list[Offer]) -> str | None:
    """The offers' currency when they share one; mixed offers rank in CNY (gpuwise's home market)."""
    currencies = {o.currency for o in offers}
    return currencies.pop() if len(currencies) == 1 else None


def _evaluate(model, gpu: GPU, offer: Offer, count: int, job: JobSize, constraints: Constraints,
              effective: int, auto_batch: bool, ranking_currency: str) -> Option:
    workload = model.workload
    base = dict(
        gpu=gpu.id, gpu_name=gpu.name, count=count, provider=offer.provider, currency=offer.currency,
        price_per_hour=offer.price_per_hour, spot=offer.spot, gpu_memory_bytes=gpu.visible_memory_bytes,
        effective_batch_size=effective,
    )
    empty = dict(fits=False, batch_size=None, grad_accum_steps=1, peak_total_bytes=None, step_time_s=None,
                 total_time_s=None, total_cost=None, bound=None)
    if workload.precision == "amp-bf16" and not gpu.has_bf16:
        return Option(**base, **empty, excluded_because=f"no bf16 on this GPU ({gpu.arch}): use --precision amp-fp16")
    if workload.is_training and effective % count:
        return Option(**base, **empty,
                      excluded_because=f"effective batch {effective} does not split evenly over {count} GPUs")
    per_gpu = effective // count if workload.is_training else workload.batch_size
    if per_gpu < 1:
        return Option(**base, **empty, excluded_because=f"effective batch {effective} is smaller than {count} GPUs")

    if auto_batch:
        largest = largest_fitting_batch(model, gpu, count=count, headroom_fraction=constraints.headroom_fraction,
                                        limit=per_gpu)
        if largest == 0:
            est = model.estimate(gpu, count=count, batch_size=1, with_time=False)
            return Option(**base, **{**empty, "batch_size": 1, "peak_total_bytes": est.memory.total_bytes},
                          excluded_because=_oom_reason(1, est.memory.total_bytes, gpu, constraints))
        micro = max(d for d in _divisors(per_gpu) if d <= largest)
    else:
        micro = min(workload.batch_size, per_gpu)
        if per_gpu % micro:
            micro = max(d for d in _divisors(per_gpu) if d <= micro)
    accum = per_gpu // micro if workload.is_training else 1

    est = model.estimate(gpu, count=count, batch_size=micro, grad_accum_steps=accum)
    total_bytes = est.memory.total_bytes
    fits = total_bytes <= usable_bytes(gpu, constraints.headroom_fraction)
    step = est.time
    steps = job.optimizer_steps(effective) if workload.is_training else job.optimizer_steps(per_gpu * count)
    total_time_s = steps * step.step_time_s if step is not None else None
    total_cost = total_time_s / 3600 * offer.price_per_hour if total_time_s is not None else None
    reason = None if fits else _oom_reason(micro, total_bytes, gpu, constraints)
    return Option(
        **base, fits=fits, batch_size=micro, grad_accum_steps=accum, peak_total_bytes=total_bytes,
        step_time_s=step.step_time_s if step else None, total_time_s=total_time_s, total_cost=total_cost,
        bound=step.bound if step else None, excluded_because=reason,
        warnings=tuple(step.warnings) if step else (),
        ranking_cost=convert(total_cost, offer.currency, ranking_currency) if total_cost is not None else None,
    )


def _oom_reason(batch: int, total_bytes: int, gpu: GPU, constraints: Constraints) -> str:
    headroom = f", {constraints.headroom_fraction:.0%} kept free" if constraints.headroom_fraction else ""
    return (f"OOM at batch {batch}: needs {format_bytes(total_bytes)} of "
            f"{format_bytes(gpu.visible_memory_bytes)}{headroom}")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _apply_constraints(options: list[Option], c: Constraints, ranking_currency: str) -> list[Option]:
    budget = None
    if c.budget is not None:
        budget = convert(c.budget, c.budget_currency or ranking_currency, ranking_currency)
    out = []
    for o in options:
        if o.eligible and c.deadline_s is not None and o.total_time_s > c.deadline_s:
            o = replace(o, excluded_because=f"misses the deadline by {format_duration(o.total_time_s - c.deadline_s)}")
        elif o.eligible and budget is not None and o.ranking_cost > budget:
            over = convert(o.ranking_cost - budget, ranking_currency, o.currency)
            o = replace(o, excluded_because=f"over budget by {format_money(over, o.currency)}")
        out.append(o)
    return out


def _nothing_meets(options: list[Option], c: Constraints, provider: str | None, currency: str):
    if not options:
        where = f" from provider {provider!r}" if provider else ""
        return f"nothing meets the request: no offers{where} for the chosen GPUs", ()
    fitting = [o for o in options if o.fits]
    if not fitting:
        return "nothing meets the request: the job does not fit on any GPU on offer at this batch size", ()
    what = []
    if c.deadline_s is not None:
        what.append(f"the deadline of {format_duration(c.deadline_s)}")
    if c.budget is not None:
        what.append(f"the budget of {format_money(c.budget, c.budget_currency or currency)}")
    closest = sorted(fitting, key=lambda o: (o.total_time_s if c.deadline_s is not None else 0, o.ranking_cost))[:3]
    return f"nothing meets {' and '.join(what) or 'the request'}; the closest options are listed", closest
