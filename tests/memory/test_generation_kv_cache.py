"""A traced forward of the prompts as HF generate's peak (gpuwise.memory.generation): the KV cache at the peak."""

from gpuwise.memory.generation import KV_CACHE_NOTE, with_kv_cache
from gpuwise.memory.model import MemoryEstimate

MIB = 1 << 20
GIB = 1 << 30


def forward(activations=2 * GIB) -> MemoryEstimate:
    """A traced no-cache forward: 6 GiB of weights, 8 MiB of cuBLAS workspace, ``activations`` at its peak."""
    weights, workspace = 6 * GIB, 8 * MIB
    allocated = weights + workspace + activations
    return MemoryEstimate(peak_allocated_bytes=allocated, peak_reserved_bytes=allocated + 256 * MIB,
                          cuda_context_bytes=400 * MIB, total_bytes=allocated + 656 * MIB, weights_bytes=weights,
                          gradients_bytes=0, optimizer_bytes=0, activations_bytes=activations,
                          workspace_bytes=workspace, top_modules=(("lm_head", GIB),),
                          notes=("peak during the forward phase",),
                          uncertainty=(("cuda_context", 120 * MIB), ("allocator", 100 * MIB)))


def parts_sum(m: MemoryEstimate) -> int:
    return (m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activations_bytes + m.workspace_bytes
            + m.other_bytes)


def test_a_long_answer_peaks_at_the_last_decode_step_with_the_whole_cache():
    f = forward()
    m = with_kv_cache(f, prompt_kv_bytes=5 * GIB, total_kv_bytes=10 * GIB, decode_activation_bytes=4 * MIB)
    assert m.peak_allocated_bytes == 6 * GIB + 8 * MIB + 10 * GIB + 4 * MIB
    assert (m.other_bytes, m.activations_bytes, m.weights_bytes) == (10 * GIB, 4 * MIB, 6 * GIB)
    assert parts_sum(m) == m.peak_allocated_bytes
    assert m.peak_reserved_bytes >= m.peak_allocated_bytes + int(0.15 * 10 * GIB)   # the cache churns
    assert m.peak_reserved_bytes % (2 * MIB) == 0
    assert m.total_bytes == m.peak_reserved_bytes + f.cuda_context_bytes
    assert dict(m.uncertainty)["kv_cache_fragmentation"] == GIB           # 10% of the cache, as the closed form's
    assert KV_CACHE_NOTE in m.notes and "peak during the forward phase" not in m.notes
    assert m.top_modules == ()          # the forward's activations are gone at that step


def test_a_short_answer_peaks_at_the_prefill_beside_the_prompts_cache():
    f = forward(activations=8 * GIB)
    m = with_kv_cache(f, prompt_kv_bytes=GIB, total_kv_bytes=GIB + 32 * MIB, decode_activation_bytes=4 * MIB)
    assert m.peak_allocated_bytes == f.peak_allocated_bytes + GIB
    assert m.activations_bytes == f.activations_bytes and m.other_bytes == GIB
    assert parts_sum(m) == m.peak_allocated_bytes
    assert m.peak_reserved_bytes >= f.peak_reserved_bytes + GIB
    assert m.top_modules == f.top_modules and "peak during the forward phase" in m.notes


def test_no_cache_changes_nothing_but_the_notes():
    f = forward()
    m = with_kv_cache(f, prompt_kv_bytes=0, total_kv_bytes=0, decode_activation_bytes=0)
    assert (m.peak_allocated_bytes, m.peak_reserved_bytes) == (f.peak_allocated_bytes, f.peak_reserved_bytes)
