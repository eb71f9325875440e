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
    # the host no longer decides; HF's unfused layer (42 kernels against vLLM's 9) pays more kernel gaps
    assert vllm.inference.decode_tokens_per_s * 0.75 <= hf.inference.decode_tokens_per_s
    assert hf.inference.decode_tokens_per_s < vllm.inference.decode_tokens_per_s
    assert hf.time.bound != "launch"


def test_every_decode_kernel_pays_its_gpu_side_gap():
    """One LLM path: a traced step adds kernel_latency_s per kernel; a decode step did not (Llama-2-7B batch 1
    on an A100 read its weights at 0.8 of the bandwidth and nothing else)."""
    from gpuwise.memory.llm import inference_weight_bytes
    from gpuwise.runtime.calibration import load_calibration
    from gpuwise.runtime.llm import decode_step

    arch = load_arch("hf:meta-llama/Llama-2-7b-hf")
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    shipped = load_calibration()

    def gpu_s(engine: str, kernel_latency_s: float) -> float:
        w = Workload("hf:meta-llama/Llama-2-7b-hf", mode="infer", precision="fp16", seq_len=128, max_new_tokens=256,
                     batch_size=1, engine=engine)
        return decode_step(arch, w, gpu, weights_bytes=inference_weight_bytes(arch, w), context_tokens=256, batch=1,
                           kv_bytes_per_element=2.0,
                           calibration=shipped.with_params(kernel_latency_s=kernel_latency_s)).gpu_s

    latency = shipped.p("kernel_latency_s")
    assert latency > 0
    paid = {e: gpu_s(e, latency) - gpu_s(e, 0.0) for e in ("vllm", "hf")}
    assert paid["vllm"] > 0
    # HF's unfused layer launches more kernels than vLLM's fused one: more gaps for the same weights
    assert paid["hf"] > paid["vllm"]
    # and twice the latency, twice the gaps: a cost per kernel, not a constant
    assert gpu_s("vllm", 2 * latency) - gpu_s("vllm", 0.0) == pytest.approx(2 * paid["vllm"])
    # the estimate's decode pays them: slower than the same step with no gap
    assert _decode("vllm").time.by_class_s["decode"] / 256 > gpu_s("vllm", 0.0)
