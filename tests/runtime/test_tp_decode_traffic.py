"""Tensor-parallel decode all-reduces carry the batch's hidden states (a new user's trial): Llama-3-70B on 16
H100s (two nodes, the assumed 10 Gb/s ethernet between them), 1,024 + 256 tokens at batch 32, printed 24.3 ms
per output token "bound by compute" with communication 98% of the step, because a decode step's all-reduces
were sized at 1 byte while the prefill's paid the ethernet. Each of a layer's two all-reduces carries the
batch's tokens x hidden size x the activation's bytes (32 x 8192 x 2 B = 512 KB); the label says
communication where that dominates, and serving over two nodes warns about the assumed link as training does."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.memory.llm import infer_memory
from gpuwise.runtime.comm import collective_s, topology_notes
from gpuwise.runtime.llm import TP_ALL_REDUCES_PER_LAYER, decode_step, serve_time
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

L70 = "hf:meta-llama/Meta-Llama-3-70B"
L8 = "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _job(model: str, count: int, batch: int = 32) -> Workload:
    return Workload(model, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=batch, engine="vllm",
                    precision="bf16", num_gpus=count)


def _decode(model: str, gpu, count: int, batch: int = 32):
    arch, w = load_arch(model), _job(model, count, batch)
    weights = infer_memory(arch, w, gpu, prompt_tokens=1024, new_tokens=256, batch=batch,
                           kv_bytes_per_element=2.0).weights_bytes
    return decode_step(arch, w, gpu, weights_bytes=weights, context_tokens=1024 + 128, batch=batch,
                       kv_bytes_per_element=2.0)


def _serve(model: str, gpu, count: int, batch: int = 32):
    arch, w = load_arch(model), _job(model, count, batch)
    weights = infer_memory(arch, w, gpu, prompt_tokens=1024, new_tokens=256, batch=batch,
                           kv_bytes_per_element=2.0).weights_bytes
    return serve_time(arch, w, gpu, weights_bytes=weights, prompt_tokens=1024, new_tokens=256, batch=batch,
                      kv_bytes_per_element=2.0)


def test_a_decode_all_reduce_carries_the_batchs_hidden_states(catalog):
    h100 = resolve_gpu(catalog, "h100-sxm")
    arch, topo = load_arch(L70), topology_for(h100)
    for count, batch in ((8, 32), (16, 32), (16, 256)):
        bytes_each = batch * arch.hidden_size * 2          # bf16 activations
        expected = TP_ALL_REDUCES_PER_LAYER * arch.num_layers * collective_s(
            "all_reduce", bytes_each, count, topo, graph_captured=True)    # vLLM replays decode as CUDA graphs
        assert _decode(L70, h100, count, batch).tp_comm_s == pytest.approx(expected)
    # more sequences, more bytes: the all-reduces take longer
    assert _decode(L70, h100, 16, 256).tp_comm_s > 4 * _decode(L70, h100, 16, 32).tp_comm_s


def test_two_nodes_on_ethernet_pay_the_bytes_in_every_decode_step(catalog):
    h100 = resolve_gpu(catalog, "h100-sxm")
    arch, topo = load_arch(L70), topology_for(h100)
    network_bytes_per_s = topo.network.bus_gbs * 1e9
    # at least the inter-node half of a ring of 2 nodes: the whole 512 KB over the network, 160 times a token
    floor_s = TP_ALL_REDUCES_PER_LAYER * arch.num_layers * 32 * arch.hidden_size * 2 / network_bytes_per_s
    d = _decode(L70, h100, 16)
    assert d.step_s > floor_s > 0.05          # was 24.3 ms a token
    assert d.tp_comm_s > 0.9 * d.gpu_s


def test_inside_one_nvswitch_node_the_bytes_change_little(catalog):
    h100 = resolve_gpu(catalog, "h100-sxm")
    topo = topology_for(h100)
    for model in (L8, L70):
        d = _decode(model, h100, 8)
        latency_only = TP_ALL_REDUCES_PER_LAYER * load_arch(model).num_layers * collective_s(
            "all_reduce", 1.0, 8, topo, graph_captured=True)
        assert 0 < d.tp_comm_s - latency_only < 0.1 * d.step_s     # the 512 KB / 256 KB add under a tenth
    # 8-way tensor parallelism still beats one GPU per token (tests/runtime/test_small_all_reduce.py)
    assert _decode(L8, h100, 8).step_s < 0.7 * _decode(L8, h100, 1).step_s


def test_pcie_without_peer_to_peer_pays_much_more_than_nvlink(catalog):
    rtx = resolve_gpu(catalog, "rtx-4090")     # GeForce: collectives through host memory
    h100 = resolve_gpu(catalog, "h100-sxm")
    pcie, nvlink = _decode(L8, rtx, 4, 256), _decode(L8, h100, 4, 256)
    assert pcie.tp_comm_s > 10 * nvlink.tp_comm_s
    assert pcie.tp_comm_s > 0.3 * pcie.step_s


def test_the_bound_says_communication_where_it_dominates_and_not_where_it_does_not(catalog):
    h100 = resolve_gpu(catalog, "h100-sxm")
    across = _serve(L70, h100, 16).step
    assert across.communication_s > across.step_time_s / 2
    assert across.bound == "communication"                 # was "compute"
    inside = _serve(L70, h100, 8).step
    assert inside.bound != "communication"


def test_serving_on_two_nodes_warns_about_the_assumed_link_as_training_does(catalog):
    h100 = resolve_gpu(catalog, "h100-sxm")
    (note,) = topology_notes(16, topology_for(h100))
    assert "assumed" in note and "10 Gb/s" in note
    assert note in _serve(L70, h100, 16).step.warnings
    assert not any("assumed" in w for w in _serve(L70, h100, 8).step.warnings)


def test_the_trials_replica_over_two_nodes_is_now_refused_by_the_cli(cli_run):
    """The trial's command itself is refused since (one vLLM replica over two machines runs pipeline parallel on a
    Ray cluster, which gpuwise neither times nor launches: recommend's rule); the figures above stay the library's."""
    code, out, err = cli_run("estimate", L70, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256",
                             "-b", "32", "--engine", "vllm", "--gpu", "h100-sxm", "--num-gpus", "16", "--json")
    assert code == 2 and not out and "one vLLM replica over 2 machines" in err