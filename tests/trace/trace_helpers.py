"""Event arithmetic shared by the tracer's tests (a uniquely named module: every part has a conftest)."""

from __future__ import annotations

from collections import Counter


def live_bytes_after(events) -> Counter:
    """Bytes still allocated, per category, after the last event."""
    live: dict[int, object] = {}
    for e in events:
        if e.kind == "alloc":
            live[e.block_id] = e
        else:
            live.pop(e.block_id, None)
    left: Counter = Counter()
    for e in live.values():
        left[e.category] += e.size_bytes
    return left


def peak_live_bytes(events, categories=None) -> int:
    """Peak of the live bytes (of ``categories`` only, when given) over the events."""
    live = peak = 0
    for e in events:
        if categories is not None and e.category not in categories:
            continue
        live += e.size_bytes if e.kind == "alloc" else -e.size_bytes
        peak = max(peak, live)
    return peak
