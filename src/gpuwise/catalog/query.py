"""Choosing and ordering catalog rows, and their JSON form: what `gpuwise gpus` shows, without the CLI.

Prices are not compared here: the one offer picker and ranking currency live in ``gpuwise.plan.offers``
(``gpus --sort price`` sorts with them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwise.catalog.model import GPU, Catalog, CatalogError, Offer
from gpuwise.catalog.resolve import known_provider, offers_for, providers, resolve_gpu
from gpuwise.catalog.topology import provider_entry
from gpuwise.errors import did_you_mean

SORT_KEYS = ("price", "memory", "fp16")
# A GPU this close under a memory threshold is named where it is left out: "80 GB" cards include the H100 SXM's
# 79.6 GiB (what its driver reports), which an exact ``--min-memory 80GiB`` leaves out.
NEAR_MISS_FRACTION = 0.02


@dataclass(frozen=True)
class GpuRow:
    gpu: GPU
    offers: tuple[Offer, ...]  # cheapest per GPU-hour first, within each currency


def memory_gib_shown(n_bytes: int) -> float:
    """Memory in GiB as the `GiB` column shows it, what ``--min-memory`` compares (of the
    memory the driver reports, ``GPU.visible_memory_bytes``): whole where it is within 0.05 GiB of a whole number
    (an RTX 4090's 23.988 GiB is 24), else to a tenth (an A10's 22.5)."""
    gib = n_bytes / 2**30
    return float(round(gib)) if abs(gib - round(gib)) < 0.05 else round(gib, 1)


def select_gpus(
    catalog: Catalog,
    names: list[str] | tuple[str, ...] = (),
    *,
    min_memory_bytes: int | None = None,
    provider: str | None = None,
    spot: bool | None = None,
    sort: str | None = None,
) -> list[GpuRow]:
    """The GPUs named (all when none), filtered, each with its offers, ordered by ``sort``.

    ``sort`` (``check_sort``): 'memory' or 'fp16' (largest first); 'price' is accepted and left to the caller (it
    needs the plan's offer picker); None keeps the named order, or the catalog's order. With ``provider`` only its offers are kept, and, unless
    GPUs were named, only the GPUs it offers. Memory is the memory the driver reports, as the GiB column shows it
    (``memory_gib_shown``): a 24 GiB card that reports 23.988 GiB has 24 GiB for ``min_memory_bytes``.
    """
    sort = check_sort(sort)
    rows = [r for r in _candidate_rows(catalog, names, provider, spot)
            if min_memory_bytes is None or has_min_memory(r.gpu, min_memory_bytes)]
    return sort_rows(rows, sort)


def has_min_memory(gpu: GPU, min_memory_bytes: int) -> bool:
    """Whether ``gpu`` has at least ``min_memory_bytes`` as the GiB column shows it (``memory_gib_shown``)."""
    return memory_gib_shown(gpu.visible_memory_bytes) >= min_memory_bytes / 2**30


def left_out_by_memory(
    catalog: Catalog,
    names: list[str] | tuple[str, ...] = (),
    *,
    min_memory_bytes: int,
    provider: str | None = None,
    spot: bool | None = None,
) -> list[GPU]:
    """The GPUs ``select_gpus`` would show with the same arguments but for ``min_memory_bytes``, largest memory
    first: what a note names (the largest, where none is left; those just under, ``near_threshold``)."""
    left = [r.gpu for r in _candidate_rows(catalog, names, provider, spot)
            if not has_min_memory(r.gpu, min_memory_bytes)]
    return sorted(left, key=lambda g: -g.visible_memory_bytes)


def near_threshold(gpus: list[GPU], min_memory_bytes: int) -> list[GPU]:
    """Those of ``gpus`` (left out by ``min_memory_bytes``) that show less by under ``NEAR_MISS_FRACTION`` of it."""
    floor_gib = min_memory_bytes / 2**30 * (1 - NEAR_MISS_FRACTION)
    return [g for g in gpus if memory_gib_shown(g.visible_memory_bytes) >= floor_gib]


def _candidate_rows(
    catalog: Catalog, names: list[str] | tuple[str, ...], provider: str | None, spot: bool | None
) -> list[GpuRow]:
    """The GPUs named (all when none), each with its offers, before any memory filter: with ``provider`` only its
    offers, and, unless GPUs were named, only the GPUs it offers."""
    if provider is not None:
        provider = check_provider(catalog, provider)
    gpus: list[GPU] = []
    for name in names:
        gpu = resolve_gpu(catalog, name)
        if gpu not in gpus:
            gpus.append(gpu)
    if not names:
        gpus = list(catalog.gpus)
    rows = []
    for gpu in gpus:
        offers = tuple(offers_for(catalog, gpu.id, provider=provider, spot=spot))
        if provider is not None and not offers and not names:  # a GPU asked for by name stays
            continue
        rows.append(GpuRow(gpu, offers))
    return rows


def check_provider(catalog: Catalog, provider: str) -> str:
    """``--provider`` as the catalog spells it (``known_provider``; an alias in the topology data, such as gpuhunt's
    "lambdalabs", finds its provider's offers), or CatalogError with the option's prefix, as every option's error
    has: "unknown provider" with suggestions for a name nobody knows; for a provider the topology data knows (Azure,
    Vast.ai) that no offer names, where its prices come from (--live, or an [[offer]] of yours); a list of several
    ("runpod,aws", read as one name, got a misleading "did you mean") is refused as such."""
    if "," in provider:
        raise CatalogError(f"--provider takes one provider, not a list: {provider.strip()!r}; leave --provider out to "
                           "compare every provider's offers")
    try:
        return known_provider(catalog, provider)
    except CatalogError as exc:
        entry = provider_entry(provider)
        if entry is None:
            raise CatalogError(f"--provider: {exc}") from None
        spelt = next((p for p in providers(catalog) if provider_entry(p) == entry), None)   # "vast" for "vastai"
        if spelt is not None:
            return spelt
        raise CatalogError(
            f"--provider: no offer from {entry['name']} in the catalog: add --live for the clouds' offers of now, or "
            f"your prices as [[offer]] tables in your catalog file (docs/catalog.md); providers with offers: "
            f"{', '.join(providers(catalog))}") from None


def check_sort(sort: str | None) -> str | None:
    """The sort key as ``SORT_KEYS`` spell it (any case, spaces around ignored); CatalogError when unknown."""
    if sort is None:
        return None
    key = sort.strip().lower()
    if key not in SORT_KEYS:
        raise CatalogError(f"--sort: unknown sort key {sort!r}{did_you_mean(sort, SORT_KEYS) or ' (use price, memory or fp16)'}")
    return key


def sort_rows(rows: list[GpuRow], sort: str | None) -> list[GpuRow]:
    """'memory': the memory the driver reports, largest first (so the GiB column, ``memory_gib_shown``, never
    rises); 'fp16': the dense fp16 rate."""
    if sort == "memory":
        return sorted(rows, key=lambda r: (-r.gpu.visible_memory_bytes, -(r.gpu.peak("fp16") or 0)))
    if sort == "fp16":
        return sorted(rows, key=lambda r: (-(r.gpu.peak("fp16") or 0), -r.gpu.visible_memory_bytes))
    return rows


def offer_record(offer: Offer) -> dict[str, Any]:
    """The JSON form of one offer (``Offer.to_dict``)."""
    return offer.to_dict()


def gpu_record(gpu: GPU, offers: tuple[Offer, ...] | list[Offer] = ()) -> dict[str, Any]:
    """The JSON form of one GPU (the `gpuwise gpus --json` contract, plus the rest of the datasheet):
    ``GPU.to_dict`` with its ``offers`` after its ``nvml_names``."""
    items = list(gpu.to_dict().items())
    at = [k for k, _ in items].index("nvml_names") + 1
    return dict(items[:at] + [("offers", [o.to_dict() for o in offers])] + items[at:])
