"""What an indexing kernel moves: the rows it selects, not the tensor it selects them from.

PyTorch's ``embedding`` is ``weight.index_select(0, indices.reshape(-1))`` (``Embedding.cpp``): it reads the
tokens' rows. The trace counts every input tensor, so the lookup was timed as reading its whole table:
Liger's A100 rows measure an embedding forward of 32 x 512 tokens flat at ~166 us from a vocabulary of
1,024 to 131,072, where the product predicted 61 -> 486 us. An in-place scatter (a KV-cache update by
``index_put_`` / ``index_copy_``) writes the addressed rows, not the cache. A decode step reads an untied
input embedding's rows, not its table (a tied one is the LM head's weight)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory.llm import infer_memory
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.indexing import indexing_bytes
from gpuwise.runtime.kernels import op_times
from gpuwise.runtime.llm import decode_step, unread_embedding_bytes
from gpuwise.trace.recorder import Recorder
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

TOKENS, HIDDEN = (32, 512), 768


@pytest.fixture(scope="module")
def a100():
    return resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")


def _recorded(fn, *, training: bool = False):
    """The kernels ``fn`` launches, recorded on fake tensors by the product's recorder."""
    recorder = Recorder(training=training)
    with FakeTensorMode(allow_non_fake_inputs=True), recorder:
        recorder.recording_ops = True
        recorder.phase = "forward"
        fn(recorder)
        recorder.recording_ops = False
    return [o for o in recorder.ops if o.kernel_count]


def _lookup(vocab: int, *, backward: bool = False):
    def run(recorder):
        table = torch.nn.Embedding(vocab, HIDDEN)
        out = table(torch.randint(0, vocab, TOKENS))
        if backward:
            recorder.phase = "backward"
            out.backward(torch.ones_like(out))
    ops = _recorded(run, training=backward)
    return [o for o in ops if o.op.startswith("aten.embedding")]


def _device_s(ops, gpu) -> float:
    return sum(t.device_s for t in op_times(ops, gpu, "fp32", load_calibration()))


def test_an_embedding_lookup_moves_the_tokens_rows():
    (op,) = _lookup(131_072)
    tokens = TOKENS[0] * TOKENS[1]
    assert indexing_bytes(op) == 8 * tokens + 2 * 4 * tokens * HIDDEN      # int64 indices, rows read and written
    assert op.bytes_read > 4 * 131_072 * HIDDEN                            # the trace counts the table


def test_an_embedding_lookup_is_timed_flat_in_the_vocabulary(a100):
    small, large = _device_s(_lookup(1_024), a100), _device_s(_lookup(131_072), a100)
    assert large == pytest.approx(small, rel=1e-6)
    # and never faster than the rows it moves at the datasheet bandwidth
    assert small >= 2 * 4 * TOKENS[0] * TOKENS[1] * HIDDEN / (a100.memory_bandwidth_gbs * 1e9)


def test_the_embedding_gradient_still_writes_its_whole_table(a100):
    grads = [[o for o in _lookup(v, backward=True) if "backward" in o.op] for v in (1_024, 131_072)]
    assert all(len(g) == 1 and indexing_bytes(g[0]) is None for g in grads)
    small, large = (_device_s(g, a100) for g in grads)
    assert large - small >= 4 * (131_072 - 1_024) * HIDDEN / (a100.memory_bandwidth_gbs * 1e9)


def _cache_updates(recorder):
    cache = torch.zeros(8, 4096, 8, 128, dtype=torch.bfloat16)       # batch, positions, KV heads, head dim
    new = torch.ones(8, 1, 8, 128, dtype=torch.bfloat16)
    cache.index_copy_(1, torch.tensor([17]), new)
    cache.index_put_((torch.arange(8), torch.tensor([18])), new[:, 0])
    grid = torch.zeros(1000, 64)
    grid.index_add_(0, torch.tensor([1, 2, 3]), torch.ones(3, 64))
    grid.index_put_((grid > 0.5,), torch.tensor(1.0))                # a boolean mask: its true elements are data


def test_an_in_place_cache_update_writes_the_rows_it_addresses(a100):
    ops = {o.op: o for o in _recorded(_cache_updates)}
    new_rows = 8 * 8 * 128 * 2
    assert indexing_bytes(ops["aten.index_copy_.default"]) == 8 + 2 * new_rows
    assert indexing_bytes(ops["aten.index_add_.default"]) == 8 * 3 + 3 * 64 * 4 + 2 * 3 * 64 * 4   # accumulates
    cache_bytes = 8 * 4096 * 8 * 128 * 2
    assert _device_s([ops["aten.index_copy_.default"]], a100) < 0.25 * cache_bytes / (a100.memory_bandwidth_gbs * 1e9)
    puts = [o for o in _recorded(_cache_updates) if o.op == "aten.index_put_.default"]
    assert indexing_bytes(puts[0]) == 8 * 8 + 8 + 2 * new_rows
    assert indexing_bytes(puts[1]) is None                            # the mask: as traced


def _review_cases(recorder):
    grid = torch.zeros(1000, 64)
    grid.index_put_((torch.arange(500),), torch.ones(64))                       # one row broadcast over 500
    grid.index_put_((torch.arange(500),), torch.ones(500, 64), accumulate=True)  # sums into the rows
    torch.zeros(8, 4096, 8, 128, dtype=torch.uint8).index_copy_(1, torch.tensor([3]),
                                                                torch.ones(8, 1, 8, 128, dtype=torch.uint8))
    grid.scatter_(0, torch.zeros(3, 64, dtype=torch.long), torch.ones(1000, 64))     # reads 3 x 64 of src


def test_broadcast_values_accumulation_byte_caches_and_scatter_sources_are_counted_as_the_kernel_moves():
    puts = [o for o in _recorded(_review_cases) if o.op.startswith("aten.index_put_")]
    assert indexing_bytes(puts[0]) is None                                       # 500 rows written: as traced
    assert indexing_bytes(puts[1]) == 500 * 8 + 500 * 64 * 4 + 2 * 500 * 64 * 4   # read and written: accumulates
    (copy,) = [o for o in _recorded(_review_cases) if o.op.startswith("aten.index_copy_")]
    assert indexing_bytes(copy) == 8 + 2 * 8 * 8 * 128                             # a uint8 cache: its new rows
    (scatter,) = [o for o in _recorded(_review_cases) if o.op.startswith("aten.scatter_")]
    assert indexing_bytes(scatter) == 3 * 64 * 8 + 2 * 3 * 64 * 4                  # the index's elements only


def _decode_memory_s(arch, gpu, *, weights_bytes: float, batch: int = 1) -> float:
    w = Workload("hf:meta-llama/Llama-3.1-8B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=batch,
                 engine="vllm", precision="bf16")
    return decode_step(arch, w, gpu, weights_bytes=weights_bytes, context_tokens=1152, batch=batch,
                       kv_bytes_per_element=2.0).memory_s


def test_a_decode_step_reads_an_untied_embeddings_rows_not_its_table(a100):
    arch = load_arch("hf:meta-llama/Llama-3.1-8B")
    assert not arch.tie_word_embeddings
    w = Workload("hf:meta-llama/Llama-3.1-8B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=1,
                 engine="vllm", precision="bf16")
    weights = infer_memory(arch, w, a100, prompt_tokens=1024, new_tokens=256, batch=1,
                           kv_bytes_per_element=2.0).weights_bytes
    table = arch.vocab_size * arch.hidden_size * 2
    # the untied model holds one table more than its tied twin and reads one row of it more a step
    tied = replace(arch, tie_word_embeddings=True)
    row_s = arch.hidden_size * 2 / (a100.memory_bandwidth_gbs * 1e9)
    untied_s = _decode_memory_s(arch, a100, weights_bytes=weights)
    tied_s = _decode_memory_s(tied, a100, weights_bytes=weights - table)
    assert untied_s == pytest.approx(tied_s, abs=2 * row_s)
    assert unread_embedding_bytes(arch, w, 1) == table - arch.hidden_size * 2
    assert unread_embedding_bytes(arch, w.with_(num_gpus=4), 1) == table / 4 - arch.hidden_size * 2
    assert unread_embedding_bytes(tied, w, 1) == 0.0
