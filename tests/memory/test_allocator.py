"""The caching-allocator model against answers worked out from c10's rules by hand."""

from gpuwise.memory.allocator import MIB, AllocatorConfig, CachingAllocator, round_size, segment_size
from gpuwise.memory.replay import replay
from gpuwise.trace.records import MemoryEvent


def _events(*steps, category="activations"):
    """steps: ("a", id, bytes) or ("f", id)."""
    out, sizes = [], {}
    for seq, step in enumerate(steps):
        if step[0] == "a":
            sizes[step[1]] = step[2]
            out.append(MemoryEvent(seq, "alloc", step[1], step[2], category, "forward"))
        else:
            out.append(MemoryEvent(seq, "free", step[1], sizes[step[1]], category, "forward"))
    return out


def test_requests_round_up_to_512_bytes_and_pick_their_segment_size():
    assert round_size(1) == 512
    assert round_size(513) == 1024
    assert segment_size(round_size(MIB)) == 2 * MIB          # <= 1 MiB: small pool
    assert segment_size(round_size(MIB + 1)) == 20 * MIB     # 1..10 MiB: a 20 MiB large segment
    assert segment_size(10 * MIB) == 10 * MIB                # >= 10 MiB: rounded to 2 MiB
    assert segment_size(11 * MIB + 1) == 12 * MIB


def test_two_one_mib_requests_share_one_small_segment():
    r = replay(_events(("a", 1, MIB), ("a", 2, MIB)))
    assert (r.peak_allocated_bytes, r.peak_reserved_bytes) == (2 * MIB, 2 * MIB)


def test_a_tiny_request_takes_512_bytes_of_a_2_mib_segment():
    r = replay(_events(("a", 1, 100)))
    assert (r.peak_allocated_bytes, r.peak_reserved_bytes) == (512, 2 * MIB)


def test_just_over_one_mib_goes_to_a_20_mib_large_segment_and_is_split():
    r = replay(_events(("a", 1, MIB + 1)))
    assert r.peak_allocated_bytes == MIB + 512
    assert r.peak_reserved_bytes == 20 * MIB


def test_large_block_remainder_of_one_mib_or_less_is_not_split_and_counts_as_allocated():
    half = int(9.5 * MIB)
    r = replay(_events(("a", 1, half), ("a", 2, half)))
    # the second request takes the whole 10.5 MiB rest: 1 MiB is not > 1 MiB, so no split
    assert r.peak_allocated_bytes == 20 * MIB
    assert r.peak_reserved_bytes == 20 * MIB


def test_best_fit_reuses_the_smallest_free_block_that_fits():
    r = replay(_events(("a", 1, 12 * MIB), ("a", 2, 16 * MIB), ("f", 1), ("f", 2), ("a", 3, 11 * MIB)))
    assert r.peak_reserved_bytes == 28 * MIB
    # 11 MiB went into the 12 MiB block (rest 1 MiB, not split), not into the 16 MiB one
    assert r.final_allocated_bytes == 12 * MIB


def test_free_blocks_of_different_segments_never_merge():
    r = replay(_events(("a", 1, 12 * MIB), ("a", 2, 12 * MIB), ("f", 1), ("f", 2), ("a", 3, 20 * MIB)))
    assert r.final_reserved_bytes == 44 * MIB


def test_neighbouring_free_blocks_of_one_segment_coalesce():
    k512 = 512 * 1024
    r = replay(_events(("a", 1, k512), ("a", 2, k512), ("a", 3, k512), ("a", 4, k512),
                       ("f", 2), ("f", 3), ("a", 5, MIB)))
    assert r.final_reserved_bytes == 2 * MIB
    assert r.final_allocated_bytes == 2 * MIB


def test_cached_segments_are_released_only_when_the_gpu_is_full():
    events = _events(("a", 1, 12 * MIB), ("f", 1), ("a", 2, 20 * MIB))
    unlimited = replay(events)
    tight = replay(events, AllocatorConfig(capacity_bytes=30 * MIB))
    assert unlimited.final_reserved_bytes == 32 * MIB and unlimited.cache_flush_count == 0
    assert tight.final_reserved_bytes == 20 * MIB and tight.cache_flush_count == 1
    assert tight.oom_count == 0


def test_out_of_memory_is_counted_when_even_an_empty_cache_does_not_help():
    r = replay(_events(("a", 1, 12 * MIB), ("a", 2, 20 * MIB)), AllocatorConfig(capacity_bytes=30 * MIB))
    assert r.oom_count == 1
    assert r.peak_reserved_bytes == 32 * MIB    # the replay carries on to say what was needed


def test_expandable_segments_grow_one_segment_in_20_mib_pages():
    cfg = AllocatorConfig(expandable_segments=True)
    r = replay(_events(("a", 1, 12 * MIB), ("a", 2, 12 * MIB)), cfg)
    # 12 MiB maps one page; the next 12 MiB uses the 8 MiB free tail plus one more page
    assert (r.peak_allocated_bytes, r.peak_reserved_bytes) == (24 * MIB, 40 * MIB)
    # every split is allowed: the 16 MiB rest stays free, not allocated
    assert r.final_allocated_bytes == 24 * MIB


def test_expandable_segments_unmap_free_tail_pages_when_memory_runs_out():
    cfg = AllocatorConfig(expandable_segments=True, capacity_bytes=41 * MIB)
    r = replay(_events(("a", 1, 30 * MIB), ("f", 1), ("a", 2, MIB)), cfg)
    assert r.peak_reserved_bytes == 40 * MIB
    assert r.final_reserved_bytes == 2 * MIB and r.cache_flush_count == 1 and r.oom_count == 0


def test_max_split_size_keeps_big_blocks_from_small_requests():
    events = _events(("a", 1, 40 * MIB), ("f", 1), ("a", 2, 12 * MIB))
    default = replay(events)
    capped = replay(events, AllocatorConfig(max_split_size_bytes=20 * MIB))
    assert default.final_reserved_bytes == 40 * MIB
    assert capped.final_reserved_bytes == 52 * MIB


def test_breakdown_at_the_peak_sums_to_peak_allocated_by_category():
    events = [
        MemoryEvent(0, "alloc", 1, 3 * MIB, "weights", "other"),
        MemoryEvent(1, "alloc", 2, MIB - 100, "activations", "forward", "layer1"),
        MemoryEvent(2, "alloc", 3, 5 * MIB, "activations", "forward", "layer2"),
        MemoryEvent(3, "free", 2, MIB - 100, "activations", "backward"),
        MemoryEvent(4, "alloc", 4, 600, "gradients", "backward"),
    ]
    r = replay(events)
    assert r.peak_index == 2
    assert sum(r.category_bytes_at_peak.values()) == r.peak_allocated_bytes
    assert r.category_bytes_at_peak == {"weights": 3 * MIB, "activations": 6 * MIB}
    assert r.module_bytes_at_peak["layer2"] == {"activations": 5 * MIB}


def test_timeline_is_downsampled_and_keeps_the_peak():
    steps = []
    for i in range(2000):
        steps.append(("a", i, (i % 7 + 1) * 4096))
        if i % 3:
            steps.append(("f", i))
    r = replay(_events(*steps), timeline_points=100)
    assert len(r.timeline) == 100
    assert max(a for _, a, _ in r.timeline) == r.peak_allocated_bytes
    assert all(res >= a for _, a, res in r.timeline)


def test_allocator_object_tracks_live_blocks():
    alloc = CachingAllocator()
    blocks = [alloc.malloc(3 * MIB) for _ in range(6)]
    assert alloc.allocated_bytes == 18 * MIB and alloc.reserved_bytes == 20 * MIB
    for b in blocks:
        alloc.free(b)
    assert alloc.allocated_bytes == 0
    # all six coalesced back with the rest into the one 20 MiB free block
    assert [(b.size, b.addr) for b in alloc.large.blocks.values()] == [(20 * MIB, blocks[0].addr)]
