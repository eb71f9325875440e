"""A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), one stream.

What is modelled, with the constants of c10/core/AllocatorConfig.h:

- every request is rounded up to a multiple of 512 B (``round_size``; roundup_power2_divisions off);
- requests of <= 1 MiB come from the *small pool*, whose segments are 2 MiB; larger ones from the
  *large pool*: segments of 20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB;
- a request first takes the smallest free block of its pool that is big enough (best fit, ties to
  the lowest address); only when none fits is a new segment cudaMalloc'ed;
- a block is split when the rest is >= 512 B (small pool, or any pool with expandable segments) or
  > 1 MiB (large pool); otherwise the whole block is handed out and counted as allocated, as
  ``max_memory_allocated`` does;
- a freed block coalesces with its free neighbours of the same segment; blocks of different
  segments never merge, and segments are never returned to CUDA ...
- ... unless a cudaMalloc would exceed the device (``capacity_bytes``): then, as the real one does
  (release_cached_blocks), every wholly free segment is released and the malloc retried once;
  if it still does not fit the replay records an out-of-memory and carries on, so the caller
  learns how much would have been needed;
- ``max_split_size_bytes`` (PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb): blocks at least that big
  are never split nor handed to smaller requests;
- ``expandable_segments``: one segment per pool that grows by mapping pages of 2 MiB (small pool)
  or 20 MiB (large pool) at its end; every split is allowed. Simplification: when memory runs
  out, only the free pages at the end of the segment are unmapped (the real allocator can also
  unmap whole free pages in the middle).

Not modelled: more than one stream (record_stream, NCCL streams), CUDA graphs' private pools,
garbage_collection_threshold and roundup_power2_divisions (both off by default).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB

MIN_BLOCK_BYTES = 512                 # kMinBlockSize
SMALL_REQUEST_BYTES = 1 * MIB         # kSmallSize: largest request served by the small pool
SMALL_SEGMENT_BYTES = 2 * MIB         # kSmallBuffer
LARGE_SEGMENT_BYTES = 20 * MIB        # kLargeBuffer
MIN_LARGE_ALLOC_BYTES = 10 * MIB      # kMinLargeAlloc: from here a segment is the request itself
ROUND_LARGE_BYTES = 2 * MIB           # kRoundLarge
MAX_NON_SPLIT_ROUNDING_BYTES = 20 * MIB


def round_size(size_bytes: int) -> int:
    """The block size the allocator uses for a request (round_size)."""
    if size_bytes < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    return -(-size_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def segment_size(rounded_bytes: int) -> int:
    """The cudaMalloc size when a rounded request finds no free block (get_allocation_size)."""
    if rounded_bytes <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if rounded_bytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-rounded_bytes // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


@dataclass(frozen=True)
class AllocatorConfig:
    expandable_segments: bool = False
    max_split_size_bytes: int | None = None   # None: unlimited (the default)
    capacity_bytes: int | None = None         # what cudaMalloc can get; None: unlimited


class Block:
    __slots__ = ("addr", "size", "segment", "prev", "next", "allocated", "mapped")

    def __init__(self, addr: int, size: int, segment: "Segment", mapped: bool = True) -> None:
        self.addr = addr
        self.size = size
        self.segment = segment
        self.prev: Block | None = None
        self.next: Block | None = None
        self.allocated = False
        self.mapped = mapped


class Segment:
    __slots__ = ("pool", "size", "expandable", "page_bytes", "tail", "base")

    def __init__(self, pool: "Pool", size: int, expandable: bool = False, page_bytes: int = 0) -> None:
        self.pool = pool
        self.size = size            # mapped bytes for an expandable segment
        self.expandable = expandable
        self.page_bytes = page_bytes
        self.tail: Block | None = None   # expandable: the unmapped rest of the address range
        self.base = 0


_ADDR_BITS = 60   # pool keys are size << 60 | address: one int sorts like (size, address), faster


class Pool:
    """Free blocks of one pool, ordered by (size, address) like the allocator's std::set."""

    __slots__ = ("is_small", "keys", "blocks", "expandable")

    def __init__(self, is_small: bool) -> None:
        self.is_small = is_small
        self.keys: list[int] = []
        self.blocks: dict[int, Block] = {}
        self.expandable: Segment | None = None

    def insert(self, block: Block) -> None:
        key = block.size << _ADDR_BITS | block.addr
        bisect.insort(self.keys, key)
        self.blocks[key] = block

    def remove(self, block: Block) -> None:
        key = block.size << _ADDR_BITS | block.addr
        del self.keys[bisect.bisect_left(self.keys, key)]
        del self.blocks[key]


class CachingAllocator:
    """The allocator's state; ``malloc``/``free`` mirror the real ones' effect on the statistics."""

    def __init__(self, config: AllocatorConfig = AllocatorConfig()) -> None:
        self.config = config
        self.small = Pool(True)
        self.large = Pool(False)
        self.allocated_bytes = 0
        self.reserved_bytes = 0
        self.segments: set[Segment] = set()
        self.oom_count = 0              # mallocs that did not fit even after releasing the cache
        self.cache_flush_count = 0      # release_cached_blocks calls
        self._next_addr = 0

    # ---------------------------------------------------------------- public
    def malloc(self, size_bytes: int) -> Block:
        size = round_size(size_bytes)
        pool = self.small if size <= SMALL_REQUEST_BYTES else self.large
        block = self._free_block(pool, size)
        if block is None:
            block = self._new_block(pool, size)
        return self._take(pool, block, size)

    def free(self, block: Block) -> None:
        block.allocated = False
        self.allocated_bytes -= block.size
        pool = block.segment.pool
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated and neighbour.mapped:
                pool.remove(neighbour)
                if neighbour is block.prev:
                    block.addr = neighbour.addr
                    block.prev = neighbour.prev
                    if block.prev is not None:
                        block.prev.next = block
                else:
                    block.next = neighbour.next
                    if block.next is not None:
                        block.next.prev = block
                block.size += neighbour.size
        pool.insert(block)

    # --------------------------------------------------------------- finding
    def _free_block(self, pool: Pool, size: int) -> Block | None:
        keys = pool.keys
        i = bisect.bisect_left(keys, size << _ADDR_BITS)
        if i == len(keys):
            return None
        block = pool.blocks[keys[i]]
        max_split = self.config.max_split_size_bytes
        if max_split is not None:
            # Oversize blocks only serve oversize requests, and not much smaller ones.
            if size < max_split <= block.size:
                return None
            if size >= max_split and block.size >= size + MAX_NON_SPLIT_ROUNDING_BYTES:
                return None
        if block.segment.expandable:
            # Best fit counts the tail block as big as it could grow: prefer any other block.
            def grow_size(b: Block) -> int:
                return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

            while i + 1 < len(keys):
                nxt = pool.blocks[keys[i + 1]]
                if grow_size(nxt) >= grow_size(block):
                    break
                i += 1
                block = nxt
        return block

    def _new_block(self, pool: Pool, size: int) -> Block:
        if self.config.expandable_segments:
            return self._grow_expandable(pool, size)
        seg_bytes = segment_size(size)
        if not self._fits(seg_bytes):
            self._release_cached()
            if not self._fits(seg_bytes):
                self.oom_count += 1
        segment = Segment(pool, seg_bytes)
        self.segments.add(segment)
        self.reserved_bytes += seg_bytes
        block = Block(self._address(seg_bytes), seg_bytes, segment)
        pool.insert(block)
        return block

    def _take(self, pool: Pool, block: Block, size: int) -> Block:
        pool.remove(block)
        rest = block.size - size
        if self._should_split(pool, rest, size):
            tail = Block(block.addr + size, rest, block.segment)
            tail.prev, tail.next = block, block.next
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            block.size = size
            pool.insert(tail)
        block.allocated = True
        self.allocated_bytes += block.size
        return block

    def _should_split(self, pool: Pool, rest: int, size: int) -> bool:
        if pool.is_small or self.config.expandable_segments:
            return rest >= MIN_BLOCK_BYTES
        max_split = self.config.max_split_size_bytes
        return (max_split is None or size < max_split) and rest > SMALL_REQUEST_BYTES

    # ------------------------------------------------------------ reserving
    def _fits(self, more_bytes: int) -> bool:
        cap = self.config.capacity_bytes
        return cap is None or self.reserved_bytes + more_bytes <= cap

    def _address(self, nbytes: int) -> int:
        addr = self._next_addr
        self._next_addr += nbytes + SMALL_SEGMENT_BYTES   # a gap, so segments never touch
        return addr

    def _release_cached(self) -> None:
        """release_cached_blocks: give back every segment that is one free block."""
        self.cache_flush_count += 1
        for pool in (self.small, self.large):
            for key in list(pool.keys):
                block = pool.blocks[key]
                seg = block.segment
                if seg.expandable:
                    self._unmap_tail(seg, block)
                elif block.prev is None and block.next is None:
                    pool.remove(block)
                    self.segments.discard(seg)
                    self.reserved_bytes -= seg.size

    def _unmap_tail(self, seg: Segment, block: Block) -> None:
        if block.next is None or block.next.mapped:
            return   # a free block in the middle: its pages stay mapped (simplification)
        # Only whole pages can be unmapped; the first partly used page stays.
        offset = block.addr - seg.base
        first_free_page = -(-offset // seg.page_bytes) * seg.page_bytes
        freed = (block.next.addr - seg.base) - first_free_page
        if freed <= 0:
            return
        pool = seg.pool
        pool.remove(block)
        block.size -= freed
        block.next.addr -= freed
        block.next.size += freed
        seg.size -= freed
        self.reserved_bytes -= freed
        if block.size:
            pool.insert(block)
        else:  # the block vanishes into the unmapped tail
            if block.prev is not None:
                block.prev.next = block.next
            block.next.prev = block.prev

    def _grow_expandable(self, pool: Pool, size: int) -> Block:
        """Map pages at the end of the pool's one segment until its free tail holds ``size``."""
        seg = pool.expandable
        if seg is None:
            page = SMALL_SEGMENT_BYTES if pool.is_small else LARGE_SEGMENT_BYTES
            seg = Segment(pool, 0, expandable=True, page_bytes=page)
            pool.expandable = seg
            self.segments.add(seg)
            # The virtual reservation is vast; only mapped pages count as reserved.
            seg.tail = Block(self._address(1 << 50), 1 << 50, seg, mapped=False)
            seg.base = seg.tail.addr
        seg_tail = seg.tail
        last = seg_tail.prev
        have = last.size if last is not None and not last.allocated else 0
        need_pages = -(-(size - have) // seg.page_bytes)
        more = need_pages * seg.page_bytes
        if not self._fits(more):
            self._release_cached()
            last = seg_tail.prev
            have = last.size if last is not None and not last.allocated else 0
            more = -(-(size - have) // seg.page_bytes) * seg.page_bytes
            if not self._fits(more):
                self.oom_count += 1
        seg.size += more
        self.reserved_bytes += more
        new = Block(seg_tail.addr, more, seg)
        seg_tail.addr += more
        seg_tail.size -= more
        new.prev, new.next = last, seg_tail
        seg_tail.prev = new
        if last is not None:
            last.next = new
        if have:
            # The free tail and the new pages are one block.
            pool.remove(last)
            new.addr, new.size, new.prev = last.addr, last.size + more, last.prev
            if last.prev is not None:
                last.prev.next = new
        pool.insert(new)
        return new
