"""The one offer picker and the one ranking currency, used by every command that prices GPUs.

``cheapest_offer``: for one GPU × count × provider × spot policy, the offer that costs least in the
ranking currency over every seller, each renting the count as it really does: on one machine, its offers of
exactly ``count`` GPUs, the user's own single-GPU prices × count, or, a marketplace that rents GPUs one by one
(``catalog.topology.rents_per_gpu``, from the topology data), its single-GPU price × count, never a cloud's 1-GPU
price × 2 (AWS sells g4dn with 1, 4 or 8 T4s: two T4s are no instance); beyond one machine (``gpus_per_node``,
``catalog.topology``), whole machines only, where the seller rents several as one cluster (``multi_node`` in the
topology data: AWS, GCP, Aliyun; not AutoDL, RunPod or Lambda on demand), each at its price of one machine (16 =
two 8-GPU p5 instances), or the user's own price of that very count. A cloud's instance of more GPUs than a
machine holds (a user's ``gpus_per_node = 4`` beside an 8-GPU instance) prices nothing: no launch of 4-GPU machines
rents it. The source says how it was priced. A single-GPU price of the
user's own replaces the shipped indicative prices of its provider for that GPU at every count, and
competes with every other provider's at every count; an own price for several GPUs replaces only the offer
of that very count (the catalog's offer identity: provider, GPU, count, spot-ness). A MIG slice is rented
as priced, never × a count: a process sees one slice, and NCCL does not run between slices. Spot offers take
part only when the spot policy includes them: ``recommend``, ``report`` and ``advise`` all take ``--spot`` with
the same meaning.

``ranking_currency``: the one the user asked for; else the currency all considered offers share;
else CNY (gpuwise's home market: AutoDL and similar clouds). Offers keep their own currency in the
output; only ranking converts, at the dated indicative rates of ``gpuwise.plan.money``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuwise.catalog.model import GPU, Catalog, CatalogError, Offer
from gpuwise.catalog.query import check_provider as check_catalog_provider
from gpuwise.catalog.resolve import is_mig_slice_id, offer_order, provider_key
from gpuwise.catalog.topology import DEFAULT_GPUS_PER_NODE, provider_entry, rents_per_gpu, topology_for
from gpuwise.plan.errors import PlanError
from gpuwise.plan.money import convert, rates_in

HOME_CURRENCY = "CNY"
SPOT_POLICIES = ("on-demand", "include", "only")




def spot_policy(spot: bool) -> str:
    """The policy the ``--spot`` flag means: spot offers compete with on-demand ones."""
    return "include" if spot else "on-demand"


def check_provider(catalog: Catalog, provider: str | None) -> str | None:
    """The provider as the catalog spells it (``catalog.query.check_provider``: aliases, a known cloud without
    offers told where prices come from); PlanError (exit 2), in ``gpus``' words, when no offer is found, and for
    a list of several (one provider is asked for)."""
    if provider is None:
        return None
    try:
        return check_catalog_provider(catalog, provider)
    except CatalogError as e:
        raise PlanError(str(e)) from None


def candidate_offers(catalog: Catalog, *, provider: str | None = None, gpu_ids: Iterable[str] | None = None,
                     spot: str = "on-demand") -> list[Offer]:
    """The offers a question may use: of the provider (checked), for the GPUs, under the spot policy."""
    if spot not in SPOT_POLICIES:
        raise PlanError(f"unknown spot policy {spot!r}; valid: {', '.join(SPOT_POLICIES)}")
    provider = check_provider(catalog, provider)
    wanted = set(gpu_ids) if gpu_ids is not None else None
    return [
        o for o in catalog.offers
        if (provider is None or provider_key(o.provider) == provider_key(provider))
        and (wanted is None or o.gpu_id in wanted)
        and (spot == "include" or o.spot == (spot == "only"))
    ]


def ranking_currency(offers: Iterable[Offer], requested: str | None = None) -> str:
    """The one currency options are ranked in (an ISO code): ``requested`` (any case; PlanError for a currency
    without an exchange rate), else the currency all ``offers`` share, else ``HOME_CURRENCY`` (CNY)."""
    if requested:
        rates_in(requested.upper())     # an unknown currency is bad input, said now
        return requested.upper()
    currencies = {o.currency for o in offers}
    return currencies.pop() if len(currencies) == 1 else HOME_CURRENCY


def _seller(offer: Offer) -> tuple[str, bool]:
    """Whose price it is: the provider (``provider_key``: any case) and the spot-ness. A price of the user's own
    replaces the shipped ones of the same seller."""
    return (provider_key(offer.provider), offer.spot)


def own_prices_first(offers: list[Offer]) -> list[Offer]:
    """The offers with the user's own single-GPU prices (``Offer.own``) in place of the shipped indicative ones of
    the same GPU, provider and spot-ness, at every count: who pays ¥1.50 for one RTX 4090 there pays it for each
    of eight, not the shipped ¥1.98 a card. An own price for several GPUs leaves the seller's other counts as
    shipped (the catalog loader replaced the shipped offer of its very count)."""
    own_singles = {(o.gpu_id, _seller(o)) for o in offers if o.own and o.count == 1}
    return [o for o in offers if not o.indicative or (o.gpu_id, _seller(o)) not in own_singles]


def _times(offer: Offer, machines: int) -> Offer:
    """``machines`` of ``offer`` rented together, priced as that many (its source says so): a single-GPU price ×
    a count, or several instances of a fixed shape."""
    how = (f"single-GPU price × {machines}" if offer.count == 1 else
           f"{machines} instances of {offer.count} GPUs, each at its price")
    return replace(offer, count=offer.count * machines, price_per_hour=offer.price_per_hour * machines,
                   source=offer.source + f" ({how})")


def clusters_refused(provider: str | None) -> str | None:
    """Why ``provider`` rents no cluster of several machines, in its own words (``multi_node = false`` in the
    topology data: AutoDL, RunPod, Lambda on demand); None where it rents clusters (AWS, GCP, Aliyun) or where the
    data does not know it (a provider of the user's own catalog: their machines, their word)."""
    entry = provider_entry(provider)
    if entry is None or entry.get("multi_node", False):
        return None
    return entry.get("note") or f"{entry['name']} rents no cluster of several machines"


def larger_than_a_machine(offer: Offer, gpus_per_node: int) -> bool:
    """Is ``offer`` one instance of more GPUs than a machine of its GPU holds (a user's ``gpus_per_node = 4``
    beside a cloud's 8-GPU instance)? Such an instance is no machine a launch of whole ``gpus_per_node`` machines
    asks for, so it prices no count. The user's own offer is exempt: a price of theirs for 16 GPUs is their word for
    16 GPUs together, however many machines."""
    return not offer.own and offer.count > gpus_per_node


def _seller_price(offers: list[Offer], count: int, gpus_per_node: int, currency: str) -> Offer | None:
    """How one seller (provider and spot-ness) of one GPU rents ``count`` of it (None: it does not), the offer's
    ``count`` the GPUs in all and its price theirs all together.

    On one machine (``count`` up to ``gpus_per_node``): its offers of exactly ``count``, its user's own single-GPU
    price × ``count`` (where the user gave no price of that very count), else, where it rents by the GPU
    (``rents_per_gpu``: a marketplace), its cheapest single × ``count``; never 1-GPU instances side by side, which
    are no machine of ``count`` GPUs. Beyond one machine: whole machines only (``count`` a multiple of
    ``gpus_per_node``, the nodes a multi-node job runs on, ``catalog.topology``), as the user's own price of that
    very count, else, where the seller rents several machines as one cluster (``clusters_refused`` None), the
    machines × its price of one machine. An instance of more GPUs than a machine holds prices nothing
    (``larger_than_a_machine``); MIG slices are rented one at a time."""
    def cheapest(candidates: list[Offer]) -> Offer | None:
        return min(candidates, key=lambda o: _rank_key(o, currency), default=None)

    offers = [o for o in offers if not larger_than_a_machine(o, gpus_per_node)]
    if not offers:
        return None
    exact = [o for o in offers if o.count == count]
    own_exact = [o for o in exact if o.own]
    if count > 1 and is_mig_slice_id(offers[0].gpu_id):
        return cheapest(exact)
    if count > gpus_per_node:
        if count % gpus_per_node:
            return None
        if own_exact:
            return cheapest(own_exact)
        if clusters_refused(offers[0].provider) is not None:
            return None
        machine = _seller_price(offers, gpus_per_node, gpus_per_node, currency)
        return _times(machine, count // gpus_per_node) if machine is not None else None
    if count > 1:
        exact += own_prices_at(offers, count)
    if not exact and count > 1 and rents_per_gpu(offers[0].provider):
        singles = [o for o in offers if o.count == 1]
        return _times(cheapest(singles), count) if singles else None
    return cheapest(exact)


def own_prices_at(offers: list[Offer], count: int) -> list[Offer]:
    """The user's own single-GPU prices × ``count``, one per provider and spot-ness that has no offer of the
    user's own for exactly ``count`` GPUs (an own price for that count is the user's word for it)."""
    own_exact = {(o.gpu_id, _seller(o)) for o in offers if o.own and o.count == count}
    return [_times(o, count) for o in offers
            if o.own and o.count == 1 and (o.gpu_id, _seller(o)) not in own_exact and not is_mig_slice_id(o.gpu_id)]


def offers_as_priced(offers: Iterable[Offer]) -> list[Offer]:
    """The offers as the planner prices them, for listing: a shipped offer that a single-GPU price of the user's
    own replaces (``own_prices_first``) shows as that price × its count, in ``offers_for``'s order."""
    offers = list(offers)
    kept = own_prices_first(offers)
    shown = list(kept)
    for o in offers:
        if o in kept:
            continue
        mine = [p for p in own_prices_at([k for k in kept if k.gpu_id == o.gpu_id], o.count)
                if _seller(p) == _seller(o)]
        shown.extend(p for p in mine if p not in shown)
    return sorted(shown, key=offer_order)


def cheapest_offer(offers: Iterable[Offer], gpu: GPU | str, count: int, currency: str) -> Offer | None:
    """The cheapest offer (in ``currency``) for ``count`` of ``gpu_id``, over every seller, each renting ``count``
    as it really does (``_seller_price``: its offers of exactly ``count`` GPUs on one machine, the user's own
    single-GPU prices × ``count``, a marketplace's single-GPU price × ``count``; beyond one machine whole machines of
    a seller that rents clusters, each at its price of one machine, or the user's own price of that count); None
    where no seller does. One seller's 8-GPU instance never hides another's per-GPU price (AutoDL's 8 A100s at its
    single price × 8 against Lambda's dearer 8-GPU instance). ``gpu``: the GPU, whose machines (``topology_for``: a
    user's ``gpus_per_node`` too) say what a whole machine is; its id alone assumes machines of
    ``DEFAULT_GPUS_PER_NODE``."""
    gpu_id = gpu if isinstance(gpu, str) else gpu.id
    sellers: dict[tuple[str, bool], list[Offer]] = {}
    for o in own_prices_first([o for o in offers if o.gpu_id == gpu_id]):
        sellers.setdefault(_seller(o), []).append(o)
    candidates = [o for offers_of in sellers.values()
                  if (o := _seller_price(offers_of, count, node_size(gpu, offers_of[0].provider), currency))
                  is not None]
    return min(candidates, key=lambda o: _rank_key(o, currency), default=None)


def cheapest_offers(offers: Iterable[Offer], gpu: GPU | str, count: int, currency: str) -> list[Offer]:
    """``cheapest_offer`` of the on-demand offers and, apart, of the spot ones (each where there is one, the
    on-demand first): a spot price per hour is not what the job costs there (preemptions lengthen it,
    ``plan.spot``), so a cheaper spot price must not hide the on-demand offer of the same GPU × count; each is
    quoted as its own option and ranked by its expected cost."""
    offers = list(offers)
    return [o for spot in (False, True)
            if (o := cheapest_offer([x for x in offers if x.spot == spot], gpu, count, currency)) is not None]


def node_size(gpu: GPU | str, provider: str | None) -> int:
    """GPUs in one of ``provider``'s machines of ``gpu`` (``catalog.topology``, the user's word first)."""
    return DEFAULT_GPUS_PER_NODE if isinstance(gpu, str) else topology_for(gpu, provider).gpus_per_node


def _rank_key(offer: Offer, currency: str) -> tuple[float, str]:
    return (convert(offer.price_per_hour, offer.currency, currency), offer.provider)


def cheapest_to_rent_one(offers_by_gpu: dict[str, Iterable[Offer]], currency: str | None = None,
                         ) -> tuple[str, dict[str, Offer | None]]:
    """(ranking currency, GPU id -> the cheapest on-demand offer to rent one of it, or the cheapest spot offer
    where there is no on-demand one): what ``gpus`` shows and sorts by."""
    pool = [o for offers in offers_by_gpu.values() for o in offers]
    rank_in = ranking_currency(pool, currency)

    def best(gpu_id: str, offers: list[Offer]) -> Offer | None:
        on_demand = cheapest_offer([o for o in offers if not o.spot], gpu_id, 1, rank_in)
        return on_demand or cheapest_offer([o for o in offers if o.spot], gpu_id, 1, rank_in)

    return rank_in, {gpu_id: best(gpu_id, list(offers)) for gpu_id, offers in offers_by_gpu.items()}


def price_key(offer: Offer | None, currency: str) -> tuple[int, float]:
    """Sort key: priced offers cheapest first (in ``currency``), unpriced GPUs last."""
    return (1, 0.0) if offer is None else (0, convert(offer.price_per_gpu_hour, offer.currency, currency))
