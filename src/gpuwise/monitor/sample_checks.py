"""Physical ranges of a ``GpuSample``: what a reader accepts from a log it did not write.

A log edited by hand, cut by a full disk or written by another tool can hold 500 % utilisation, negative
memory, more memory used than the GPU has, or text where a number belongs; each would turn into
nonsense costs downstream. Readers call :func:`sample_problem` on every sample and name the row.
"""

from __future__ import annotations

import math
from dataclasses import fields

from gpuwise.monitor.sample import GpuSample
from gpuwise.units import format_bytes

MAX_GPU_MEMORY_BYTES = 2**44      # 16 TiB: far above any GPU (B300: 288 GB), far below a typo's 1e20
MAX_POWER_W = 10_000.0            # a GB200 superchip draws ~2.7 kW
_PERCENT = ("utilization_pct", "memory_util_pct", "sm_activity_pct", "sm_occupancy_pct")
_BYTES = ("memory_used_bytes", "memory_total_bytes", "process_memory_bytes", "memory_reserved_bytes")
_NON_NEGATIVE = ("sm_clock_mhz", "mem_clock_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
_TEXT = ("uuid", "name", "process_match")
_INTS = ("gpu_index", "mig_index", "process_count", "lost", "gpu_instance_id")
_NUMBERS = tuple(f.name for f in fields(GpuSample) if f.name not in _TEXT)


def _bytes(n: float) -> str:
    """Bytes in words that tell two small amounts apart (50 B, not 0.0 KiB)."""
    return f"{n:.0f} B" if n < 2**20 else format_bytes(n)


def sample_problem(s: GpuSample) -> str | None:
    """What is physically impossible about ``s`` (one phrase), or None when it is plausible."""
    for name in _NUMBERS:
        v = getattr(s, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{name} is {str(v)[:40]!r}, not a number"
        if not math.isfinite(v):
            return f"{name} is {v}, not a finite number"
        if name in _INTS and (v != int(v) or v < 0):
            return f"{name} is {v}, not a whole number >= 0"
    for name in _TEXT:
        v = getattr(s, name)
        if v is not None and not isinstance(v, str):
            return f"{name} is {type(v).__name__}, not text"
    for name in _PERCENT:
        v = getattr(s, name)
        if v is not None and not 0 <= v <= 100:
            return f"{name} is {v:g} %, outside 0-100 %"
    for name in _BYTES:
        v = getattr(s, name)
        if v is not None and not 0 <= v <= MAX_GPU_MEMORY_BYTES:
            return f"{name} is {v:g} bytes, outside 0 B-{format_bytes(MAX_GPU_MEMORY_BYTES)}"
    total = s.memory_total_bytes
    if total is not None:
        for name in ("memory_used_bytes", "process_memory_bytes"):
            v = getattr(s, name)
            if v is not None and v > total:
                return f"{name} {_bytes(v)} is more than memory_total_bytes {_bytes(total)}"
    if s.power_w is not None and not 0 <= s.power_w <= MAX_POWER_W:
        return f"power_w is {s.power_w:g} W, outside 0-{MAX_POWER_W:g} W"
    for name in _NON_NEGATIVE:
        v = getattr(s, name)
        if v is not None and v < 0:
            return f"{name} is {v:g}, negative"
    return None
