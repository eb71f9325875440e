"""Sanity rules every GPU and offer in a catalog must pass, shipped or user-supplied.

Each rule returns problems as ``(key, what is wrong)`` pairs so that the loader can name the file and
the entry. The rules catch the mistakes datasheets invite: sparse tensor rates copied as dense, GB
typed where bytes were meant, a precision the architecture lacks.
"""

from __future__ import annotations

import math
import re
from datetime import date

from gpuwise.catalog.model import GPU, INTRA_KINDS, NVLINK_KINDS, PRECISIONS, Offer
from gpuwise.units import CNY_PER_UNIT

ARCHS = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")

# Dense fp16 tensor FLOPs per SM per clock (fp16 accumulate), by compute capability: the upper bound
# of what a GPU can do without 2:4 sparsity. A rate above bound x boost clock x SMs is a sparse
# headline copied as dense. (Pascal has no tensor cores: 2x its fp32 rate via half2.)
_DENSE_FP16_FLOP_PER_CLK_PER_SM = {
    "6.0": 256, "6.1": 256,
    "7.0": 1024, "7.5": 1024,
    "8.0": 2048, "8.6": 1024, "8.7": 1024, "8.9": 1024,
    "9.0": 4096,
    "10.0": 8192, "12.0": 1024,
}
# The boost clock implied by fp32 = cuda_cores x 2 x clock must look like a real GPU's.
_CLOCK_GHZ_RANGE = (0.5, 3.2)
_SLACK = 1.15  # tensor clocks can sit a little above the fp32 boost used to infer them

# Ordering of the rates every real GPU obeys (where it has both precisions).
_RATE_ORDER = (
    ("fp32", "tf32"), ("fp32", "fp16"), ("tf32", "fp16"), ("tf32", "bf16"),
    ("fp16", "fp8"), ("bf16", "fp8"), ("fp16", "int8"),
)

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
# What ``catalog.topology`` tells apart: an SXM board (NVSwitch with NVLink) or a PCIe card; empty: not given.
_FORM_FACTOR_RE = re.compile(r"^(?:PCIe|SXM\d*)?$", re.IGNORECASE)


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def gpu_problems(gpu: GPU) -> list[tuple[str, str]]:
    """Everything wrong with one GPU's datasheet; empty when it is sane."""
    problems: list[tuple[str, str]] = []
    add = problems.append
    if not _ID_RE.match(gpu.id):
        add(("id", f"{gpu.id!r} must be lower-case letters, digits, '.', '-'"))
    if not gpu.name.strip():
        add(("name", "must not be empty"))
    if not _FORM_FACTOR_RE.match(gpu.form_factor):
        add(("form_factor", f"{gpu.form_factor!r} is not PCIe or SXM (SXM2, SXM4, ...)"))
    if gpu.arch not in ARCHS:
        add(("arch", f"{gpu.arch!r} is not one of {', '.join(ARCHS)}"))
    if gpu.compute_capability not in _DENSE_FP16_FLOP_PER_CLK_PER_SM:
        add(("compute_capability", f"{gpu.compute_capability!r} is not a known compute capability"))
    for key in ("sm_count", "cuda_cores", "memory_bytes", "l2_bytes"):
        value = getattr(gpu, key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            add((key, f"must be a whole number > 0, got {value!r}"))
    if gpu.process_nm is not None and not 2 <= gpu.process_nm <= 65:
        add(("process_nm", f"{gpu.process_nm} nm is not a GPU process node (2-65 nm)"))
    if not isinstance(gpu.tensor_cores, int) or gpu.tensor_cores < 0:
        add(("tensor_cores", f"must be a whole number >= 0, got {gpu.tensor_cores!r}"))
    if _positive(gpu.memory_bytes) and not 1 * 2**30 <= gpu.memory_bytes <= 1024 * 2**30:
        add(("memory_bytes", f"{gpu.memory_bytes} is not between 1 GiB and 1 TiB: a unit mix-up?"))
    nvml = gpu.nvml_memory_bytes
    if nvml is not None and _positive(gpu.memory_bytes) and not 0.85 * gpu.memory_bytes <= nvml <= gpu.memory_bytes:
        add(("nvml_memory_bytes", f"{nvml} is not between 85% and 100% of memory_bytes {gpu.memory_bytes}"))
    if _positive(gpu.l2_bytes) and not 256 * 2**10 <= gpu.l2_bytes <= 512 * 2**20:
        add(("l2_bytes", f"{gpu.l2_bytes} is not between 256 KiB and 512 MiB: a unit mix-up?"))
    if not _positive(gpu.memory_bandwidth_gbs) or not 50 <= gpu.memory_bandwidth_gbs <= 20_000:
        add(("memory_bandwidth_gbs", f"{gpu.memory_bandwidth_gbs!r} GB/s is not between 50 and 20000"))
    if not _positive(gpu.tdp_w) or not 20 <= gpu.tdp_w <= 2000:
        add(("tdp_w", f"{gpu.tdp_w!r} W is not between 20 and 2000"))
    if gpu.pcie_gen not in (3, 4, 5, 6):
        add(("pcie_gen", f"{gpu.pcie_gen!r} is not 3, 4, 5 or 6"))
    if gpu.nvlink_gbs is not None and (not _positive(gpu.nvlink_gbs) or gpu.nvlink_gbs > 3600):
        add(("nvlink_gbs", f"{gpu.nvlink_gbs!r} GB/s is not between 0 and 3600 (omit it when there is no NVLink)"))
    if gpu.intra_link is not None and gpu.intra_link not in INTRA_KINDS:
        add(("intra_link", f"{gpu.intra_link!r} is not one of {', '.join(INTRA_KINDS)}"))
    elif gpu.intra_link in NVLINK_KINDS and not gpu.nvlink_gbs:
        add(("intra_link", f"{gpu.intra_link} needs the GPU's NVLink rate: give nvlink_gbs"))
    if gpu.gpus_per_node is not None and (isinstance(gpu.gpus_per_node, bool) or not isinstance(gpu.gpus_per_node, int)
                                          or not 1 <= gpu.gpus_per_node <= 64):
        add(("gpus_per_node", f"{gpu.gpus_per_node!r} is not a whole number of GPUs from 1 to 64"))
    if not gpu.source.strip():
        add(("source", "every GPU needs a source (datasheet URL or citation)"))
    problems.extend(_rate_problems(gpu))
    return problems


def _rate_problems(gpu: GPU) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    rates = gpu.peak_tflops
    unknown = sorted(set(rates) - set(PRECISIONS))
    if unknown:
        problems.append(("peak_tflops", f"unknown precision(s) {', '.join(unknown)} (use {', '.join(PRECISIONS)})"))
    for p in PRECISIONS:
        v = rates.get(p)
        if v is not None and (not _positive(v) or v > 50_000):
            problems.append((f"peak_tflops.{p}", f"{v!r} is not a rate between 0 and 50000 TFLOPS"))
    if not _positive(rates.get("fp32")):
        problems.append(("peak_tflops.fp32", "every GPU has an fp32 rate"))
        return problems
    if any(p for p in problems if p[0].startswith("peak_tflops")):
        return problems
    for low, high in _RATE_ORDER:
        a, b = rates.get(low), rates.get(high)
        if a is not None and b is not None and a > b * 1.001:
            problems.append((f"peak_tflops.{low}", f"{a} exceeds {high} {b}: dense rates rise as precision falls"))
    # Architecture rules: what the hardware cannot do, it must not claim.
    if gpu.arch in ("pascal", "volta", "turing"):
        for p in ("tf32", "bf16"):
            if rates.get(p) is not None:
                problems.append((f"peak_tflops.{p}", f"{gpu.arch} has no {p} (use null)"))
    if gpu.arch in ("pascal", "volta", "turing", "ampere") and rates.get("fp8") is not None:
        problems.append(("peak_tflops.fp8", f"{gpu.arch} has no fp8 (use null)"))
    problems.extend(_dense_bound_problems(gpu))
    return problems


def _dense_bound_problems(gpu: GPU) -> list[tuple[str, str]]:
    """A rate above what the SMs can issue at the implied clock is a sparse (2:4) figure."""
    per_sm = _DENSE_FP16_FLOP_PER_CLK_PER_SM.get(gpu.compute_capability)
    if per_sm is None or not _positive(gpu.cuda_cores) or not _positive(gpu.sm_count):
        return []
    clock_ghz = gpu.boost_clock_hz / 1e9
    if not _CLOCK_GHZ_RANGE[0] <= clock_ghz <= _CLOCK_GHZ_RANGE[1]:
        return [("peak_tflops.fp32", f"{gpu.peak_tflops['fp32']} TFLOPS over {gpu.cuda_cores} CUDA cores "
                 f"implies a {clock_ghz:.2f} GHz clock: check cores or rate")]
    fp16_bound = per_sm * gpu.sm_count * clock_ghz * 1e-3 * _SLACK
    problems = []
    for p, factor in (("fp16", 1), ("bf16", 1), ("tf32", 0.5), ("fp8", 2), ("int8", 2)):
        v = gpu.peak_tflops.get(p)
        if v is not None and v > fp16_bound * factor:
            problems.append((f"peak_tflops.{p}", f"{v} exceeds the dense bound {fp16_bound * factor:.0f} for "
                             f"{gpu.sm_count} SMs of sm_{gpu.compute_capability.replace('.', '')}: a sparse figure?"))
    return problems


def _is_date(text: str) -> bool:
    """An ISO calendar date that exists: 2026-11-20, not 2026-13-01 or 2026-02-30."""
    if not _DATE_RE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def offer_problems(offer: Offer, *, today: date | None = None) -> list[tuple[str, str]]:
    """(key, what is wrong) for each rule the offer breaks. ``today``: a ``checked`` date after it is refused (a
    price cannot have been seen in the future); None skips that rule (the shipped list, whatever the clock says)."""
    problems: list[tuple[str, str]] = []
    add = problems.append
    if not offer.provider.strip():
        add(("provider", "must not be empty"))
    if not isinstance(offer.count, int) or isinstance(offer.count, bool) or not 1 <= offer.count <= 64:
        add(("count", f"must be a whole number from 1 to 64, got {offer.count!r}"))
    if not _positive(offer.price_per_hour):
        add(("price_per_hour", f"must be a price > 0, got {offer.price_per_hour!r}"))
    if not _CURRENCY_RE.match(offer.currency):
        add(("currency", f"{offer.currency!r} is not an ISO currency code like CNY or USD"))
    elif offer.currency not in CNY_PER_UNIT:
        add(("currency", f"{offer.currency!r} has no exchange rate; known currencies: {', '.join(sorted(CNY_PER_UNIT))}"))
    if not _is_date(offer.checked):
        add(("checked", f"{offer.checked!r} is not a date (ISO, like 2026-11-20)"))
    elif today is not None and date.fromisoformat(offer.checked) > today:
        add(("checked", f"{offer.checked} is in the future (today is {today.isoformat()})"))
    if not offer.source.strip():
        add(("source", "every offer needs a source (where the price was seen)"))
    return problems
