"""LLM serving estimates, HF generate against vLLM on 1-8 GPUs (a Llama-2-7B-shaped config.json, as a user without
the Hub passes it). ``inference.gpu_memory_utilization`` is vLLM's reservation: HF generate reported vLLM's 0.9 as if
it applied (its ``serving_reserved_bytes`` null beside it); it is null there now. The rest pins what a renter reads off
a sweep: per-GPU weights fall with the count, tensor parallelism does not slow a token on NVLink, a larger
reservation holds more sequences."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.model import DEFAULT_GPU_MEMORY_UTILIZATION

SERVING = ["--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256", "-b", "8", "--gpu", "a100-80gb-sxm4",
           "--json"]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _serve(model: str, engine: str, num_gpus: int = 1, **kw) -> Workload:
    return Workload(model, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=kw.pop("batch_size", 32),
                    precision="fp16", engine=engine, num_gpus=num_gpus, **kw)


def test_hf_generate_reports_no_vllm_memory_utilization(cli_json, llama7b_spec):
    inference = cli_json(["estimate", llama7b_spec, *SERVING])["inference"]
    assert inference["serving_reserved_bytes"] is None
    assert inference["gpu_memory_utilization"] is None


@pytest.mark.parametrize(("flags", "share"), [([], DEFAULT_GPU_MEMORY_UTILIZATION),
                                              (["--gpu-memory-utilization", "0.5"], 0.5)])
def test_vllm_reports_the_share_it_reserves_beside_the_bytes(cli_json, llama7b_spec, flags, share):
    inference = cli_json(["estimate", llama7b_spec, *SERVING, "--engine", "vllm", *flags])["inference"]
    assert inference["gpu_memory_utilization"] == inference["vllm"]["gpu_memory_utilization"] == share
    assert inference["serving_reserved_bytes"] == inference["vllm"]["reserved_bytes"] > 0


def test_the_table_names_vllms_share_and_hfs_plain_total(cli_run, llama7b_spec):
    table = [a for a in SERVING if a != "--json"]
    code, hf, _ = cli_run("estimate", llama7b_spec, *table)
    assert code == 0 and "total (nvidia-smi)" in hf and "vLLM's" not in hf
    code, vllm, _ = cli_run("estimate", llama7b_spec, *table, "--engine", "vllm", "--gpu-memory-utilization", "0.5")
    assert code == 0 and "total (nvidia-smi: vLLM's 0.5 of the GPU)" in vllm


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_per_gpu_weights_fall_with_every_added_gpu(catalog, llama7b_spec, engine):
    gpu = resolve_gpu(catalog, "a100-80gb-sxm4")
    weights = [estimate_llm(_serve(llama7b_spec, engine, n), gpu).memory.weights_bytes for n in (1, 2, 4, 8)]
    assert all(later < earlier for earlier, later in zip(weights, weights[1:])), weights


@pytest.mark.parametrize("gpu_id", ["a100-80gb-sxm4", "h100-sxm"])
def test_tensor_parallel_vllm_decodes_a_token_faster_on_nvlink_at_batch_32(catalog, llama7b_spec, gpu_id):
    gpu = resolve_gpu(catalog, gpu_id)
    tpot = [estimate_llm(_serve(llama7b_spec, "vllm", n), gpu).inference.time_per_output_token_s for n in (1, 2, 4, 8)]
    assert all(later < earlier for earlier, later in zip(tpot, tpot[1:])), tpot


def test_hf_layer_split_costs_a_token_no_more_than_its_hand_off_on_nvlink(catalog, llama7b_spec):
    """HF generate runs the layers one GPU after another (docs/llm.md): a token takes one GPU's time for all the
    weights plus the hidden states' hand-off, so 2 GPUs are as fast as one within that hand-off, never slower."""
    gpu = resolve_gpu(catalog, "h100-sxm")
    one, two = (estimate_llm(_serve(llama7b_spec, "hf", n), gpu).inference.time_per_output_token_s for n in (1, 2))
    assert one <= two < one * 1.01


@pytest.mark.parametrize(("gpu_id", "num_gpus"), [("a100-80gb-sxm4", 1), ("h100-sxm", 2), ("l4", 2)])
def test_vllm_holds_more_sequences_as_it_reserves_more(catalog, llama7b_spec, gpu_id, num_gpus):
    gpu = resolve_gpu(catalog, gpu_id)
    held = [estimate_llm(_serve(llama7b_spec, "vllm", num_gpus, batch_size=1, gpu_memory_utilization=share), gpu)
            .inference.vllm.sequences(1024 + 256) for share in (0.5, 0.7, 0.9, 1.0)]
    assert all(later > earlier for earlier, later in zip(held, held[1:])), held


def test_a_traced_decoder_generating_reports_no_vllm_memory_utilization(cli_json):
    """HF generate of a traced decoder (GPT-2): the same field, from the same InferenceEstimate."""
    inference = cli_json(["estimate", "hf:gpt2", "--mode", "infer", "--seq-len", "16", "--max-new-tokens", "4",
                          "-b", "1", "--gpu", "t4", "--json"])["inference"]
    assert inference["serving_reserved_bytes"] is None and inference["gpu_memory_utilization"] is None
