"""The closed form: accounting of frozen vs trained parameters, sharding, KV cache, inference, speed."""

import json
import time

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.fit import fits
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import ClosedFormLlmModel, largest_fitting_batch
from gpuwise.workload import WorkloadError as LlmError
from gpuwise.workload.decoder import load_arch
from gpuwise.workload import Workload

GIB = 2**30
L7 = "hf:meta-llama/Llama-2-7b-hf"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _w(model=L7, **kw):
    base = dict(batch_size=1, seq_len=512, precision="bf16", optimizer="adamw")
    base.update(kw)
    return Workload(model, **base)


def _parts(m) -> int:
    return (m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activations_bytes
            + m.workspace_bytes + m.other_bytes)


def test_kv_cache_of_llama3_8b_at_8k_tokens_is_one_gib_in_bf16():
    arch = load_arch("hf:meta-llama/Meta-Llama-3-8B")
    assert arch.kv_cache_bytes(8192, batch=1, bytes_per_element=2, mla_latent=True) == GIB
    assert arch.kv_cache_bytes(8192, batch=1, bytes_per_element=1, mla_latent=True) == GIB // 2     # fp8 / int8 cache


def test_gqa_shrinks_the_cache_by_heads_over_kv_heads():
    mha = load_arch("hf:meta-llama/Llama-2-70b-hf")
    assert mha.num_heads // mha.num_kv_heads == 8
    assert mha.kv_cache_bytes(1000, mla_latent=True) == 2 * 80 * 8 * 128 * 1000 * 2
    llama2_7b = load_arch(L7)   # MHA: 32 KV heads
    assert llama2_7b.kv_cache_bytes(4096, mla_latent=True) == 2 * 32 * 32 * 128 * 4096 * 2


def test_mla_caches_the_compressed_latent():
    v3 = load_arch("hf:deepseek-ai/DeepSeek-V3")
    assert v3.kv_cache_bytes(1, bytes_per_element=2, mla_latent=True) == 61 * (512 + 64) * 2


def test_gemma3_sliding_layers_stop_growing_at_the_window():
    g = load_arch("hf:google/gemma-3-12b-pt")
    short, long_ = g.kv_cache_bytes(1024, mla_latent=True), g.kv_cache_bytes(32768, mla_latent=True)
    per_token_full = 2 * 48 * 8 * 256 * 2
    assert short == 1024 * per_token_full
    assert long_ < 32768 * per_token_full / 4      # 40 of 48 layers keep only 1024 tokens


def test_breakdown_sums_to_peak_allocated_for_every_method():
    for kw in (dict(finetune="full"), dict(finetune="lora"), dict(finetune="qlora"), dict(finetune="freeze"),
               dict(finetune="full", precision="amp-bf16", num_gpus=4, sharding="zero3"),
               dict(finetune="full", num_gpus=2, sharding="ddp", grad_accum_steps=4),
               dict(mode="infer", max_new_tokens=256, batch_size=8)):
        m = estimate_llm(_w(**kw)).memory
        assert _parts(m) == m.peak_allocated_bytes, kw
        assert m.peak_allocated_bytes <= m.peak_reserved_bytes < m.total_bytes


def test_frozen_weights_get_no_gradients_or_optimizer_state():
    full = estimate_llm(_w(finetune="full", precision="amp-bf16"))
    lora = estimate_llm(_w(finetune="lora", precision="amp-bf16", lora_rank=16))
    arch = load_arch(L7)
    assert full.trainable_params == arch.param_counts().total
    assert lora.trainable_params == arch.lora_params(16)
    # LoRA: AdamW keeps two float32 states per adapter parameter, nothing for the 6.7B frozen weights
    assert lora.memory.optimizer_bytes == pytest.approx(8 * lora.trainable_params, rel=1e-6)
    assert lora.memory.weights_bytes == pytest.approx(2 * arch.param_counts().total + 4 * lora.trainable_params, rel=1e-6)
    # full fine-tuning with AMP: float32 master weights and two float32 states
    assert full.memory.optimizer_bytes == pytest.approx(8 * full.trainable_params, rel=1e-6)


def test_qlora_stores_base_weights_in_about_half_a_byte():
    lora = estimate_llm(_w(finetune="lora")).memory.weights_bytes
    qlora = estimate_llm(_w(finetune="qlora")).memory.weights_bytes
    plain_dq = estimate_llm(_w(finetune="qlora"), double_quant=False).memory.weights_bytes
    assert 0.25 < qlora / lora < 0.32
    assert plain_dq > qlora                              # double quantization saves ~0.37 bit/param


def test_zero_stages_divide_what_they_shard():
    base = dict(finetune="full", precision="amp-bf16", seq_len=1024, batch_size=1)
    def parts(sharding, n):
        return estimate_llm(_w(**base, sharding=sharding, num_gpus=n, grad_accum_steps=2)).memory
    z1, z1_8 = parts("zero1", 1), parts("zero1", 8)
    assert z1_8.optimizer_bytes == pytest.approx(z1.optimizer_bytes / 8, rel=1e-6)
    assert z1_8.gradients_bytes == z1.gradients_bytes
    z2, z2_8 = parts("zero2", 1), parts("zero2", 8)
    assert z2_8.gradients_bytes == pytest.approx(z2.gradients_bytes / 8, rel=1e-6)
    assert z2_8.optimizer_bytes == pytest.approx(z2.optimizer_bytes / 8, rel=1e-6)
    z3, z3_8 = parts("zero3", 1), parts("zero3", 8)
    assert z3_8.weights_bytes == pytest.approx(z3.weights_bytes / 8, rel=1e-6)
    assert z3_8.gradients_bytes == pytest.approx(z3.gradients_bytes / 8, rel=1e-6)
    assert z3_8.optimizer_bytes == pytest.approx(z3.optimizer_bytes / 8, rel=1e-6)
    # FSDP keeps 16-bit gradient shards (2 bytes per parameter); DeepSpeed ZeRO-3 keeps 4 (its 16-bit
    # partitions and the float32 gradients of the optimizer's partition): the rest of the step is the same
    fsdp_8 = parts("fsdp", 8)
    assert z3_8.gradients_bytes == pytest.approx(2 * fsdp_8.gradients_bytes, rel=1e-6)
    for same in ("weights_bytes", "optimizer_bytes", "activations_bytes"):
        assert getattr(z3_8, same) == getattr(fsdp_8, same)
    assert z3_8.peak_allocated_bytes > fsdp_8.peak_allocated_bytes


def test_ddp_replicates_everything_and_zero3_fits_what_ddp_cannot(catalog):
    a100 = resolve_gpu(catalog, "a100-80gb")
    w = _w("hf:Qwen/Qwen2.5-14B", finetune="full", precision="amp-bf16", num_gpus=8, seq_len=2048,
           grad_checkpointing=True)
    ddp, z3 = estimate_llm(w.with_(sharding="ddp"), a100), estimate_llm(w.with_(sharding="zero3"), a100)
    assert not fits(ddp.memory.total_bytes, a100) and fits(z3.memory.total_bytes, a100)
    assert z3.time.communication_s >= 0 and z3.time.count == 8


def test_offload_moves_optimizer_state_to_cpu():
    on_gpu = estimate_llm(_w(finetune="full", precision="amp-bf16", num_gpus=2, sharding="zero2"))
    off = estimate_llm(_w(finetune="full", precision="amp-bf16", num_gpus=2, sharding="zero2", offload="optimizer"))
    assert off.memory.optimizer_bytes == 0 and off.cpu_offload_bytes > on_gpu.memory.optimizer_bytes
    params = estimate_llm(_w(finetune="full", precision="amp-bf16", num_gpus=2, sharding="zero3", offload="params"))
    assert params.memory.weights_bytes == 0 and params.memory.peak_allocated_bytes < off.memory.peak_allocated_bytes


def test_paged_and_8bit_optimizers():
    adamw = estimate_llm(_w(finetune="full", precision="amp-bf16"))
    adam8 = estimate_llm(_w(finetune="full", precision="amp-bf16", optimizer="adamw-8bit"))
    paged = estimate_llm(_w(finetune="full", precision="amp-bf16", optimizer="paged-adamw-8bit"))
    assert adam8.memory.optimizer_bytes == pytest.approx(adamw.memory.optimizer_bytes / 4, rel=0.01)
    assert paged.spillable_bytes == paged.memory.optimizer_bytes > 0 and adam8.spillable_bytes == 0


def test_checkpointing_and_micro_batch_move_activations():
    plain = estimate_llm(_w(finetune="lora", seq_len=2048)).memory.activations_bytes
    ckpt = estimate_llm(_w(finetune="lora", seq_len=2048, grad_checkpointing=True)).memory.activations_bytes
    double = estimate_llm(_w(finetune="lora", seq_len=2048, batch_size=2)).memory.activations_bytes
    assert ckpt < plain / 3
    assert double == pytest.approx(2 * plain, rel=0.01)


def test_grad_accumulation_keeps_gradients_through_the_forward():
    one = estimate_llm(_w(finetune="full", precision="bf16", optimizer="sgd", seq_len=4096)).memory
    accum = estimate_llm(_w(finetune="full", precision="bf16", optimizer="sgd", seq_len=4096, grad_accum_steps=4)).memory
    assert accum.peak_allocated_bytes > one.peak_allocated_bytes
    assert accum.gradients_bytes > 0


def test_lora_step_is_faster_than_full_and_qlora_slower_than_lora(catalog):
    gpu = resolve_gpu(catalog, "a100-80gb")
    t = {ft: estimate_llm(_w(finetune=ft, precision="amp-bf16", seq_len=2048, batch_size=4), gpu).time.step_time_s
         for ft in ("full", "lora", "qlora")}
    assert t["lora"] < t["full"] and t["qlora"] > t["lora"]


def test_inference_reports_cache_ttft_decode_and_limits(catalog):
    gpu = resolve_gpu(catalog, "l20")
    est = estimate_llm(_w("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=2048, max_new_tokens=512, batch_size=4), gpu)
    inf = est.inference
    arch = load_arch("hf:Qwen/Qwen2.5-7B")
    assert inf.kv_cache_bytes == arch.kv_cache_bytes(2560, 4, mla_latent=True)
    assert inf.ttft_s > 0 and inf.decode_tokens_per_s > 0
    # decode is bandwidth-bound: one step cannot beat reading the weights once
    assert 4 / inf.decode_tokens_per_s >= inf.weights_bytes / (gpu.memory_bandwidth_gbs * 1e9)
    assert inf.max_context_tokens > 2560 and inf.max_batch_size >= 4
    more = _w("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=2048, max_new_tokens=512, batch_size=inf.max_batch_size)
    assert fits(estimate_llm(more, gpu).memory.total_upper_bytes, gpu)
    assert not fits(estimate_llm(more.with_(batch_size=inf.max_batch_size + 1), gpu).memory.total_upper_bytes, gpu)
    # HF generate allocates as it goes; vLLM pre-allocates a share of what the driver reports
    assert inf.serving_reserved_bytes is None and not any("gpu_memory_utilization" in n for n in est.notes)
    vllm = estimate_llm(_w("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=2048, max_new_tokens=512, batch_size=4,
                           engine="vllm"), gpu)
    assert vllm.inference.serving_reserved_bytes == int(0.9 * gpu.visible_memory_bytes)
    assert any("gpu_memory_utilization" in n for n in vllm.notes)


def test_longest_context_that_fits_is_a_real_limit(catalog):
    gpu = resolve_gpu(catalog, "l20")
    w = _w("hf:meta-llama/Llama-3.1-8B", mode="infer", seq_len=1024, batch_size=16)
    longest = estimate_llm(w, gpu).inference.max_context_tokens
    assert 1024 < longest < 131072
    assert fits(estimate_llm(w.with_(seq_len=longest), gpu).memory.total_upper_bytes, gpu)
    assert not fits(estimate_llm(w.with_(seq_len=longest + 64), gpu).memory.total_upper_bytes, gpu)


def test_quantized_kv_cache_halves_it():
    w = _w("hf:meta-llama/Llama-3.1-8B", mode="infer", seq_len=8192)
    assert estimate_llm(w, kv_cache_dtype="int8").inference.kv_cache_bytes * 2 == estimate_llm(w).inference.kv_cache_bytes
    served = w.with_(engine="vllm")       # an FP8 cache is vLLM's (HF generate has none)
    assert (estimate_llm(served, kv_cache_dtype="fp8").inference.kv_cache_bytes * 2
            == estimate_llm(served).inference.kv_cache_bytes)
    with pytest.raises(LlmError, match="fp7"):
        estimate_llm(w, kv_cache_dtype="fp7")


@pytest.mark.parametrize("model", ["hf:Qwen/Qwen2.5-7B", "hf:Qwen/Qwen2.5-14B", "hf:meta-llama/Llama-3.1-70B",
                                   "hf:Qwen/Qwen3-30B-A3B", "hf:mistralai/Mixtral-8x7B-v0.1"])
def test_big_models_give_training_and_inference_estimates_quickly(catalog, model):
    gpu = resolve_gpu(catalog, "h100-sxm")
    start = time.perf_counter()
    train = estimate_llm(_w(model, finetune="qlora", precision="amp-bf16", seq_len=2048, grad_checkpointing=True), gpu)
    infer = estimate_llm(_w(model, mode="infer", seq_len=4096, max_new_tokens=256, num_gpus=4), gpu)
    elapsed = time.perf_counter() - start
    for est in (train, infer):
        assert est.memory.total_bytes > 0 and est.time.step_time_s > 0
        json.dumps(est.to_dict())
    assert infer.inference.max_context_tokens > 0
    assert elapsed < 5.0, "closed form must stay interactive"


def test_max_micro_batch_is_the_largest_that_fits(catalog):
    gpu = resolve_gpu(catalog, "rtx-4090")
    w = _w("hf:Qwen/Qwen2.5-7B", finetune="qlora", precision="amp-bf16", seq_len=1024, grad_checkpointing=True)
    b = largest_fitting_batch(ClosedFormLlmModel(w), gpu, headroom_fraction=0.0)
    assert b >= 1
    assert estimate_llm(w.with_(batch_size=b), gpu).memory.total_upper_bytes <= gpu.visible_memory_bytes
    assert estimate_llm(w.with_(batch_size=b + 1), gpu).memory.total_upper_bytes > gpu.visible_memory_bytes


def test_full_fine_tuning_of_a_quantized_model_is_refused():
    with pytest.raises(LlmError, match="qlora"):
        estimate_llm(_w(finetune="full", quant="nf4"))


def test_vllm_prefills_a_prompt_at_a_time_into_one_kv_pool(catalog):
    """vLLM's working set of a batch: one prompt's prefill (its scheduler's token budget, chunked prefill) and a
    KV pool allocated once; was HF's whole batch prefilled at once, the pool given the caching allocator's 15%
    (a vLLM batch its own capacity holds read 'needs 88.8 GiB of 80 GiB')."""
    from gpuwise.memory.llm import infer_memory

    gpu = resolve_gpu(catalog, "a100-80gb-sxm4")
    arch = load_arch(L7)
    sizes = dict(prompt_tokens=1024, new_tokens=256, kv_bytes_per_element=2.0)
    hf, vllm = (infer_memory(arch, _w(mode="infer", engine=e, max_new_tokens=256), gpu, batch=64, **sizes)
                for e in ("hf", "vllm"))
    one = infer_memory(arch, _w(mode="infer", engine="vllm", max_new_tokens=256), gpu, batch=1, **sizes)
    assert vllm.prefill_bytes == one.prefill_bytes and hf.prefill_bytes > 32 * vllm.prefill_bytes
    assert vllm.kv_cache_bytes == hf.kv_cache_bytes
    pool = vllm.memory
    assert pool.peak_reserved_bytes - pool.peak_allocated_bytes < 0.02 * pool.peak_allocated_bytes
    assert hf.memory.peak_reserved_bytes - hf.memory.peak_allocated_bytes > 0.1 * hf.kv_cache_bytes
