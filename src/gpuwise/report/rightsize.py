"""Which catalog GPUs would have held the job, how long it would have taken there, and what it would have cost.

Everything that decides comes from ``gpuwise.plan``: the fit rule and its headroom (a share of each
GPU's memory as the driver reports it), the offer picker and the ranking currency, the quote row, and
the time on another GPU (``plan.scaling``: the measured busy time scaled by the time predictor's
ratio when the workload is known, else by the one datasheet ratio, and the output says which).

Money: ``price_per_gpu_hour`` is one GPU's price, ``price_per_hour_all_gpus`` that of all the run's GPUs
together (the run's GPU count × one GPU's), ``cost_per_job_hour`` what the other GPUs (as many as the run
had) cost for the work one hour on the rented GPUs did (``price_per_hour_all_gpus`` × the run-time factor);
the saving is what the rented GPUs cost an hour minus that, per hour, per month of continuous use (730 h)
and for this run. All money is in the ranking currency.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog, CatalogError
from gpuwise.catalog.model import Offer, stale_price_note
from gpuwise.catalog.resolve import is_mig_slice, resolve_mig, slice_gpu
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION
from gpuwise.plan.money import convert
from gpuwise.plan.offers import candidate_offers, cheapest_offer, ranking_currency, spot_policy
from gpuwise.plan.quote import Quote, make_quote
from gpuwise.plan.scaling import PREDICTED_METHOD, TimeScaling, busy_time_factor, time_scaling
from gpuwise.workload.precision import UNKNOWN_JOB_PRECISION
from gpuwise.report.errors import ReportError
from gpuwise.report.usage import UsageSummary

HOURS_PER_MONTH = 730.0


TIME_NOTE = "time on other GPUs: "     # how a note on the time scaling starts (one per report)

@dataclass(frozen=True)
class RightSizeRow:
    """One GPU kind × the run's GPU count: the quote, and what the measured work would have cost there."""

    quote: Quote
    rented: bool
    step_time_ratio: float | None    # predicted or datasheet ratio of busy time there / here
    time_factor: float | None        # wall time there / wall time measured
    run_time_s: float | None
    price_per_gpu_hour: float | None # ranking currency: what was paid (rented row) or the offer's
    cost_per_job_hour: float | None  # ranking currency, all GPUs, for one measured hour of work
    saving_per_hour: float | None
    saving_per_month: float | None
    saving_for_run: float | None
    price_per_hour_all_gpus: float | None = None  # ranking currency, all the run's GPUs together (count × per GPU)

    @property
    def gpu_id(self) -> str:
        return self.quote.gpu

    @property
    def gpu_name(self) -> str:
        return self.quote.gpu_name

    @property
    def memory_bytes(self) -> int:
        return self.quote.gpu_memory_bytes

    @property
    def fits(self) -> bool:
        return bool(self.quote.fits)

    @property
    def provider(self) -> str | None:
        return self.quote.provider

    def to_dict(self) -> dict:
        return {
            **self.quote.to_dict(), "rented": self.rented, "step_time_ratio": self.step_time_ratio,
            "time_factor": self.time_factor, "run_time_s": self.run_time_s,
            "price_per_gpu_hour": self.price_per_gpu_hour, "price_per_hour_all_gpus": self.price_per_hour_all_gpus,
            "cost_per_job_hour": self.cost_per_job_hour,
            "saving_per_hour": self.saving_per_hour, "saving_per_month": self.saving_per_month,
            "saving_for_run": self.saving_for_run,
        }


@dataclass(frozen=True)
class RightSizing:
    rented_gpu_id: str | None
    rented_gpu_name: str | None
    gpu_count: int
    needed_bytes: int
    headroom_fraction: float
    currency: str
    rented_price_per_gpu_hour: float | None   # in ``currency``
    price_source: str | None
    method: str
    method_basis: str
    busy_share_used: float
    options: tuple[RightSizeRow, ...]
    notes: tuple[str, ...]
    idle_gpu_count: int = 0                   # GPUs rented beside the job's, idle: not in any saving

    @property
    def idle_gpus_cost_per_hour(self) -> float | None:
        """What the idle GPUs cost an hour, in ``currency``: the savings are against the ``gpu_count`` GPUs the
        job used, so this comes on top of every one (0 with none idle; None without the rented GPU's price)."""
        if self.rented_price_per_gpu_hour is None:
            return None
        return self.rented_price_per_gpu_hour * self.idle_gpu_count

    @property
    def cheaper(self) -> tuple[RightSizeRow, ...]:
        """GPUs that would have held the job and cost less for the same work, biggest saving first."""
        rows = [o for o in self.options if o.fits and not o.rented and (o.saving_per_hour or 0) > 0]
        return tuple(sorted(rows, key=lambda o: -(o.saving_per_hour or 0)))

    def to_dict(self) -> dict:
        return {
            "rented_gpu_id": self.rented_gpu_id, "rented_gpu_name": self.rented_gpu_name,
            "gpu_count": self.gpu_count, "needed_bytes": self.needed_bytes,
            "headroom_fraction": self.headroom_fraction, "currency": self.currency,
            "rented_price_per_gpu_hour": self.rented_price_per_gpu_hour, "price_source": self.price_source,
            "idle_gpu_count": self.idle_gpu_count, "idle_gpus_cost_per_hour": self.idle_gpus_cost_per_hour,
            "method": self.method, "method_basis": self.method_basis, "busy_share_used": self.busy_share_used,
            "options": [o.to_dict() for o in self.options], "cheaper": [o.gpu_id for o in self.cheaper],
            "notes": list(self.notes),
        }


def rented_gpu(catalog: Catalog, name: str) -> tuple[GPU, str | None]:
    """(GPU, note) of the rented GPU's name: a MIG slice (``NVIDIA A100-SXM4-40GB MIG 1g.5gb``) is the slice
    as a GPU (``catalog.resolve.slice_gpu``: its memory, its share of the compute), and the note says so.
    CatalogError for a name the catalog does not know."""
    gpu, mig = resolve_mig(catalog, name)
    if mig is None:
        return gpu, None
    return slice_gpu(gpu, mig), (f"the GPU is a {mig.describe()}; compared as that slice (the GPU's rates "
                                 f"scaled to its share); the catalog prices whole GPUs, not slices")


def resolve_rented(catalog: Catalog, name: str | None) -> tuple[GPU | None, str | None]:
    """(GPU, note): the GPU named in the log (``rented_gpu``); None and why for no name or an unknown one."""
    if not name:
        return None, "the log names no GPU: pass --gpu NAME to compare GPUs"
    try:
        return rented_gpu(catalog, name)
    except CatalogError as exc:
        return None, f"{exc}: pass --gpu NAME to compare GPUs"


def priced_gpu_count(usage: UsageSummary, rented: GPU | None) -> int:
    """How many of ``rented`` the run paid for, at least 1: its physical GPUs (``UsageSummary.job_gpus``: MIG
    instances of one GPU are that GPU, rented whole), or its MIG instances where ``rented`` is a slice, each rented
    as such (``rented_gpu``)."""
    by_slice = rented is not None and is_mig_slice(rented)
    return max(1, len(usage.job_labels) if by_slice else len(usage.job_gpus))


def right_size(
    usage: UsageSummary,
    catalog: Catalog,
    rented: GPU | None,
    *,
    gpu_price: tuple[float, str | None] | None = None,
    provider: str | None = None,
    spot: bool = False,
    currency: str | None = None,
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
    scaling: TimeScaling | None = None,
    today: datetime.date | None = None,
) -> RightSizing:
    """``scaling``: how busy time moves between GPUs (default: the datasheet ratio at fp16). ``today``: the day
    the prices' age is counted to (``catalog.model.stale_price_note``; default: today)."""
    if usage.needed_peak_bytes is None:
        raise ReportError(f"{usage.path}: the log has no memory figures: nothing to right-size")
    scaling = scaling or time_scaling(UNKNOWN_JOB_PRECISION)
    notes: list[str] = []
    count = priced_gpu_count(usage, rented)
    needed = usage.needed_peak_bytes
    # GPUs of different kinds compared as one (--gpu): the mean over all of them
    busy = usage.busy_share if usage.busy_share is not None else usage.busy_share_any_kind
    if busy is None:
        busy = 1.0
        notes.append("busy share unknown: assumed busy all the time (slower GPUs look as slow as they can be)")
    offers = candidate_offers(catalog, provider=provider, spot=spot_policy(spot))
    rank_in = ranking_currency(offers, currency or (gpu_price[1] if gpu_price else None))

    rented_price = price_source = None
    used: list[Offer] = []        # the catalog prices the report shows or compares with
    if gpu_price is not None:
        amount, price_currency = gpu_price
        rented_price, price_source = convert(amount, price_currency or rank_in, rank_in), "--gpu-price"
    elif rented is not None:
        offer = cheapest_offer(offers, rented.id, 1, rank_in)
        if offer is not None:
            used.append(offer)
            rented_price = convert(offer.price_per_hour, offer.currency, rank_in)
            kind = "yours" if offer.own else "live" if offer.live else "indicative"
            price_source = f"catalog: {offer.provider} ({offer.checked}, {kind})"
        else:
            notes.append(f"no price for {rented.id} in the catalog{' at ' + provider if provider else ''}: "
                         "pass --gpu-price")
    if scaling.method != PREDICTED_METHOD and rented is not None:
        notes.append(f"{TIME_NOTE}{scaling.method} (no workload given; --model uses the time predictor)")

    run_h = usage.duration_s / 3600.0
    rows = []
    # a rented MIG slice (``rented_gpu``) is no catalog GPU: its row is added, to be compared with
    gpus = list(catalog.gpus)
    if rented is not None and all(g.id != rented.id for g in gpus):
        gpus.append(rented)
    for gpu in gpus:
        is_rented = rented is not None and gpu.id == rented.id
        offer = None if is_rented and gpu_price is not None else cheapest_offer(offers, gpu, count, rank_in)
        used += [offer] if offer is not None else []
        quote = make_quote(gpu, count, offer, peak_total_bytes=needed, step_time_s=None,
                           headroom_fraction=headroom_fraction, ranking_currency=rank_in)
        ratio = scaling.ratio(rented, gpu) if rented is not None else None
        factor = busy_time_factor(busy, ratio)
        price_all = (rented_price * count if is_rented and rented_price is not None else quote.price_per_hour_ranked)
        cost = price_all * factor if price_all is not None and factor is not None else None
        saving = rented_price * count - cost if cost is not None and rented_price is not None else None
        rows.append(RightSizeRow(
            quote=quote, rented=is_rented, step_time_ratio=ratio, time_factor=factor,
            price_per_gpu_hour=price_all / count if price_all is not None else None, price_per_hour_all_gpus=price_all,
            run_time_s=usage.duration_s * factor if factor is not None else None, cost_per_job_hour=cost,
            saving_per_hour=saving, saving_per_month=saving * HOURS_PER_MONTH if saving is not None else None,
            saving_for_run=saving * run_h if saving is not None else None,
        ))
    if stale := stale_price_note(used, today):
        notes.append(stale)
    # Fitting GPUs first, cheapest for the work first; GPUs without a price last.
    rows.sort(key=lambda o: (not o.fits, o.cost_per_job_hour is None, o.cost_per_job_hour or 0.0, o.memory_bytes))
    return RightSizing(
        rented_gpu_id=rented.id if rented else None, rented_gpu_name=rented.name if rented else None,
        gpu_count=count, needed_bytes=needed, headroom_fraction=headroom_fraction, currency=rank_in,
        rented_price_per_gpu_hour=rented_price, price_source=price_source, method=scaling.method,
        method_basis=f"busy {busy:.0%}; {scaling.basis}", busy_share_used=busy, options=tuple(rows),
        notes=tuple(notes), idle_gpu_count=len(usage.idle_labels),
    )

