"""HF generate's decode of a MoE model pays transformers' Python loop over the experts hit (trial of LLM serving,
defect 2): Qwen3-30B-A3B's host time was Llama's 42 ops a layer x 48 layers, 28.3 ms a token at batch 1 and 39 ms at
batch 128, with no term for the ~11 eager calls and two host waits each expert hit costs
(``Qwen3MoeSparseMoeBlock.forward``: expert_hit by nonzero, ``self.experts[expert_idx]``, ``torch.where``)."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import inference_weight_bytes
from gpuwise.runtime.llm import decode_step, hf_expert_loop, prefill_parts, train_step_time
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

MOE = "hf:Qwen/Qwen3-30B-A3B"


@pytest.fixture(scope="module")
def h100():
    return {g.id: g for g in load_catalog(user_file=False).gpus}["h100-sxm"]


def _decode(arch, h100, batch, engine="hf", model=MOE):
    w = Workload(model, mode="infer", precision="bf16", engine=engine, batch_size=batch, seq_len=1024,
                 max_new_tokens=256)
    return decode_step(arch, w, h100, weights_bytes=inference_weight_bytes(arch, w), context_tokens=1152,
                       batch=batch, kv_bytes_per_element=2.0)


def test_the_experts_hit_grow_with_the_batch_as_uniform_routing_gives():
    arch = load_arch(MOE)
    e, k = arch.num_experts, arch.experts_per_token
    for rows in (1, 4, 128):
        assert hf_expert_loop(arch, rows).hits_per_layer == pytest.approx(e * (1 - (1 - k / e) ** rows))
    assert hf_expert_loop(load_arch("hf:meta-llama/Llama-3.1-8B"), 1) is None


def test_hf_moe_decode_pays_the_expert_loop_host_calls_and_waits(h100):
    arch = load_arch(MOE)
    one, many = _decode(arch, h100, 1), _decode(arch, h100, 128)
    loop1, loop128 = hf_expert_loop(arch, 1), hf_expert_loop(arch, 128)
    assert one.syncs == pytest.approx(loop1.syncs) and many.syncs == pytest.approx(loop128.syncs)
    assert loop1.syncs >= arch.num_moe_layers * (1 + 2 * arch.experts_per_token) * 0.99
    # 128 sequences hit nearly every expert a layer: many more calls than one sequence's 8
    assert many.host_s > 5 * one.host_s
    assert one.step_s > 0.06       # was 28.3 ms: the dense layer's host time alone
    # vLLM's fused MoE kernel has no Python loop
    assert _decode(arch, h100, 1, engine="vllm").syncs == 0


def test_training_says_the_loop_in_the_same_words(h100):
    from gpuwise.memory.llm import train_memory

    arch = load_arch(MOE)
    w = Workload(MOE, mode="train", precision="bf16", finetune="lora", batch_size=1, seq_len=512)
    st = train_step_time(arch, w, h100, train_memory(arch, w, h100))
    assert any(hf_expert_loop(arch, 512).words() in warning for warning in st.warnings)


def test_hf_moe_prefill_pays_the_loop_over_every_expert_its_prompt_hits(h100):
    # the review: prefill was quoted at 0.12 s for a 1,024-token prompt whose tokens hit all 128 experts of every
    # layer (~1 s of eager calls), about one decode step's time; a dense model and vLLM pay no loop
    arch = load_arch(MOE)
    loop = hf_expert_loop(arch, 1024)
    assert loop.hits_per_layer == pytest.approx(arch.num_experts)
    parts = {}
    for engine in ("hf", "vllm"):
        w = Workload(MOE, mode="infer", precision="bf16", engine=engine, batch_size=1, seq_len=1024, max_new_tokens=256)
        parts[engine] = prefill_parts(arch, w, h100, weights_bytes=inference_weight_bytes(arch, w), prompt_tokens=1024,
                                      batch=1)
    assert parts["hf"].ttft_s > loop.host_s
    assert parts["vllm"].loop is None and parts["vllm"].ttft_s < loop.host_s
