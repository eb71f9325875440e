"""The catalog's data: GPU specs and price offers, kept apart (a price changes weekly, a spec never)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gpuwise.catalog.errors import CatalogError  # noqa: F401 (the catalog's error, importable beside its types)
from gpuwise.catalog.resolve import offers_for, resolve_gpu

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


# The process node (nm) of each architecture's chips: what a FLOP costs in energy falls with it, so it sets
# how far under its datasheet peak a power-capped card runs (runtime's power level). As the foundry names
# the node, except NVIDIA's own names: Ampere's GA100 (compute capability 8.0: A100, A30) is TSMC 7 nm,
# its GA10x chips (8.6, 8.7) Samsung 8 nm; Ada, Hopper and Blackwell are TSMC "4N"/"4NP", nodes of TSMC's
# N5 family, so 5. A GPU may give its own ``process_nm``.
PROCESS_NM_BY_ARCH = {"pascal": 16.0, "volta": 12.0, "turing": 12.0, "ampere": 8.0, "ada": 5.0, "hopper": 5.0,
                      "blackwell": 5.0}
GA100_PROCESS_NM = 7.0


def process_nm_of(arch: str, compute_capability: str) -> float | None:
    """The process node of a chip of ``arch`` (None for an architecture the rule does not know)."""
    if arch == "ampere" and compute_capability.startswith("8.0"):
        return GA100_PROCESS_NM
    return PROCESS_NM_BY_ARCH.get(arch)


def fp32_issue_lanes(compute_capability: str) -> float:
    """FP32 lanes per SM fed by the schedulers' single issue slots: 128 from compute capability 8.6 on
    (GA10x, Ada, Hopper, Blackwell: 32 FP32 lanes per scheduler, one warp instruction a clock, so a load
    takes a slot an FMA needed), 64 before (Volta, Turing, GA100: 16 lanes per scheduler, an FMA takes
    two clocks and leaves a slot for a load; Pascal's 32-lane schedulers dual-issue). From the compute
    capability, not ``cuda_cores / sm_count`` (a GP104 has 128 cores per SM and no such limit)."""
    major, _, minor = compute_capability.partition(".")
    try:
        cc = (int(major), int(minor or 0))
    except ValueError:
        return 64.0
    return 128.0 if cc >= (8, 6) else 64.0


# GDDR ECC stores its check bits in the DRAM: a T4's 16 GiB shows as 15,360 MiB, an L40S's 48 GiB as
# 46,068 MiB (46,080 less the driver's 12 MiB).
ECC_RESERVED_SHARE = 1 / 16


# How the GPUs of one machine are linked (``catalog.topology`` times collectives over each; topology.toml
# describes them): NVSwitch, an NVLink hybrid cube-mesh, NVLink bridges between pairs, PCIe with or without
# peer-to-peer.
INTRA_KINDS = ("nvswitch", "nvlink-mesh", "nvlink-bridge", "pcie-p2p", "pcie-host")
NVLINK_KINDS = ("nvswitch", "nvlink-mesh", "nvlink-bridge")


@dataclass(frozen=True)
class GPU:
    """One GPU model's datasheet. Rates are dense (no 2:4 sparsity), in TFLOPS (TOPS for int8).

    ``peak_tflops['fp16']``/``['bf16']`` are tensor-core rates with fp32 accumulation, which is what
    PyTorch uses (GeForce cards run these at half their fp16-accumulate rate). ``None`` where the GPU
    lacks the precision (no bf16 on T4/V100, no tf32 before Ampere).
    """

    id: str                      # canonical, lower-case: "a100-40gb-sxm4"
    name: str                    # human: "NVIDIA A100 40GB SXM4"
    arch: str                    # "turing", "volta", "ampere", "ada", "hopper", "blackwell"
    compute_capability: str      # "8.0"
    sm_count: int
    cuda_cores: int
    tensor_cores: int
    memory_bytes: int
    memory_bandwidth_gbs: float  # GB/s, decimal
    l2_bytes: int
    peak_tflops: Mapping[str, float | None]
    tdp_w: float
    pcie_gen: int
    nvlink_gbs: float | None     # total bidirectional NVLink bandwidth per GPU, GB/s; None without
    source: str
    aliases: tuple[str, ...] = ()
    nvml_names: tuple[str, ...] = ()
    form_factor: str = ""        # "SXM4", "PCIe", ...
    verified: bool = True        # False: datasheet figures not cross-checked
    notes: str = ""
    # Total memory as NVML / nvidia-smi report it (less than memory_bytes where ECC or the driver
    # reserves some: a T4 shows 15360 MiB of its 16 GiB); None where not recorded.
    nvml_memory_bytes: int | None = None
    # ECC on by default in GDDR memory (NVIDIA's data-center GDDR cards: T4, A10, L4, L40S...), so
    # ECC_RESERVED_SHARE of it is not visible. HBM keeps the check bits on the side; GeForce and RTX
    # workstation cards ship with ECC off.
    ecc_reserves_memory: bool = False
    # Process node in nm; None: the architecture's (``process_nm_of``).
    process_nm: float | None = None
    # A GeForce card (the driver disables PCIe peer-to-peer on them: ``catalog.topology``); None: from its names
    # (``is_geforce_name``). A variant (``based_on``) keeps its base's, whatever it is called.
    geforce: bool | None = None
    # The machine the user's cards of this GPU are in, where they know it (a user file's keys; the shipped
    # catalog leaves both None and names machines in topology.toml): how its GPUs are linked (one of
    # INTRA_KINDS) and how many one machine holds. None: topology.toml's machine, else ``topology.default_intra``.
    intra_link: str | None = None
    gpus_per_node: int | None = None
    # A variant's base GPU (a user file's ``based_on``, as its catalog id; the base's own base for a variant of a
    # variant): the same chip, so e.g. the accelerator a cloud rents for it. None: a GPU of its own.
    based_on: str | None = None

    def __post_init__(self) -> None:
        if self.process_nm is None:
            object.__setattr__(self, "process_nm", process_nm_of(self.arch, self.compute_capability))
        if self.geforce is None:
            object.__setattr__(self, "geforce", any(is_geforce_name(n) for n in (self.name, *self.nvml_names)))

    @property
    def fp32_lanes_per_sm(self) -> float:
        """FP32 lanes of one SM that share its schedulers' issue slots (``fp32_issue_lanes``)."""
        return fp32_issue_lanes(self.compute_capability)

    def peak(self, precision: str) -> float | None:
        return self.peak_tflops.get(precision)

    @property
    def boost_clock_hz(self) -> float:
        """The clock the datasheet's FP32 rate is quoted at: FP32 FLOP/s / (2 x CUDA cores), an FMA a core
        a clock (0 where either is unknown)."""
        fp32 = self.peak_tflops.get("fp32") or 0.0
        return fp32 * 1e12 / (2.0 * self.cuda_cores) if self.cuda_cores else 0.0

    @property
    def visible_memory_bytes(self) -> int:
        """What a process can see as total memory: the NVML figure where known, else the DRAM size less
        what ECC keeps (an L40 without a recorded figure shows what a recorded L40S does)."""
        if self.nvml_memory_bytes:
            return self.nvml_memory_bytes
        if self.ecc_reserves_memory:
            return int(self.memory_bytes * (1 - ECC_RESERVED_SHARE))
        return self.memory_bytes

    @property
    def has_bf16(self) -> bool:
        return self.peak_tflops.get("bf16") is not None

    def to_dict(self) -> dict[str, Any]:
        """The datasheet as plain JSON types: the GPU of `gpuwise gpus --json` (``gpu_record`` adds its offers)."""
        return {
            "id": self.id,
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "peak_tflops": {p: self.peak_tflops.get(p) for p in PRECISIONS},
            "nvml_names": list(self.nvml_names),
            "aliases": list(self.aliases),
            "arch": self.arch,
            "compute_capability": self.compute_capability,
            "form_factor": self.form_factor,
            "sm_count": self.sm_count,
            "cuda_cores": self.cuda_cores,
            "tensor_cores": self.tensor_cores,
            "l2_bytes": self.l2_bytes,
            "nvml_memory_bytes": self.nvml_memory_bytes,
            "visible_memory_bytes": self.visible_memory_bytes,
            "ecc_reserves_memory": self.ecc_reserves_memory,
            "tdp_w": self.tdp_w,
            "process_nm": self.process_nm,
            "pcie_gen": self.pcie_gen,
            "nvlink_gbs": self.nvlink_gbs,
            "geforce": self.geforce,
            "intra_link": self.intra_link,
            "gpus_per_node": self.gpus_per_node,
            "source": self.source,
            "based_on": self.based_on,
            "verified": self.verified,
            "notes": self.notes,
        }


def is_geforce_name(name: str) -> bool:
    """Whether a GPU's name (its display or NVML name) is a GeForce card's: "NVIDIA GeForce RTX 4090"."""
    return "geforce" in name.lower()


def not_a_gpu(value: object, *, optional: bool = False) -> str | None:
    """Why ``value`` is not a catalog GPU, in one line for the error of the part that was given it (None: it is
    one, or None where ``optional``). A GPU name is resolved by the catalog, not taken for a GPU."""
    if isinstance(value, GPU) or (optional and value is None):
        return None
    shown = repr(value) if isinstance(value, str) else type(value).__name__
    name = value if isinstance(value, str) else "a100-80gb"
    return (f"gpu must be a catalog GPU, not {shown}: gpuwise.catalog.resolve_gpu(load_catalog(), {name!r}) "
            "gives one")


@dataclass(frozen=True)
class Offer:
    """A price somebody asks for renting ``count`` of one GPU for an hour."""

    provider: str
    gpu_id: str
    count: int
    price_per_hour: float        # for all ``count`` GPUs together
    currency: str                # ISO code: "CNY", "USD"
    spot: bool
    source: str
    checked: str                 # ISO date the price was checked: "2026-11-20"
    indicative: bool = True      # shipped example price, not a live quote
    live: bool = False           # fetched now from a cloud's price list (gpuwise.catalog.live), not the user's own
    # Where the price holds: a cloud's region ("us-east-1"), whose prices differ from its other regions'; "" where
    # the provider asks one price everywhere (a marketplace, Lambda) or the offer does not say.
    region: str = ""

    @property
    def price_per_gpu_hour(self) -> float:
        return self.price_per_hour / self.count

    @property
    def own(self) -> bool:
        """A price of the user's own (a catalog file's): neither the shipped indicative list nor fetched live."""
        return not self.indicative and not self.live

    def age_days(self, today: datetime.date) -> int:
        """Days from the day the price was checked to ``today``."""
        return (today - datetime.date.fromisoformat(self.checked)).days

    def to_dict(self) -> dict[str, Any]:
        """The offer as plain JSON types: each offer of `gpuwise gpus --json`."""
        return {
            "provider": self.provider, "price_per_hour": self.price_per_hour, "currency": self.currency,
            "spot": self.spot, "source": self.source, "checked": self.checked,
            "count": self.count, "price_per_gpu_hour": round(self.price_per_gpu_hour, 6),
            "indicative": self.indicative, "live": self.live, "region": self.region or None,
        }


# A price checked longer ago than this is said to be old wherever it is shown or used (`gpus`, `recommend`,
# `report`): cloud prices move within months, and a shipped list ages with the release it came in.
STALE_PRICE_AGE_DAYS = 180


def today_date() -> datetime.date:
    """Today, as every dated rule of the catalog reads it (a price's age, a date in the future)."""
    return datetime.date.today()


def stale_price_note(offers: Iterable[Offer], today: datetime.date | None = None) -> str | None:
    """One line naming the prices among ``offers`` checked more than ``STALE_PRICE_AGE_DAYS`` before ``today``
    (default: ``today_date()``), oldest first; None where none is."""
    today = today or today_date()
    old = sorted({(o.checked, o.provider, o.gpu_id) for o in offers if o.age_days(today) > STALE_PRICE_AGE_DAYS})
    if not old:
        return None
    named = ", ".join(f"{provider} {gpu} ({checked})" for checked, provider, gpu in old[:3])
    more = f" and {len(old) - 3} more" if len(old) > 3 else ""
    return (f"price{'s' if len(old) > 1 else ''} checked more than {STALE_PRICE_AGE_DAYS} days ago: {named}{more}; "
            "prices change: put today's in your catalog file (docs/catalog.md)")


@dataclass(frozen=True)
class Catalog:
    """Every GPU datasheet and every price offer gpuwise knows: the shipped catalog plus the user's own
    (``gpuwise.catalog.load_catalog``). ``gpu(name)`` resolves any id, alias or NVML name (CatalogError with
    the closest names otherwise); ``offers_for(gpu_id)`` lists its prices, cheapest per GPU-hour first."""

    gpus: tuple[GPU, ...]
    offers: tuple[Offer, ...] = field(default=())

    def gpu(self, name: str) -> GPU:
        """The GPU called ``name`` (id, alias or NVML name); see :func:`gpuwise.catalog.resolve_gpu`."""
        return resolve_gpu(self, name)

    def offers_for(self, gpu: str, *, provider: str | None = None, spot: bool | None = None) -> list[Offer]:
        """Offers for one GPU, cheapest per GPU-hour first; see :func:`gpuwise.catalog.offers_for`."""
        return offers_for(self, gpu, provider=provider, spot=spot)
