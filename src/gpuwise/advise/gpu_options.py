"""What the rest of a run would take on other GPUs: one quote per GPU (``gpuwise.plan.quote``).

Everything comes from ``gpuwise.plan``: the offer picker and ranking currency, the fit rule (the run's
peak against each GPU's memory as the driver reports it, less the headroom), and the time on another
GPU (``plan.scaling``: the time predictor's ratio when the run's workload is known, else the one
datasheet ratio). Costs compare in the ranking currency. A spot offer's time and cost for some steps include
its expected preemptions, by recommend's rule (``plan.spot.SpotRisk`` over the offer's machines), at the rate
and checkpoint interval the caller gives (advise's --preemptions-per-hour and --checkpoint-every, as recommend's);
``spot_note`` says which.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuwise.catalog.model import GPU, Catalog, Offer
from gpuwise.catalog.topology import topology_for
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION
from gpuwise.plan.offers import candidate_offers, cheapest_offer, ranking_currency, spot_policy
from gpuwise.plan.quote import Quote, make_quote
from gpuwise.plan.scaling import TimeScaling
from gpuwise.plan.spot import SpotRisk

YOUR_PRICE = "(your price)"
SPOT_RISK = SpotRisk()     # recommend's defaults of --preemptions-per-hour and --checkpoint-every


def gpu_options(
    catalog: Catalog, current: GPU, step_time_s: float, *, scaling: TimeScaling, count: int = 1,
    provider: str | None = None, spot: bool = False, currency: str | None = None,
    memory_need_bytes: int | None = None, current_price: tuple[float, str] | None = None,
    busy_share: float = 1.0, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION, spot_risk: SpotRisk = SPOT_RISK,
) -> tuple[Quote | None, list[Quote]]:
    """(the current GPU's quote or None when it has no price, every GPU's quote cheapest per step first).

    ``step_time_s``: the measured seconds per step on ``current``; ``current_price``: (per hour for all
    ``count`` GPUs, currency) when the user says what they pay, else the catalog's cheapest offer; ``spot_risk``:
    the preemptions a spot offer's cost per step includes (the order).
    """
    offers = candidate_offers(catalog, provider=provider, spot=spot_policy(spot))
    rank_in = ranking_currency(offers, currency or (current_price[1] if current_price else None))
    quotes: list[Quote] = []
    mine: Quote | None = None
    for gpu in catalog.gpus:
        is_current = gpu.id == current.id
        if is_current and current_price is not None:
            price, cur = current_price
            offer = Offer(provider or YOUR_PRICE, gpu.id, count, price, cur or rank_in, False, "--gpu-price", "")
        else:
            offer = cheapest_offer(offers, gpu, count, rank_in)
        factor = scaling.run_time_factor(busy_share, current, gpu)
        if factor is None:
            continue  # the workload cannot run there (amp-bf16 without bf16)
        # the machines the count is rented on at the offer's provider, as recommend counts them (spot: each preempted)
        nodes = topology_for(gpu, offer.provider if offer else None).nodes(count)
        quote = make_quote(gpu, count, offer, peak_total_bytes=memory_need_bytes, step_time_s=step_time_s * factor,
                           headroom_fraction=headroom_fraction, ranking_currency=rank_in, nodes=nodes)
        if is_current:
            mine = quote if offer is not None else None
        if offer is not None:
            quotes.append(quote)
    quotes.sort(key=lambda q: (expected_cost_for(q, 1, spot_risk), q.step_time_s))
    return mine, quotes


def preemption_hours_for(quote: Quote, steps: float, risk: SpotRisk = SPOT_RISK) -> float:
    """The hours expected preemptions add to ``steps`` on ``quote``: none on demand; on a spot offer,
    recommend's rule (``SpotRisk.expected_time_s`` over the quote's machines)."""
    if not quote.spot:
        return 0.0
    run_s = quote.hours_for(steps) * 3600.0
    return (risk.expected_time_s(run_s, machines=quote.nodes) - run_s) / 3600.0


def expected_hours_for(quote: Quote, steps: float, risk: SpotRisk = SPOT_RISK) -> float:
    """Wall hours for ``steps`` on ``quote``, a spot offer's expected preemptions included."""
    return quote.hours_for(steps) + preemption_hours_for(quote, steps, risk)


def expected_cost_for(quote: Quote, steps: float, risk: SpotRisk = SPOT_RISK) -> float:
    """Money for ``steps`` on ``quote`` in the ranking currency: its price for the expected hours, as recommend
    bills a spot job the time its preemptions add."""
    return expected_hours_for(quote, steps, risk) * (quote.price_per_hour_ranked or 0.0)


def spot_note(quotes: Iterable[Quote], risk: SpotRisk = SPOT_RISK) -> str:
    """The preemptions assumed for the spot offers among ``quotes``, in recommend's words ("" when none is spot)."""
    machines = tuple(q.nodes for q in quotes if q.spot)
    if not machines:
        return ""
    return risk.describe(machines)


def with_count(quote: Quote, count: int) -> Quote:
    """The same GPU at another count, priced per GPU × count (for 'two GPUs data-parallel' advice)."""
    per_gpu = quote.price_per_hour / quote.count
    return replace(quote, count=count, price_per_hour=per_gpu * count,
                   price_per_hour_ranked=quote.price_per_hour_ranked / quote.count * count)
