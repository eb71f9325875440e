"""Replays a trace's allocation events through the caching-allocator model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from gpuwise.memory.allocator import AllocatorConfig, Block, CachingAllocator
from gpuwise.trace.records import MemoryEvent


@dataclass(frozen=True)
class ReplayResult:
    """Allocator statistics over a whole event sequence.

    Byte counts are the allocator's: block sizes after rounding (and unsplit remainders), so
    ``sum(category_bytes_at_peak.values()) == peak_allocated_bytes``.
    """

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_index: int                                   # event index right after which allocated peaked
    category_bytes_at_peak: Mapping[str, int]
    module_bytes_at_peak: Mapping[str, Mapping[str, int]]   # module -> category -> bytes
    activation_peak_index: int                        # where the ``activation_categories`` peaked
    activation_bytes_at_peak: int                     # ... and their bytes there
    module_bytes_at_activation_peak: Mapping[str, Mapping[str, int]]
    timeline: tuple[tuple[int, int, int], ...]        # (seq, allocated, reserved), downsampled
    final_allocated_bytes: int
    final_reserved_bytes: int
    oom_count: int = 0
    cache_flush_count: int = 0
    unmatched_frees: int = 0
    notes: tuple[str, ...] = field(default=())


def replay(
    events: Sequence[MemoryEvent],
    config: AllocatorConfig = AllocatorConfig(),
    *,
    timeline_points: int = 400,
    activation_categories: tuple[str, ...] = ("activations", "inputs"),
) -> ReplayResult:
    alloc = CachingAllocator(config)
    live: dict[int, Block] = {}
    block_bytes = [0] * len(events)          # allocator bytes of each alloc event
    allocated = [0] * len(events)
    reserved = [0] * len(events)
    peak_alloc = peak_res = 0
    peak_index = -1
    unmatched = 0
    act = act_peak = 0
    act_index = -1
    act_cats = frozenset(activation_categories)
    malloc, free = alloc.malloc, alloc.free
    for i, ev in enumerate(events):
        if ev.kind == "alloc":
            if ev.size_bytes > 0:       # torch hands out no block for an empty tensor
                block = malloc(ev.size_bytes)
                live[ev.block_id] = block
                block_bytes[i] = block.size
                if ev.category in act_cats:
                    act += block.size
                    if act > act_peak:
                        act_peak, act_index = act, i
        else:
            block = live.pop(ev.block_id, None)
            if block is not None:
                if ev.category in act_cats:
                    act -= block.size
                free(block)
            elif ev.size_bytes > 0:
                unmatched += 1
        a, r = alloc.allocated_bytes, alloc.reserved_bytes
        allocated[i] = a
        reserved[i] = r
        if a > peak_alloc:
            peak_alloc, peak_index = a, i
        if r > peak_res:
            peak_res = r

    categories, modules = _state_at(events, block_bytes, peak_index)
    _, act_modules = _state_at(events, block_bytes, act_index)
    notes = []
    if unmatched:
        notes.append(f"{unmatched} frees of blocks never allocated were ignored")
    return ReplayResult(
        peak_allocated_bytes=peak_alloc,
        peak_reserved_bytes=peak_res,
        peak_index=peak_index,
        category_bytes_at_peak=categories,
        module_bytes_at_peak=modules,
        activation_peak_index=act_index,
        activation_bytes_at_peak=act_peak,
        module_bytes_at_activation_peak=act_modules,
        timeline=_downsample(events, allocated, reserved, timeline_points),
        final_allocated_bytes=alloc.allocated_bytes,
        final_reserved_bytes=alloc.reserved_bytes,
        oom_count=alloc.oom_count,
        cache_flush_count=alloc.cache_flush_count,
        unmatched_frees=unmatched,
        notes=tuple(notes),
    )


def _state_at(events: Sequence[MemoryEvent], block_bytes: list[int], index: int):
    """What was live right after event ``index``, by category and by (module, category)."""
    live: dict[int, int] = {}
    for i in range(index + 1):
        ev = events[i]
        if ev.kind == "alloc":
            if block_bytes[i]:
                live[ev.block_id] = i
        else:
            live.pop(ev.block_id, None)
    categories: dict[str, int] = {}
    modules: dict[str, dict[str, int]] = {}
    for i in live.values():
        ev = events[i]
        nbytes = block_bytes[i]
        categories[ev.category] = categories.get(ev.category, 0) + nbytes
        per = modules.setdefault(ev.module, {})
        per[ev.category] = per.get(ev.category, 0) + nbytes
    return categories, modules


def _downsample(events, allocated, reserved, points: int) -> tuple[tuple[int, int, int], ...]:
    """At most ``points`` samples; each bucket keeps its highest-allocated moment so peaks survive."""
    n = len(events)
    if n == 0:
        return ()
    if n <= points:
        return tuple((events[i].seq, allocated[i], reserved[i]) for i in range(n))
    out = []
    for b in range(points):
        lo, hi = b * n // points, (b + 1) * n // points
        j = max(range(lo, hi), key=allocated.__getitem__)
        out.append((events[j].seq, allocated[j], reserved[j]))
    return tuple(out)
