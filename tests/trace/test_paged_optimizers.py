"""--optimizer paged-adamw / paged-adamw-8bit are traced (they were listed and then refused on every traced model):
bitsandbytes' state, counted on the GPU, with a note that it pages to CPU RAM when the GPU runs out."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

from trace_helpers import live_bytes_after

CONVNET = f"{Path(__file__).parents[1] / 'memory' / 'tiny_models.py'}:convnet"


def _trace(optimizer: str):
    return trace_workload(Workload(model=CONVNET, batch_size=2, image_size=32, optimizer=optimizer), use_cache=False)


@pytest.mark.parametrize("paged, like, state_bytes_per_param", [
    ("paged-adamw", None, 2 * 4),           # bitsandbytes' 32-bit AdamW: two float32 states
    ("paged-adamw-8bit", "adamw-8bit", None),
])
def test_a_paged_optimizer_is_traced_with_its_state_on_the_gpu(paged, like, state_bytes_per_param):
    trace = _trace(paged)
    state = live_bytes_after(trace.events)["optimizer"]
    if like is not None:
        assert state == live_bytes_after(_trace(like).events)["optimizer"]
    else:
        assert state == state_bytes_per_param * trace.trainable_param_count
    assert any(paged in n and "CPU RAM" in n for n in trace.notes)
