"""Which catalog GPUs would have held the job, how long it would have taken there, and what it would have cost.

Method "busy-share scaling": the job was busy (some kernel running) a share ``b`` of its wall time on the
rented GPU. The idle part (data loading, CPU work, waiting) takes as long on any GPU; the busy part scales
with the GPUs' speed ratio, taken as the geometric mean of the peak-rate ratio (at ``precision``) and the
memory-bandwidth ratio, since training mixes compute-bound and memory-bound kernels::

    time_factor = (1 - b) + b * sqrt(peak_rented / peak_other * bandwidth_rented / bandwidth_other)

This is an estimate from datasheets, not a prediction of the workload (``gpuwise estimate`` does that when
the workload is known). Money: ``cost_per_job_hour`` is what the other GPU costs for the work one hour on
the rented GPU did (its price times ``time_factor``); the saving is the rented price minus that, per hour,
per month of continuous use (730 h) and for this run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass

from gpuwise.catalog import Catalog, CatalogError, GPU, Offer, offers_for, resolve_gpu
from gpuwise.report.errors import ReportError
from gpuwise.report.usage import UsageSummary
from gpuwise.units import UnitError, parse_bytes

HOURS_PER_MONTH = 730.0
METHOD = "busy-share scaling"
# The time of one step of the known workload on a GPU (None: cannot run there), from gpuwise.runtime.
StepTimeFn = Callable[[GPU], "float | None"]
# nvidia-smi shows 15360 MiB on a 16 GiB T4 (ECC and the driver take ~6%): compare against what a job can get.
USABLE_FRACTION = 0.94


@dataclass(frozen=True)
class Headroom:
    fraction: float = 0.10
    min_bytes: int = 2**30

    def of(self, needed_bytes: int) -> int:
        return int(max(needed_bytes * self.fraction, self.min_bytes))

    def describe(self) -> str:
        parts = [f"{self.fraction:.0%}"] if self.fraction else []
        if self.min_bytes:
            parts.append(f"at least {self.min_bytes / 2**30:.1f} GiB")
        return ", ".join(parts) or "none"


def parse_headroom(text: str | None) -> Headroom:
    """'10%' (share of the need), '2GB' (fixed), '0', or None for the default (10%, at least 1 GiB)."""
    if text is None:
        return Headroom()
    s = text.strip()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*%", s)
    if m:
        return Headroom(float(m.group(1)) / 100.0, 0)
    try:
        return Headroom(0.0, parse_bytes(s))
    except UnitError:
        raise ReportError(f"--headroom must be a share like 10% or a size like 2GB, got {text!r}") from None


@dataclass(frozen=True)
class GpuOption:
    gpu_id: str
    gpu_name: str
    memory_bytes: int
    fits: bool
    rented: bool
    time_factor: float | None       # wall time there / wall time measured
    run_time_s: float | None
    price_per_gpu_hour: float | None
    provider: str | None
    spot: bool | None
    cost_per_job_hour: float | None  # for all GPUs of the job, for one measured hour of work
    saving_per_hour: float | None
    saving_per_month: float | None
    saving_for_run: float | None


@dataclass(frozen=True)
class RightSizing:
    rented_gpu_id: str | None
    rented_gpu_name: str | None
    gpu_count: int
    needed_bytes: int
    headroom_bytes: int
    required_bytes: int
    currency: str | None
    rented_price_per_gpu_hour: float | None
    price_source: str | None
    method: str
    precision: str
    busy_share_used: float
    options: tuple[GpuOption, ...]
    notes: tuple[str, ...]

    @property
    def cheaper(self) -> tuple[GpuOption, ...]:
        """GPUs that would have held the job and cost less for the same work, biggest saving first."""
        return tuple(o for o in self.options if o.fits and not o.rented and (o.saving_per_hour or 0) > 0)

    @property
    def method_basis(self) -> str:
        """What the time factors scale by, in words."""
        if self.method == METHOD:
            return f"busy {self.busy_share_used:.0%}, {self.precision} peak rates and memory bandwidth from the catalog"
        return f"busy {self.busy_share_used:.0%}, the predicted step time on each GPU"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cheaper"] = [o.gpu_id for o in self.cheaper]
        return d


def speed_ratio(rented: GPU, other: GPU, precision: str) -> float:
    """How many times longer a busy second on ``rented`` takes on ``other`` (> 1: other is slower)."""
    p_rented, p_other = rented.peak(precision), other.peak(precision)
    if not p_rented or not p_other:  # a precision one of them lacks (bf16 on a T4): compare fp32 units
        p_rented, p_other = rented.peak("fp32"), other.peak("fp32")
    compute = (p_rented / p_other) if p_rented and p_other else 1.0
    bandwidth = rented.memory_bandwidth_gbs / other.memory_bandwidth_gbs
    return math.sqrt(compute * bandwidth)


def time_factor(busy_share: float, rented: GPU, other: GPU, precision: str,
                step_time_s: StepTimeFn | None = None) -> float | None:
    """How many times longer the run takes on ``other``: the idle share stays, the busy share scales by
    the time predictor's step-time ratio when the workload is known, else by the peak-rate ratio."""
    if step_time_s is not None:
        t_rented, t_other = step_time_s(rented), step_time_s(other)
        if not t_rented or t_other is None:
            return None
        ratio = t_other / t_rented
    else:
        ratio = speed_ratio(rented, other, precision)
    return (1.0 - busy_share) + busy_share * ratio


def _cheapest(catalog: Catalog, gpu_id: str, provider: str | None, currency: str | None) -> Offer | None:
    offers = [o for o in offers_for(catalog, gpu_id, provider=provider) if currency is None or o.currency == currency]
    on_demand = [o for o in offers if not o.spot]
    pool = on_demand or offers
    return min(pool, key=lambda o: o.price_per_gpu_hour) if pool else None


def choose_currency(catalog: Catalog, stated: str | None, provider: str | None) -> str | None:
    """The price's own currency; else the provider's; else CNY (gpuwise's users rent on AutoDL & co.) where
    the catalog has CNY prices; else its most common currency. A bare --gpu-price 15 is read in it."""
    if stated:
        return stated
    pool = [o.currency for o in catalog.offers if provider is None or o.provider.lower() == provider.lower()]
    if not pool:
        return None
    return "CNY" if "CNY" in pool and provider is None else Counter(pool).most_common(1)[0][0]


def resolve_rented(catalog: Catalog, name: str | None) -> tuple[GPU | None, str | None]:
    """(GPU, note): the GPU named in the log (a MIG slice's name without its profile)."""
    if not name:
        return None, "the log names no GPU: pass --gpu NAME to compare GPUs"
    base = re.sub(r"\s+MIG\s+\S+$", "", name.strip())
    try:
        return resolve_gpu(catalog, base), None
    except CatalogError as exc:
        return None, f"{exc}: pass --gpu NAME to compare GPUs"


def right_size(
    usage: UsageSummary,
    catalog: Catalog,
    rented: GPU | None,
    *,
    gpu_price: tuple[float, str | None] | None = None,
    provider: str | None = None,
    headroom: Headroom = Headroom(),
    precision: str = "fp16",
    step_time_s: StepTimeFn | None = None,
    method: str = METHOD,
) -> RightSizing:
    """``step_time_s``: the predicted step time of the job's workload per GPU (see
    ``gpuwise.report.predicted``); without it, busy time scales by the ratio of peak rates."""
    if usage.needed_peak_bytes is None:
        raise ReportError(f"{usage.path}: the log has no memory figures: nothing to right-size")
    notes: list[str] = []
    count = max(1, len(usage.job_labels))
    needed = usage.needed_peak_bytes
    extra = headroom.of(needed)
    required = needed + extra
    busy = usage.busy_share
    if busy is None:
        busy = 1.0
        notes.append("busy share unknown: assumed busy all the time (slower GPUs look as slow as they can be)")
    currency = choose_currency(catalog, gpu_price[1] if gpu_price else None, provider)
    rented_offer = _cheapest(catalog, rented.id, provider, currency) if rented else None
    if gpu_price:
        rented_price, price_source = gpu_price[0], "--gpu-price"
    elif rented_offer:
        rented_price = rented_offer.price_per_gpu_hour
        price_source = f"catalog: {rented_offer.provider} ({rented_offer.checked}, indicative)"
    else:
        rented_price, price_source = None, None
        if rented:
            notes.append(f"no price for {rented.id} in the catalog{' at ' + provider if provider else ''}: pass --gpu-price")
    run_h = usage.duration_s / 3600.0
    options = []
    for gpu in catalog.gpus:
        fits = required <= gpu.memory_bytes * USABLE_FRACTION
        factor = 1.0 if rented and gpu.id == rented.id else (
            time_factor(busy, rented, gpu, precision, step_time_s) if rented else None)
        offer = _cheapest(catalog, gpu.id, provider, currency)
        price = offer.price_per_gpu_hour if offer else None
        if rented and gpu.id == rented.id and rented_price is not None:
            offer, price = None, rented_price  # the rented row shows what was paid
        cost = price * count * factor if price is not None and factor is not None else None
        saving = (rented_price * count - cost) if cost is not None and rented_price is not None else None
        options.append(GpuOption(
            gpu_id=gpu.id, gpu_name=gpu.name, memory_bytes=gpu.memory_bytes, fits=fits,
            rented=bool(rented and gpu.id == rented.id), time_factor=factor,
            run_time_s=usage.duration_s * factor if factor is not None else None,
            price_per_gpu_hour=price, provider=offer.provider if offer else (price_source if price is not None else None),
            spot=offer.spot if offer else None,
            cost_per_job_hour=cost, saving_per_hour=saving,
            saving_per_month=saving * HOURS_PER_MONTH if saving is not None else None,
            saving_for_run=saving * run_h if saving is not None else None,
        ))
    # Fitting GPUs first, cheapest for the work first; GPUs without a price last.
    options.sort(key=lambda o: (not o.fits, o.cost_per_job_hour is None, o.cost_per_job_hour or 0.0, o.memory_bytes))
    return RightSizing(
        rented_gpu_id=rented.id if rented else None, rented_gpu_name=rented.name if rented else None,
        gpu_count=count, needed_bytes=needed, headroom_bytes=extra, required_bytes=required, currency=currency,
        rented_price_per_gpu_hour=rented_price, price_source=price_source, method=method, precision=precision,
        busy_share_used=busy, options=tuple(options), notes=tuple(notes),
    )
