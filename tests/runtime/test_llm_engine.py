"""LLM decode runs at the speed of what runs it: HF generate in eager mode is host-bound per token,
a serving engine with CUDA graphs (vLLM) reads the weights at the GPU's bandwidth."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.llm import hf_decode_host_s
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch


def _decode(engine: str, gpu: str = "a100-80gb-sxm4", batch: int = 1):
    w = Workload("hf:meta-llama/Llama-2-7b-hf", mode="infer", precision="fp16", seq_len=128, max_new_tokens=256,
                 batch_size=batch, engine=engine)
    return estimate_llm(w, resolve_gpu(load_catalog(user_file=False), gpu))


def test_hf_generate_decodes_at_a_third_to_a_half_of_a_serving_engine():
    # the defect: decode labelled "eager" ran at a serving engine's bandwidth (118 tok/s, Llama-2-7B, A100 80GB)
    hf, vllm = _decode("hf"), _decode("vllm")
    ratio = hf.inference.decode_tokens_per_s / vllm.inference.decode_tokens_per_s
    assert 1 / 3 <= ratio <= 1 / 2
    assert hf.time.bound == "launch" and any("host-bound" in w for w in hf.time.warnings)
    assert vllm.time.bound == "memory"


def test_the_host_cost_does_not_depend_on_the_gpu_and_grows_with_layers():
    assert hf_decode_host_s(load_arch("hf:meta-llama/Llama-2-13b-hf")) > hf_decode_host_s(load_arch("hf:meta-llama/Llama-2-7b-hf"))
    h100, t4 = _decode("hf", "h100-sxm"), _decode("hf", "t4")
    # a faster GPU cannot make eager decode faster than its host issues the kernels
    assert h100.inference.decode_tokens_per_s == pytest.approx(_decode("hf", "a100-80gb-sxm4").inference.decode_tokens_per_s, rel=0.05)
    assert t4.inference.decode_tokens_per_s < h100.inference.decode_tokens_per_s


def test_a_large_batch_is_bandwidth_or_compute_bound_on_either_engine():
    hf, vllm = _decode("hf", batch=256), _decode("vllm", batch=256)
    assert hf.inference.decode_tokens_per_s == pytest.approx(vllm.inference.decode_tokens_per_s, rel=0.1)
