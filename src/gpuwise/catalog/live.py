"""Live offers from the clouds that dstack's ``gpuhunt`` covers (AWS, GCP, Azure, RunPod, Vast.ai, Lambda …).

The shipped offers are recalled by hand and dated; where the user is online, ``--live`` adds the offers
gpuhunt fetches now (its catalog of the major clouds, refreshed by its authors, and the providers it
queries online), each resolved to a catalog GPU by the one resolver, priced in USD as gpuhunt gives them,
dated today. They are kept in gpuwise's cache with the time they were fetched and reused for
``MAX_AGE_S``; when a fetch fails (offline, a provider down) the last cached ones are used, said so, and
without any the shipped and user offers stand alone. AutoDL and the Chinese clouds are not in gpuhunt:
their shipped prices stay, dated and editable.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime, timezone

from gpuwise.atomic import write_text_atomic
from gpuwise.cachedir import user_cache_dir
from gpuwise.catalog.model import Catalog, CatalogError, Offer
from gpuwise.catalog.resolve import AmbiguousGpuName, resolve_gpu
from gpuwise.catalog.topology import provider_name, rents_per_gpu

log = logging.getLogger(__name__)

MAX_AGE_S = 6 * 3600          # SkyPilot refreshes its catalogs every few hours: so does this cache
MEMORY_MATCH = 0.15           # gpuhunt's GB against the catalog's GiB: a 24 GB RTX 4090 is 24 GiB


@dataclass(frozen=True)
class LiveOffers:
    offers: tuple[Offer, ...]
    fetched_at: float                 # Unix time of the fetch they come from
    from_cache: bool
    left_out: int                     # offers of GPUs the catalog cannot tell apart or does not have
    note: str = ""                    # what went wrong, when the offers are older than asked

    @property
    def fetched_iso(self) -> str:
        return datetime.fromtimestamp(self.fetched_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def cache_path():
    return user_cache_dir("offers", "live.json")


def _region(item) -> str:
    """The region a live offer's price holds in: gpuhunt's location at a cloud of fixed instance shapes, whose prices
    differ by region; none at a marketplace (``rents_per_gpu``: AutoDL, RunPod, Vast), whose locations are hosts and
    data centres, not regions a task launches in."""
    return "" if rents_per_gpu(str(item.provider)) else str(item.location or "")


def to_offers(catalog: Catalog, items: Iterable, *, checked: str, version: str) -> tuple[list[Offer], int]:
    """gpuhunt's ``CatalogItem``s as catalog offers (NVIDIA GPUs only), and how many were left out. Each offer's
    provider is spelt as the catalog spells it (``provider_name``: gpuhunt's "lambdalabs" is "lambda"), so that
    ``--provider lambda`` finds the shipped and the live offers alike."""
    offers, left_out = [], 0
    for item in items:
        gpu = _gpu_of(catalog, item)
        if gpu is None or not item.gpu_count or not item.price or item.price <= 0:
            left_out += 1
            continue
        where = " ".join(str(x) for x in (item.instance_name, item.location) if x)
        offers.append(Offer(provider=provider_name(str(item.provider)), gpu_id=gpu.id, count=int(item.gpu_count),
                            price_per_hour=float(item.price), currency="USD", spot=bool(item.spot),
                            source=f"gpuhunt {version}: {item.provider} {where}".strip(), checked=checked,
                            indicative=False, live=True, region=_region(item)))
    return offers, left_out


def _gpu_of(catalog: Catalog, item):
    """The catalog GPU of an item: its name, else its name with its memory ("A100" 80 GB -> a100-80gb);
    None for a name the catalog does not have or cannot tell apart (an H100 80GB: SXM or PCIe?)."""
    vendor = str(getattr(item.gpu_vendor, "value", item.gpu_vendor) or "nvidia").lower()
    if not item.gpu_name or vendor != "nvidia":
        return None
    names = [item.gpu_name]
    if item.gpu_memory:
        names.append(f"{item.gpu_name}-{round(item.gpu_memory)}gb")
    for name in names:
        try:
            gpu = resolve_gpu(catalog, name)
        except AmbiguousGpuName:
            continue
        except CatalogError:
            return None
        if item.gpu_memory and abs(gpu.memory_bytes / 2**30 - item.gpu_memory) > MEMORY_MATCH * item.gpu_memory:
            continue
        return gpu
    return None


def _default_query():
    try:
        import gpuhunt
    except ImportError:
        raise CatalogError("--live needs gpuhunt: pip install 'gpuwise[live]' (or pip install gpuhunt)") from None
    from importlib.metadata import version

    return (lambda: gpuhunt.query(gpu_vendor="nvidia", min_gpu_count=1)), version("gpuhunt")


def live_offers(catalog: Catalog, *, query: Callable[[], Iterable] | None = None, version: str | None = None,
                max_age_s: float = MAX_AGE_S, now: float | None = None) -> LiveOffers:
    """The live offers: from the cache when younger than ``max_age_s``, else fetched (``query``: gpuhunt's,
    by default) and cached; a failed fetch falls back to the cache of any age, else to none."""
    now = time.time() if now is None else now
    cached = _read_cache()
    if cached is not None and now - cached.fetched_at <= max_age_s:
        return cached
    if query is None:
        query, version = _default_query()
    try:
        items = list(query())
    except Exception as exc:  # noqa: BLE001 - any provider's failure: the cache or the shipped offers stand
        why = f"live offers could not be fetched ({type(exc).__name__}: {exc})"
        if cached is not None:
            return replace(cached, note=f"{why}; using those fetched {cached.fetched_iso}")
        return LiveOffers((), now, False, 0, f"{why}; only the shipped and your offers are used")
    checked = date.fromtimestamp(now).isoformat()
    offers, left_out = to_offers(catalog, items, checked=checked, version=version or "?")
    fresh = LiveOffers(tuple(offers), now, False, left_out)
    _write_cache(fresh)
    return fresh


def with_live_offers(catalog: Catalog, live: LiveOffers) -> Catalog:
    """The catalog with the live offers added beside the shipped and the user's."""
    known = {g.id for g in catalog.gpus}
    return replace(catalog, offers=catalog.offers + tuple(o for o in live.offers if o.gpu_id in known))


def _read_cache() -> LiveOffers | None:
    try:
        data = json.loads(cache_path().read_text())
        offers = tuple(Offer(**o) for o in data["offers"])
        return LiveOffers(offers, float(data["fetched_at"]), True, int(data.get("left_out", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(live: LiveOffers) -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps({"fetched_at": live.fetched_at, "left_out": live.left_out,
                                            "offers": [asdict(o) for o in live.offers]}))
    except OSError as exc:
        log.warning("live offers not cached at %s: %s", path, exc)
