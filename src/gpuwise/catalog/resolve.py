"""One resolver for GPU names, used by every command: canonical id, alias, or the name NVML reports.

Names are compared by a key that ignores case, the vendor prefixes NVML adds ("NVIDIA ", "Tesla ",
"GeForce ") and the separators people type differently ('_', '-', spaces): so ``Tesla_T4``,
``t4``, ``NVIDIA A100-SXM4-40GB`` and ``a100 sxm4 40gb`` all find their GPU.

A family name that is not itself a name of one GPU (``a100``, ``v100``, ``h100``) is ambiguous: the
resolver never picks one of the family silently, it raises :class:`AmbiguousGpuName` listing them.
"""

from __future__ import annotations

import difflib
import re
from collections import OrderedDict
from typing import TYPE_CHECKING

from gpuwise.catalog.errors import CatalogError

if TYPE_CHECKING:   # the catalog's types (the catalog's methods resolve through this module)
    from gpuwise.catalog.model import GPU, Catalog, Offer

_PREFIXES = ("nvidia", "tesla", "geforce", "quadro")
# Planners resolve names in loops; a Catalog holds dicts and is unhashable, so its index is cached by
# identity, keeping the catalog alive alongside so that its id cannot be reused while cached.
_INDEX_CACHE: OrderedDict[int, tuple[Catalog, dict[str, GPU]]] = OrderedDict()
_INDEX_CACHE_SIZE = 8
_SEPARATORS = re.compile(r"[\s_\-]+")


def name_key(name: str) -> str:
    """The comparison key of a GPU name: lower case, vendor prefixes and separators removed."""
    words = _SEPARATORS.sub(" ", str(name).strip().lower()).split()
    while len(words) > 1 and words[0] in _PREFIXES:
        words = words[1:]
    return "".join(words)


def gpu_names(gpu: GPU) -> tuple[str, ...]:
    """Every name the GPU answers to, canonical id first."""
    return (gpu.id, gpu.name, *gpu.aliases, *gpu.nvml_names)


def name_index(gpus: tuple[GPU, ...] | list[GPU]) -> dict[str, GPU]:
    """key -> GPU. Raises CatalogError when two GPUs claim the same name (the catalog would be ambiguous)."""
    index: dict[str, GPU] = {}
    for gpu in gpus:
        for name in gpu_names(gpu):
            key = name_key(name)
            other = index.get(key)
            if other is not None and other.id != gpu.id:
                raise CatalogError(f"GPU name {name!r} of {gpu.id!r} is already a name of {other.id!r}")
            index[key] = gpu
    return index


class AmbiguousGpuName(CatalogError):
    """A name that starts the names of several GPUs (a family such as ``a100``); ``candidates``: their ids."""

    def __init__(self, name: str, candidates: tuple[str, ...]):
        self.name, self.candidates = name, candidates
        super().__init__(f"GPU name {name!r} is ambiguous: it could be {', '.join(candidates)} (name one of them)")


def resolve_gpu(catalog: Catalog, name: str) -> GPU:
    """The GPU called ``name`` exactly (id, alias, NVML name).

    Raises AmbiguousGpuName when ``name`` only starts the names of several GPUs, and CatalogError
    naming it, with the closest known GPUs, when it names none.
    """
    return lookup_gpu(_catalog_index(catalog), name)


def lookup_gpu(index: dict[str, GPU], name: str, *, otherwise: str | None = None) -> GPU:
    """:func:`resolve_gpu` over a :func:`name_index` (the catalog loader's, while it reads offers);
    ``otherwise`` replaces the hint of an unknown name that resembles none."""
    key = name_key(name)
    gpu = index.get(key)
    if gpu is not None:
        return gpu
    family = family_members(key, index)
    if len(family) > 1:
        raise AmbiguousGpuName(name, tuple(g.id for g in family))
    if len(family) == 1 and len(key) >= 3:
        return family[0]
    hint = suggest_gpus(name, index) if otherwise is None else suggest_gpus(name, index, otherwise=otherwise)
    raise CatalogError(f"unknown GPU {name!r}{hint}")


def family_members(key: str, index: dict[str, GPU]) -> list[GPU]:
    """The GPUs with a name whose key starts with ``key``, in catalog order (first seen)."""
    found: list[GPU] = []
    if not key:
        return found
    for other_key, gpu in index.items():
        if other_key.startswith(key) and gpu not in found:
            found.append(gpu)
    return found


def _catalog_index(catalog: Catalog) -> dict[str, GPU]:
    cached = _INDEX_CACHE.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        _INDEX_CACHE.move_to_end(id(catalog))
        return cached[1]
    index = name_index(catalog.gpus)
    _INDEX_CACHE[id(catalog)] = (catalog, index)
    while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
        _INDEX_CACHE.popitem(last=False)
    return index


def suggest_gpus(name: str, index: dict[str, GPU], otherwise: str = " (run `gpuwise gpus` to list the known GPUs)") -> str:
    """A ' (did you mean: ...?)' suffix naming the canonical ids closest to ``name``."""
    key = name_key(name)
    # a short name one character off ('t5', 'l5') scores 0.5: below the cutoff that keeps long names apart
    close = difflib.get_close_matches(key, list(index), n=8, cutoff=0.5 if len(key) <= 3 else 0.6)
    ids: list[str] = []
    for key in close:
        if index[key].id not in ids:
            ids.append(index[key].id)
    if not ids:
        return otherwise
    return f" (did you mean: {', '.join(ids[:3])}?)"


def offers_for(catalog: Catalog, gpu_id: str, *, provider: str | None = None, spot: bool | None = None) -> list[Offer]:
    """Offers for one GPU (any name that resolves), cheapest per GPU-hour first.

    ``provider`` matches case-insensitively; ``spot`` None means on-demand and spot alike.
    """
    gid = resolve_gpu(catalog, gpu_id).id
    found = [
        o for o in catalog.offers
        if o.gpu_id == gid
        and (provider is None or o.provider.lower() == provider.lower())
        and (spot is None or o.spot == spot)
    ]
    return sorted(found, key=offer_order)


def offer_order(offer: Offer) -> tuple[str, float, int, str]:
    """How offers are listed: by currency, then cheapest per GPU-hour first."""
    return (offer.currency, offer.price_per_gpu_hour, offer.count, offer.provider)
