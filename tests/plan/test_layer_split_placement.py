"""HF generate's layer split (``splits_layers``, review findings): (a) the memory gave the fullest GPU its
ceil(L/n)/L share of the KV cache but a flat 1/n of the weights, though it holds that larger share of the layer
weights too; (b) the profile let HF generate split the layers over several machines, which the estimate's own
note says HF does not run; (c) the hand-offs of a split spanning nodes were all priced on the network, not only
the ones that cross a node boundary."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.memory.llm import infer_memory, inference_weight_bytes
from gpuwise.plan.errors import PlanError
from gpuwise.plan.profile import ClosedFormLlmModel
from gpuwise.runtime.llm import decode_step, layer_handoffs_s, prefill_parts
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.parallelism import layer_split_share, layer_split_total_bytes, layer_split_weight_bytes

QWEN = "hf:Qwen/Qwen2.5-7B"      # 28 layers, an untied 152k x 3584 LM head
SIZES = dict(prompt_tokens=1024, new_tokens=256, batch=4, kv_bytes_per_element=2.0)


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _job(engine: str, count: int, model: str = QWEN) -> Workload:
    return Workload(model, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=4, engine=engine,
                    precision="bf16", num_gpus=count)


def test_the_fullest_gpu_holds_its_share_of_the_layer_weights_as_of_the_kv_cache(h100):
    arch = load_arch(QWEN)
    one, three = (infer_memory(arch, _job("hf", n), h100, **SIZES) for n in (1, 3))
    share = layer_split_share(arch, 3)
    assert share == 10 / 28                                       # ceil(28 / 3) layers on the fullest GPU
    assert three.kv_cache_bytes == pytest.approx(one.kv_cache_bytes * share)
    counts = arch.param_counts()
    embedding, head = counts.embedding * 2, (counts.lm_head + arch.hidden_size) * 2     # bf16; the final norm
    layers = one.weights_bytes - embedding - head
    # its 10 layers' weights and the larger end (the LM head and final norm: accelerate's last GPU)
    assert three.weights_bytes == pytest.approx(layers * share + max(embedding, head))
    assert three.weights_bytes > one.weights_bytes / 3 * 1.1      # was a flat third
    # the whole model is still one GPU's worth in the time model (it reads every weight a token)
    assert layer_split_total_bytes(arch, _job("hf", 3), three.weights_bytes) == pytest.approx(one.weights_bytes)


def test_a_tied_head_stays_with_the_embedding(h100):
    model = "hf:Qwen/Qwen2.5-0.5B"       # tied embeddings: one vocabulary matrix, on the first GPU
    arch = load_arch(model)
    assert arch.tie_word_embeddings
    total = inference_weight_bytes(arch, _job("hf", 1, model))
    embedding = arch.param_counts().embedding * 2
    split = layer_split_weight_bytes(arch, _job("hf", 4, model), total)
    layers = total - embedding - arch.hidden_size * 2
    assert split == pytest.approx(layers * layer_split_share(arch, 4) + embedding)


def test_the_time_reads_all_the_weights_from_the_memorys_share(h100):
    arch = load_arch(QWEN)
    total = inference_weight_bytes(arch, _job("hf", 1))
    per_gpu = infer_memory(arch, _job("hf", 3), h100, **SIZES).weights_bytes
    kw = dict(context_tokens=1152, batch=4, kv_bytes_per_element=2.0)
    alone = decode_step(arch, _job("hf", 1), h100, weights_bytes=total, **kw)
    split = decode_step(arch, _job("hf", 3), h100, weights_bytes=per_gpu, **kw)
    hand_off = layer_handoffs_s(arch, _job("hf", 3), 4, topology_for(h100))
    assert split.gpu_s == pytest.approx(alone.gpu_s + hand_off)
    pre = dict(prompt_tokens=1024, batch=4)
    assert prefill_parts(arch, _job("hf", 3), h100, weights_bytes=per_gpu, **pre).ttft_s == pytest.approx(
        prefill_parts(arch, _job("hf", 1), h100, weights_bytes=total, **pre).ttft_s
        + layer_handoffs_s(arch, _job("hf", 3), 4096, topology_for(h100)))


def test_hf_generate_is_refused_over_several_machines(h100):
    model = ClosedFormLlmModel(_job("hf", 1, "hf:meta-llama/Llama-2-7b-hf"))
    assert model.count_refusal(16) is None                         # GPU-independent: 16 of 32 layers
    assert model.estimate(h100, count=8, with_time=False).memory.weights_bytes > 0     # one machine of 8
    with pytest.raises(PlanError, match="one machine") as refused:
        model.estimate(h100, count=16)
    assert "\n" not in str(refused.value)
    # vLLM's tensor parallelism is not a layer split, but one replica over two machines is refused too, as
    # recommend leaves it out (tests/plan/test_serving_plan_trial_defects.py)
    vllm = ClosedFormLlmModel(_job("vllm", 1, "hf:meta-llama/Llama-2-7b-hf"))
    assert vllm.count_refusal(16) is None
    with pytest.raises(PlanError, match="Ray cluster"):
        vllm.estimate(h100, count=16, with_time=False)


def test_the_cli_refuses_it_in_one_line_exit_2(cli_run):
    code, out, err = cli_run("estimate", "hf:meta-llama/Llama-2-7b-hf", "--mode", "infer", "--engine", "hf",
                             "--seq-len", "512", "--max-new-tokens", "16", "--num-gpus", "16", "--gpu", "h100-sxm")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "one machine" in err and "--engine vllm" in err


def test_only_the_hops_across_a_node_boundary_take_the_network(h100):
    arch = load_arch(QWEN)
    topology = dataclasses.replace(topology_for(h100), gpus_per_node=4)
    eight = _job("hf", 8)
    size = 4 * arch.hidden_size * 2

    def hop_s(link) -> float:
        return link.latency_s + size / (link.bus_gbs * 1e9)

    inside, network = hop_s(topology.ring_link(8)), hop_s(topology.network)
    assert network > inside
    # 8 GPUs in 2 nodes of 4: 6 hops inside a node, 1 across (all 7 were priced on the network)
    assert layer_handoffs_s(arch, eight, 4, topology) == pytest.approx(6 * inside + network)
    assert layer_handoffs_s(arch, _job("hf", 4), 4, topology) == pytest.approx(3 * inside)
    assert layer_handoffs_s(arch, _job("hf", 1), 4, topology) == 0.0
