"""End-to-end: real tracer on small real models, then the CUDA rules, allocator and context."""

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory import estimate_memory
from gpuwise.memory.adjust import cuda_events
from gpuwise.memory.cuda import CudaStack
from gpuwise.memory.replay import replay
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

HERE = Path(__file__).parent
TRANSFORMER = f"{HERE / 'tiny_models.py'}:transformer"
CONVNET = f"{HERE / 'tiny_models.py'}:convnet"
ATEN_ATTENTION = f"{HERE / 'tiny_models.py'}:transformer_aten_attention"
EMBEDDING = f"{HERE / 'tiny_models.py'}:embedding_lookup"
MIB = 1 << 20


@lru_cache(maxsize=None)
def _trace(model: str, **fields):
    return trace_workload(Workload(model=model, **fields))


def _gpu(name: str):
    return resolve_gpu(load_catalog(user_file=False), name)


def test_breakdown_sums_to_peak_allocated_and_total_is_reserved_plus_context():
    est = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32), _gpu("a100-80gb"))
    parts = (est.weights_bytes + est.gradients_bytes + est.optimizer_bytes + est.activations_bytes
             + est.workspace_bytes + est.other_bytes)
    assert parts == est.peak_allocated_bytes
    assert est.peak_reserved_bytes >= est.peak_allocated_bytes
    assert est.total_bytes == est.peak_reserved_bytes + est.cuda_context_bytes > est.peak_reserved_bytes
    assert est.to_dict()["total_bytes"] == est.total_bytes


def test_memory_grows_with_batch_size():
    small = estimate_memory(_trace(CONVNET, batch_size=2, image_size=32))
    large = estimate_memory(_trace(CONVNET, batch_size=16, image_size=32))
    assert large.peak_allocated_bytes > small.peak_allocated_bytes
    assert large.weights_bytes == small.weights_bytes


def test_memory_grows_with_sequence_length():
    short = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=16))
    long = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=128))
    assert long.peak_allocated_bytes > short.peak_allocated_bytes


def test_inference_needs_less_than_training():
    train = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32))
    infer = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32, mode="infer", optimizer="none"))
    assert infer.peak_allocated_bytes < train.peak_allocated_bytes
    assert infer.gradients_bytes == infer.optimizer_bytes == 0
    # inference runs on one thread: one cuBLAS workspace instead of two
    assert infer.workspace_bytes < train.workspace_bytes


def test_amp_keeps_fp32_master_weights_and_pure_bf16_halves_them():
    fp32 = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32))
    amp = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32, precision="amp-bf16"))
    pure = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32, precision="bf16"))
    assert amp.weights_bytes == fp32.weights_bytes
    assert pure.weights_bytes < fp32.weights_bytes


def test_gradient_checkpointing_lowers_the_activation_peak():
    stack = CudaStack()
    plain = replay(cuda_events(_trace(TRANSFORMER, batch_size=4, seq_len=64), stack).events)
    ckpt = replay(cuda_events(_trace(TRANSFORMER, batch_size=4, seq_len=64, grad_checkpointing=True), stack).events)
    assert ckpt.activation_bytes_at_peak < plain.activation_bytes_at_peak
    assert ckpt.peak_allocated_bytes < plain.peak_allocated_bytes


@pytest.mark.parametrize("model", [ATEN_ATTENTION, TRANSFORMER], ids=["aten-math-path", "functional-sdpa"])
def test_fused_attention_on_cuda_keeps_no_attention_matrix(model):
    batch, heads, seq = 4, 4, 40   # 40: no other tensor of the step has the same size
    attention_bytes = batch * heads * seq * seq * 4
    trace = _trace(model, batch_size=batch, seq_len=seq)

    def matrices(events):
        return sum(1 for e in events if e.kind == "alloc" and e.size_bytes == attention_bytes
                   and e.category == "activations")

    assert matrices(cuda_events(trace, CudaStack()).events) == 0
    if model == ATEN_ATTENTION:
        # the CPU took the math path (dropout on); the CUDA rules replace it by a fused kernel's logsumexp
        assert matrices(trace.events) > 0
        cpu, cuda = replay(trace.events), replay(cuda_events(trace, CudaStack()).events)
        assert cuda.activation_bytes_at_peak < cpu.activation_bytes_at_peak


def test_hopper_gets_the_larger_cublas_workspace_and_context():
    trace = _trace(TRANSFORMER, batch_size=4, seq_len=32)
    ampere = estimate_memory(trace, _gpu("a100-80gb"))
    hopper = estimate_memory(trace, _gpu("h100-sxm"))
    assert ampere.workspace_bytes == 2 * (8 * MIB + 128 * 1024)   # forward and backward handles
    assert hopper.workspace_bytes == 2 * 32 * MIB
    assert hopper.cuda_context_bytes > ampere.cuda_context_bytes


def test_convolutions_load_cudnn_into_the_context():
    gpu = _gpu("a100-80gb")
    conv = estimate_memory(_trace(CONVNET, batch_size=2, image_size=32), gpu)
    attn = estimate_memory(_trace(TRANSFORMER, batch_size=4, seq_len=32), gpu)
    assert conv.cuda_context_bytes > attn.cuda_context_bytes


def test_a_gpu_too_small_is_reported_out_of_memory():
    trace = _trace(TRANSFORMER, batch_size=4, seq_len=32)
    tiny = replace(_gpu("t4"), memory_bytes=370 * MIB)
    est = estimate_memory(trace, tiny)
    assert any("out of memory" in n for n in est.notes)
    assert est.total_bytes > tiny.memory_bytes


def test_expandable_segments_reserve_whole_pages_and_never_count_unsplit_rests():
    trace = _trace(CONVNET, batch_size=16, image_size=32)
    plain = estimate_memory(trace)
    expandable = estimate_memory(trace, expandable_segments=True)
    # every split is allowed, so no block is handed out with a spare rest counted as allocated
    assert expandable.peak_allocated_bytes <= plain.peak_allocated_bytes
    assert expandable.peak_reserved_bytes >= expandable.peak_allocated_bytes
    assert expandable.peak_reserved_bytes % (2 * MIB) == 0
    assert any("expandable" in n for n in expandable.notes)


def test_the_largest_fitting_batch_is_exact_with_a_handful_of_traces():
    from gpuwise.plan.fit import CHECKED_BELOW
    from gpuwise.plan.profile import TracedModel, largest_fitting_batch

    model = TracedModel(Workload(model=CONVNET, image_size=32))
    base = model.estimate(_gpu("t4"), batch_size=1, with_time=False).memory
    # a GPU with room for roughly 60 MiB of allocations beyond batch 1 (as the driver reports it), on
    # the upper side of the estimate, which the fit rule uses
    gpu = replace(_gpu("t4"), memory_bytes=base.total_upper_bytes + 60 * MIB, nvml_memory_bytes=None,
                  ecc_reserves_memory=False)
    assert gpu.visible_memory_bytes == gpu.memory_bytes
    best = largest_fitting_batch(model, gpu, headroom_fraction=0.0, powers_of_two=False)
    assert best > 1
    total = lambda b: model.estimate(gpu, batch_size=b, with_time=False).memory.total_upper_bytes  # noqa: E731
    assert total(best) <= gpu.visible_memory_bytes < total(best + 1)
    # every batch up to the answer fits (the search checks the CHECKED_BELOW under it: memory may step back)
    assert all(total(b) <= gpu.visible_memory_bytes for b in range(max(1, best - CHECKED_BELOW), best))
    # a handful of traces (13 here: 10 find the boundary, 3 more check the batches under it), not one per candidate (~50)
    assert len(model._traces) <= 10 + CHECKED_BELOW


def test_the_largest_fitting_batch_is_zero_when_batch_one_does_not_fit():
    from gpuwise.plan.profile import TracedModel, largest_fitting_batch

    model = TracedModel(Workload(model=CONVNET, image_size=32))
    tiny = replace(_gpu("t4"), memory_bytes=100 * MIB, nvml_memory_bytes=None)
    assert largest_fitting_batch(model, tiny, headroom_fraction=0.0) == 0


# Liger-Kernel's plain-PyTorch embedding runs on an MI300X (Liger 0.3.1, forward + backward peak, p50, MiB; the
# HIP build of the same Embedding.cu) less weights, their gradient, the output, its gradient and the ids (and the
# twin Liger module's weights): what the backward held beside them. (config, vocabulary) -> MiB.
MEASURED_EMBEDDING_SCRATCH_MIB = {("bert", 1024): 8.4, ("bert", 16384): 53.6, ("llama", 1024): 42.0,
                                  ("llama", 2048): 58.0, ("llama", 8192): 154.2, ("llama", 131072): 282.4}
CONFIGS = {"bert": (32 * 512, 768), "llama": (8 * 2048, 4096)}    # (indices, width)


def test_embedding_backward_scratch_is_what_cuda_holds():
    from gpuwise.memory.cuda import embedding_backward_scratch_bytes

    for (config, vocab), measured in MEASURED_EMBEDDING_SCRATCH_MIB.items():
        indices, width = CONFIGS[config]
        assert embedding_backward_scratch_bytes(indices, vocab, width, "float32") / MIB == pytest.approx(measured, abs=0.5)
    # 16-bit gradients are summed in fp32; up to 3,072 indices one kernel writes the gradient directly
    assert embedding_backward_scratch_bytes(8 * 2048, 16384, 4096, "bfloat16") == embedding_backward_scratch_bytes(
        8 * 2048, 16384, 4096, "float32")
    assert embedding_backward_scratch_bytes(3072, 16384, 4096, "float32") == 0


def test_the_embedding_backward_scratch_lands_on_the_peak(monkeypatch):
    """Issue 26: the traced estimate had no scratch for CUDA's sorted embedding backward (282 MiB here); with
    the rule the backward's moment (weights, the output's gradient, the weight gradient) peaks that much higher."""
    import gpuwise.memory.cuda as cuda_rules
    import gpuwise.memory.estimate as estimate_module
    from gpuwise.memory.cuda import embedding_backward_scratch_bytes

    trace = _trace(EMBEDDING, batch_size=8, seq_len=2048, optimizer="sgd")
    gpu = _gpu("a100-80gb")
    scratch = embedding_backward_scratch_bytes(8 * 2048, 131072, 4096, "float32")
    edits = [e for e in cuda_rules.cuda_edits(trace.ops, CudaStack.for_gpu(gpu)) if "embedding" in e.reason]
    assert [e.workspace_bytes for e in edits] == [scratch]
    with_rule = estimate_memory(trace, gpu)
    monkeypatch.setitem(cuda_rules._RULES, "aten.embedding_dense_backward", [])
    monkeypatch.setattr(estimate_module, "_REPLAYS", {})       # the replay of this trace is memoised
    without = estimate_memory(trace, gpu)
    assert with_rule.peak_allocated_bytes - without.peak_allocated_bytes == pytest.approx(scratch, abs=1 << 20)
    weights = 131072 * 4096 * 4
    assert with_rule.peak_allocated_bytes >= 2 * weights + 8 * 2048 * 4096 * 4 + scratch
