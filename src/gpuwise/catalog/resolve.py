"""One resolver for GPU names, used by every command: canonical id, alias, or the name NVML reports.

Names are compared by a key that ignores case, the vendor prefixes NVML adds ("NVIDIA ", "Tesla ",
"GeForce ") and the separators people type differently ('_', '-', spaces): so ``Tesla_T4``,
``t4``, ``NVIDIA A100-SXM4-40GB`` and ``a100 sxm4 40gb`` all find their GPU.

A family name that is not itself a name of one GPU (``a100``, ``v100``, ``h100``) is ambiguous: the
resolver never picks one of the family silently, it raises :class:`AmbiguousGpuName` listing them. A
name that starts the names of one GPU only is a shortening and finds it (``a100-80gb-s``), unless it
is a whole model number that the GPU's name goes on with letters after (``RTX 4070`` is not the RTX
4070 Ti, ``Quadro RTX 6000`` not the RTX 6000 Ada): that names another model, which the catalog lacks.

A MIG slice (``NVIDIA A100-SXM4-40GB MIG 1g.5gb``, as NVML names it) resolves to its parent GPU and the
slice (:func:`resolve_mig`); :func:`resolve_gpu` gives the slice as a GPU of its own (:func:`slice_gpu`).
"""

from __future__ import annotations

import difflib
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuwise.catalog.errors import CatalogError
from gpuwise.errors import did_you_mean
from gpuwise.units import MONEY_DECIMALS

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


class UnknownGpuName(CatalogError):
    """A name no GPU of the catalog answers to; ``resembles``: whether the message suggests known ones."""

    def __init__(self, name: str, hint: str, *, resembles: bool):
        self.name, self.resembles = name, resembles
        super().__init__(f"unknown GPU {name!r}{hint}")


def resolve_gpu(catalog: Catalog, name: str) -> GPU:
    """The GPU called ``name`` exactly (id, alias, NVML name); a MIG slice's name gives the slice as a GPU
    (:func:`slice_gpu`: the slice's memory, its share of the parent's compute).

    Raises AmbiguousGpuName when ``name`` only starts the names of several GPUs, and CatalogError
    naming it, with the closest known GPUs, when it names none.
    """
    return gpu_by_name(_catalog_index(catalog), name)


def gpu_by_name(index: dict[str, GPU], name: str, *, otherwise: str | None = None) -> GPU:
    """:func:`resolve_gpu` over a :func:`name_index` (the catalog loader's, while it reads a file): a slice's
    name gives the slice as a GPU; ``otherwise`` as :func:`lookup_gpu`'s."""
    gpu, mig = mig_by_name(index, name, otherwise=otherwise)
    return gpu if mig is None else slice_gpu(gpu, mig)


# MIG: NVML names a slice "<GPU name> MIG <profile>". The profile "<g>g.<m>gb" is a GPU instance of g
# compute slices and m GB; "<c>c.<g>g.<m>gb" a compute instance of c of those g slices (the process runs on
# c, the memory is the instance's); "+me" adds media engines. The slice's own id, "<gpu id>-mig-<profile>",
# is such a name too, so a slice's id resolves back to it.
_MIG_NAME = re.compile(
    r"^(?P<gpu>.*?\S)[\s_\-]+mig[\s_\-]+(?P<profile>(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?:\+me)?)$",
    re.IGNORECASE)
_MIG_COMPUTE_CAPABILITIES = ("8.0", "9.0", "10.0")     # GA100, GH100, GB100/GB200: the data-centre chips with MIG
_MIG_FOUR_SLICE_IDS = ("a30",)                         # an A30 splits into 4 compute slices; the others into 7


@dataclass(frozen=True)
class MigSlice:
    """A MIG slice of one catalog GPU: ``compute_slices`` of its ``gpu_compute_slices`` and the profile's memory.

    ``memory_bytes`` is the profile's "<m>gb" read as decimal GB, a little less than what NVML shows for the
    slice (1g.5gb: 4864 MiB, 5.1 GB), never more: a fit against it is on the safe side.
    """

    gpu_id: str                  # the parent GPU's catalog id
    profile: str                 # as NVML names it: "1g.5gb", "1c.3g.20gb", "1g.10gb+me"
    compute_slices: int          # the slices the process runs on (c of a compute instance, else g)
    gpu_compute_slices: int      # the parent's: 7 (4 on an A30)
    memory_bytes: int
    memory_fraction: float       # of the parent's memory, bandwidth and L2 (MIG splits them with the memory)

    @property
    def compute_fraction(self) -> float:
        """The slice's share of the parent's SMs, tensor cores and peak rates."""
        return self.compute_slices / self.gpu_compute_slices

    def describe(self) -> str:
        """E.g. "MIG slice 1g.5gb of a100-40gb-sxm4: 5 GB, 1/7 of its compute"."""
        return (f"MIG slice {self.profile} of {self.gpu_id}: {self.memory_bytes / 1e9:.0f} GB, "
                f"{self.compute_slices}/{self.gpu_compute_slices} of its compute")


def split_mig_name(name: str) -> tuple[str, str | None]:
    """(the GPU's name, the MIG profile) of a slice's name; (name, None) for a whole GPU's."""
    match = _MIG_NAME.match(str(name).strip())
    return (match["gpu"], match["profile"].lower()) if match else (name, None)


def mig_slice(gpu: GPU, profile: str) -> MigSlice:
    """The slice ``profile`` of ``gpu``; CatalogError when the GPU has no MIG or no such slice."""
    match = _MIG_NAME.match(f"gpu MIG {profile}")
    if match is None:
        raise CatalogError(f"MIG profile {profile!r} is not of the form 1g.5gb or 1c.3g.20gb")
    if gpu.compute_capability not in _MIG_COMPUTE_CAPABILITIES:
        raise CatalogError(f"{gpu.id} has no MIG (only A30, A100/A800, H100/H800/H20/H200 and B200 do)")
    total = 4 if gpu.id in _MIG_FOUR_SLICE_IDS else 7
    g = int(match["g"])
    c = int(match["c"]) if match["c"] else g
    gpu_gb = round(gpu.memory_bytes / 2**30)     # the size a profile's "gb" counts in: 40 on an A100 40GB
    gb = int(match["gb"])
    if not 1 <= c <= g <= total or not 1 <= gb <= gpu_gb:
        raise CatalogError(f"MIG profile {profile!r} does not fit {gpu.id} ({total} compute slices, {gpu_gb} GB)")
    return MigSlice(gpu_id=gpu.id, profile=profile.lower(), compute_slices=c, gpu_compute_slices=total,
                    memory_bytes=gb * 10**9, memory_fraction=gb / gpu_gb)


def resolve_mig(catalog: Catalog, name: str) -> tuple[GPU, MigSlice | None]:
    """(the GPU, the MIG slice or None): a slice's name gives its parent GPU and the slice; CatalogError as
    :func:`resolve_gpu`, and when the profile is not one of that GPU's."""
    return mig_by_name(_catalog_index(catalog), name)


def mig_by_name(index: dict[str, GPU], name: str, *, otherwise: str | None = None) -> tuple[GPU, MigSlice | None]:
    """:func:`resolve_mig` over a :func:`name_index`; ``otherwise`` as :func:`lookup_gpu`'s."""
    base, profile = split_mig_name(name)
    gpu = lookup_gpu(index, base, otherwise=otherwise)
    if profile is None:
        return gpu, None
    try:
        return gpu, mig_slice(gpu, profile)
    except CatalogError as exc:
        raise CatalogError(f"GPU name {name!r}: {exc}") from None


def slice_gpu(gpu: GPU, mig: MigSlice) -> GPU:
    """The slice as a GPU of its own: the slice's memory; the parent's SMs, cores, peak rates and power scaled
    by the compute fraction (the clock stays), its bandwidth and L2 by the memory fraction; no NVLink (MIG
    slices do not use it). What a fit or a step time on the slice reads; the catalog has no offer for it."""
    f_c, f_m = mig.compute_fraction, mig.memory_fraction

    def part(n: int, share: float) -> int:
        return max(1, round(n * share))

    return replace(
        gpu, id=f"{gpu.id}-mig-{mig.profile}", name=f"{gpu.name} MIG {mig.profile}", aliases=(), nvml_names=(),
        sm_count=part(gpu.sm_count, f_c), cuda_cores=part(gpu.cuda_cores, f_c),
        tensor_cores=part(gpu.tensor_cores, f_c),
        peak_tflops={p: None if v is None else v * f_c for p, v in gpu.peak_tflops.items()},
        tdp_w=gpu.tdp_w * f_c, memory_bytes=mig.memory_bytes, nvml_memory_bytes=None, ecc_reserves_memory=False,
        memory_bandwidth_gbs=gpu.memory_bandwidth_gbs * f_m, l2_bytes=part(gpu.l2_bytes, f_m), nvlink_gbs=None,
        verified=False, notes=f"{mig.describe()}; the GPU's datasheet scaled to the slice",
    )


def is_mig_slice(gpu: GPU) -> bool:
    """Whether ``gpu`` is a MIG slice made by :func:`slice_gpu` (its id, "<gpu id>-mig-<profile>")."""
    return is_mig_slice_id(gpu.id)


def mig_count_refusal(gpu: GPU, count: int) -> str | None:
    """Why one job cannot span ``count`` GPUs like ``gpu`` (None: it can, or ``count`` is 1): ``gpu`` is a MIG
    slice. A process sees one slice (docs/catalog.md), slices have no peer-to-peer, and NCCL, which tensor- and
    pipeline-parallel serving and multi-GPU training (data-parallel and sharded alike) communicate through, runs no
    collective across slices: the rule by which recommend rents a slice one at a time, never x N (plan.offers), and
    ``plan.profile.cannot_run`` refuses such a job by."""
    if count <= 1 or not is_mig_slice(gpu):
        return None
    return (f"--num-gpus {count} on {gpu.id}: a MIG slice is one device to one process, with no peer-to-peer and "
            "no NCCL collective across slices, so neither tensor-parallel serving nor multi-GPU training spans "
            "slices; run --num-gpus 1 on the slice, or whole GPUs")


def is_mig_slice_id(gpu_id: str) -> bool:
    """Whether a catalog id (an offer's ``gpu_id``) is a MIG slice's, "<gpu id>-mig-<profile>"."""
    return "-mig-" in gpu_id


def lookup_gpu(index: dict[str, GPU], name: str, *, otherwise: str | None = None) -> GPU:
    """A whole GPU's name over a :func:`name_index` (:func:`gpu_by_name` reads a MIG slice's name first);
    ``otherwise`` replaces the hint of an unknown name that resembles none."""
    key = name_key(name)
    gpu = index.get(key)
    if gpu is not None:
        return gpu
    family = family_members(key, index)
    if len(family) > 1:
        raise AmbiguousGpuName(name, tuple(g.id for g in family))
    if len(family) == 1 and len(key) >= 3 and not names_another_model(key, index):
        return family[0]
    hint = suggest_gpus(name, index) if otherwise is None else suggest_gpus(name, index, otherwise=otherwise)
    raise UnknownGpuName(name, hint, resembles=bool(suggest_gpus(name, index, otherwise="")))


def family_members(key: str, index: dict[str, GPU]) -> list[GPU]:
    """The GPUs with a name whose key starts with ``key``, in catalog order (first seen). A MIG slice a catalog
    prices (its offer adds it) is no member: it is named in full, by its GPU's name and profile."""
    found: list[GPU] = []
    if not key:
        return found
    for other_key, gpu in index.items():
        if other_key.startswith(key) and not is_mig_slice(gpu) and gpu not in found:
            found.append(gpu)
    return found


def names_another_model(key: str, index: dict[str, GPU]) -> bool:
    """Whether ``key``, which only starts names of the catalog, is a whole model number that a name goes on
    with letters after: a variant suffix (Ti, SUPER, D, Ada, S) makes another model, so ``rtx4070`` is not
    ``rtx4070ti`` and ``rtx6000`` (Quadro RTX 6000) not ``rtx6000ada``. A shortening that stops inside a
    word or a number (``a10080gbs``, ``408``) is no model's name and may find the one GPU it starts; so is one
    that ends in a memory size the name goes on with its unit (``l40s48`` -> ``l40s48gb``: "gb" is no variant)."""
    if not key[-1].isdigit():
        return False
    return any(k.startswith(key) and k[len(key)].isalpha() and not k[len(key):].startswith("gb")
               for k in index if len(k) > len(key))


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


def provider_key(provider: str) -> str:
    """How provider names compare: case and surrounding spaces ignored ("AutoDL" is "autodl"). The one rule of
    an offer's identity (a user's offer replaces the shipped one), ``--provider`` and the planner's own prices."""
    return str(provider).strip().lower()


def providers(catalog: Catalog) -> list[str]:
    """The catalog's providers, one spelling each (the first an offer uses), in alphabetical order."""
    spelt: dict[str, str] = {}
    for o in catalog.offers:
        spelt.setdefault(provider_key(o.provider), o.provider)
    return [spelt[k] for k in sorted(spelt)]


def catalog_provider(catalog: Catalog, provider: str) -> str | None:
    """The provider as the catalog spells it (any case, spaces around ignored); None when it has no offers.
    The one matching rule of ``gpus --provider``, ``offers_for`` and the planner's offer picker."""
    wanted = provider_key(provider)
    return next((p for p in providers(catalog) if provider_key(p) == wanted), None)


def known_provider(catalog: Catalog, provider: str) -> str:
    """``catalog_provider``, or CatalogError naming the closest and the known providers (a typo is not 'no
    offers')."""
    spelt = catalog_provider(catalog, provider)
    if spelt is not None:
        return spelt
    known = providers(catalog)
    raise CatalogError(f"unknown provider {provider!r}{did_you_mean(provider.strip(), known)}; known: {', '.join(known)}")


def offers_for(catalog: Catalog, gpu_id: str, *, provider: str | None = None, spot: bool | None = None) -> list[Offer]:
    """Offers for one GPU (any name that resolves), cheapest per GPU-hour first.

    ``provider`` matches case-insensitively (CatalogError where the catalog has no such provider); ``spot``
    None means on-demand and spot alike.
    """
    gid = resolve_gpu(catalog, gpu_id).id
    if provider is not None:
        known_provider(catalog, provider)
    found = [
        o for o in catalog.offers
        if o.gpu_id == gid
        and (provider is None or provider_key(o.provider) == provider_key(provider))
        and (spot is None or o.spot == spot)
    ]
    return sorted(found, key=offer_order)


def offer_order(offer: Offer) -> tuple[str, float, int, float, str]:
    """How offers are listed: by currency, then cheapest per GPU-hour first as the price is shown (to the cent,
    ``MONEY_DECIMALS``), the fewest GPUs first among equal ones: GCP's a2-highgpu 1, 2, 4 and 8 GPUs at $3.67 each,
    not 1, 4, 8, 2 by fractions of a cent no column shows."""
    return (offer.currency, round(offer.price_per_gpu_hour, MONEY_DECIMALS), offer.count, offer.price_per_gpu_hour,
            offer.provider)
