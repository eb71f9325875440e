"""How a one-GPU job's effective batch is split over N GPUs when a remedy shards it over them: kept where it
splits evenly, the next batch that does where it does not (the remedy then says so)."""

from __future__ import annotations

import pytest

from gpuwise.plan.remedies import per_gpu_layout


@pytest.mark.parametrize("effective, count, micro_limit, layout", [
    (8, 4, 8, (2, 1)),       # the batch split over the GPUs
    (8, 4, 2, (2, 1)),       # accumulation steps split, the micro-batch kept
    (32, 2, 4, (4, 4)),      # the micro-batch kept, accumulation making up each GPU's share
    (6, 4, 6, (2, 1)),       # 6 do not split over 4: the next batch that does (8)
    (2, 4, 2, (1, 1)),
])
def test_per_gpu_layout_keeps_or_rounds_up_the_effective_batch(effective, count, micro_limit, layout):
    micro, accum = per_gpu_layout(effective, count, micro_limit)
    assert (micro, accum) == layout
    assert micro <= micro_limit and micro * accum * count >= effective
    assert micro * accum * count == effective or effective % count
