"""vLLM's KV-cache room is its reservation less what its memory profiling sees (trial of LLM serving, defect 4):
the capacity took the batch's own peak, which for a bitsandbytes model is the quantize-on-load transient (a
vocabulary matrix in 16 bits beside its copy): Llama-3.1-70B nf4 on an RTX A6000 said "the weights and a prefill
take 40.6 GiB" over 36.8 GiB of weights. vLLM's ``memory_profiling`` resets the peak after loading and measures one
dummy forward of max_num_batched_tokens tokens (and the sampler) and the non-torch memory."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import (VllmBatchDefaults, infer_memory, inference_weight_bytes, quantize_on_load_bytes,
                               vllm_batch_defaults)
from gpuwise.memory.llm_activations import decode_logits_bytes
from gpuwise.plan.llm import vllm_capacity
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

L70, L8 = "hf:meta-llama/Llama-3.1-70B", "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def gpus():
    return {g.id: g for g in load_catalog(user_file=False).gpus}


def _job(model, quant):
    return Workload(model, mode="infer", precision="bf16", quant=quant, engine="vllm", batch_size=1, seq_len=1024,
                    max_new_tokens=256)


def test_the_loading_transient_is_not_in_vllms_profile_peak(gpus):
    a6000 = gpus["rtx-a6000"]
    arch, w = load_arch(L70), _job(L70, "nf4")
    assert quantize_on_load_bytes(arch, w) > 1 << 30          # what was taken from the KV cache
    cap = vllm_capacity(arch, w, a6000, kv_bytes_per_element=2.0)
    profiled = infer_memory(arch, w, a6000, prompt_tokens=vllm_batch_defaults(a6000).max_num_batched_tokens, new_tokens=0, batch=1,
                            kv_bytes_per_element=2.0, load_transient=False)
    assert profiled.memory.workspace_bytes < 1 << 30         # cuBLAS', not the transient
    assert cap.profile_peak_bytes == pytest.approx(profiled.memory.total_upper_bytes - profiled.kv_cache_bytes,
                                                   rel=0.02)
    assert cap.profile_peak_bytes < infer_memory(arch, w, a6000, prompt_tokens=1024, new_tokens=0, batch=1,
                                                 kv_bytes_per_element=2.0).memory.total_upper_bytes


def test_the_profiling_forward_is_max_num_batched_tokens_whatever_the_prompt(gpus):
    h100 = gpus["h100-sxm"]
    arch = load_arch(L8)
    short, long = (vllm_capacity(arch, _job(L8, "none").with_(seq_len=s), h100, kv_bytes_per_element=2.0)
                   for s in (128, 4096))
    assert short.profile_peak_bytes == long.profile_peak_bytes
    assert [vllm_batch_defaults(g) for g in (h100, gpus["a100-80gb-sxm4"], gpus["rtx-a6000"])] == [
        VllmBatchDefaults(8192, 1024), VllmBatchDefaults(2048, 256), VllmBatchDefaults(2048, 256)]
    # the capacity caps a batch at the GPU's own max_num_seqs (was 256 everywhere; vLLM runs 1024 on an H100)
    assert short.max_num_seqs == 1024


def test_each_tensor_parallel_gpu_profiles_the_whole_logits(gpus):
    # the review: the sampler's [max_num_seqs, vocab] logits were divided over the TP GPUs, while every rank
    # all-gathers them whole (LogitsProcessor._gather_logits) and runs the dummy sampler on them
    arch = load_arch("hf:meta-llama/Llama-3.1-70B")
    h100 = gpus["h100-sxm"]
    w = Workload("hf:meta-llama/Llama-3.1-70B", mode="infer", precision="bf16", engine="vllm", num_gpus=8,
                 seq_len=1024, max_new_tokens=256)
    cap = vllm_capacity(arch, w, h100, kv_bytes_per_element=2.0)
    profiled = infer_memory(arch, w, h100, prompt_tokens=vllm_batch_defaults(h100).max_num_batched_tokens,
                            new_tokens=0, batch=1, kv_bytes_per_element=2.0, load_transient=False)
    without_forward = profiled.memory.total_upper_bytes - profiled.kv_cache_bytes - profiled.prefill_bytes
    logits = decode_logits_bytes(arch, cap.max_num_seqs)
    assert logits > profiled.prefill_bytes            # the sampler is the larger part here: what the check needs
    assert cap.profile_peak_bytes == pytest.approx(without_forward + logits, rel=1e-6)   # whole, not / 8
    assert without_forward > inference_weight_bytes(arch, w) / 8                        # the weights are split
