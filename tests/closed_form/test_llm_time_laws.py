"""The closed form's LLM time comes from the per-kernel laws, not from one flat utilisation (issue 24)."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import gemm_time_s
from gpuwise.runtime.rates import peak_flops_per_s, rate_peak_flops_per_s
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config, load_arch

LLAMA_125M = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768,
              "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
              "num_key_value_heads": 12, "vocab_size": 32000, "tie_word_embeddings": False}
L70 = "hf:meta-llama/Llama-2-70b-hf"
L7 = "hf:meta-llama/Llama-2-7b-hf"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _train(model, gpu, arch=None, **fields):
    w = Workload(model, **{**dict(batch_size=4, seq_len=2048, precision="bf16", optimizer="none"), **fields})
    return estimate_llm(w, gpu, arch=arch)


def _mfu(est, gpu) -> float:
    """Model FLOPs (6 x matmul parameters x tokens + causal attention) per second over the bf16 peak."""
    return est.flops_per_step / est.time.step_time_s / peak_flops_per_s(gpu, "bf16")


@pytest.mark.parametrize("gpu_id", ["a100-80gb", "h100-sxm"])
def test_a_70b_training_step_reaches_a_higher_share_of_peak_than_a_125m_one(catalog, gpu_id):
    gpu = resolve_gpu(catalog, gpu_id)
    small = _mfu(_train("llama-125m", gpu, arch=arch_from_config(LLAMA_125M)), gpu)
    big = _mfu(_train(L70, gpu), gpu)
    assert big > small * 1.1
    assert 0 < small < big < 1


def test_bigger_gemms_reach_a_higher_share_of_the_peak(catalog):
    gpu, cal = resolve_gpu(catalog, "a100-80gb"), load_calibration()
    peak = rate_peak_flops_per_s(gpu, "bf16")
    shares = [2 * m * n * k / peak / gemm_time_s([(1, m, n, k)], gpu, "bf16", cal, elem_bytes=2)
              for m, n, k in ((256, 256, 256), (2048, 768, 768), (8192, 8192, 8192))]
    assert shares == sorted(shares) and shares[-1] < 1


@pytest.mark.parametrize("gpu_id", ["a100-80gb", "h100-sxm", "rtx-4090", "l4", "t4"])
@pytest.mark.parametrize("fields", [dict(), dict(finetune="lora"), dict(finetune="qlora"), dict(finetune="freeze"),
                                    dict(grad_checkpointing=True), dict(attention="eager", seq_len=512),
                                    dict(precision="amp-bf16", optimizer="adamw"), dict(batch_size=1, seq_len=128)])
def test_step_time_is_never_below_its_flops_at_the_peak(catalog, gpu_id, fields):
    gpu = resolve_gpu(catalog, gpu_id)
    precision = fields.pop("precision", "bf16" if gpu.has_bf16 else "fp16")
    for model in (L7, "hf:Qwen/Qwen2.5-0.5B"):
        est = _train(model, gpu, precision=precision, **fields)
        assert est.time.step_time_s >= est.flops_per_step / peak_flops_per_s(gpu, precision), (model, fields)


def test_prefill_and_decode_are_never_below_their_flops_at_the_peak(catalog):
    for gpu_id in ("a100-80gb", "h100-sxm", "l4"):
        gpu = resolve_gpu(catalog, gpu_id)
        for batch in (1, 32, 256):
            w = Workload(L7, mode="infer", batch_size=batch, seq_len=1024, max_new_tokens=128, precision="bf16",
                         engine="vllm")
            est = estimate_llm(w, gpu)
            arch, peak = load_arch(L7), peak_flops_per_s(gpu, "bf16")
            assert est.inference.ttft_s >= arch.prefill_flops(1024, batch) / peak
            assert est.inference.time_per_output_token_s >= arch.decode_step_flops(1024 + 64, batch) / peak


@pytest.mark.parametrize("model", [L7, "hf:Qwen/Qwen2.5-7B", L70])
def test_a_lora_step_is_faster_than_full_fine_tuning_of_the_same_model(catalog, model):
    gpu = resolve_gpu(catalog, "a100-80gb")
    full = _train(model, gpu, finetune="full", optimizer="adamw").time
    lora = _train(model, gpu, finetune="lora", optimizer="adamw").time
    assert lora.step_time_s < full.step_time_s
    assert lora.by_class_s["matmul"] < full.by_class_s["matmul"]     # no weight gradients of the base


def test_lora_gemms_are_fewer_even_where_its_extra_kernels_make_the_step_slower(catalog):
    """Qwen2.5-0.5B: LoRA on every linear saves the base's weight gradients, but PEFT's dropout, scaling and
    sums cost more than that on a 896-wide model (the traced path says the same: 294 vs 276 ms)."""
    gpu = resolve_gpu(catalog, "a100-80gb")
    full = _train("hf:Qwen/Qwen2.5-0.5B", gpu, finetune="full", optimizer="adamw").time
    lora = _train("hf:Qwen/Qwen2.5-0.5B", gpu, finetune="lora", optimizer="adamw").time
    assert lora.by_class_s["matmul"] < full.by_class_s["matmul"]
    assert lora.by_class_s["elementwise"] > full.by_class_s["elementwise"]


def test_a_tiny_llm_step_is_launch_bound_and_the_host_time_counts(catalog):
    """A new user's trial: a 125M-class step at 1 x 128 tokens listed ~1,500 kernels with host_s 0, so it came
    out faster than eager PyTorch can even issue them. The closed form now takes the larger of GPU and host
    time as the traced path does; at 4 x 2048 the GPU still sets the pace."""
    h100 = resolve_gpu(catalog, "h100-sxm")
    arch = arch_from_config(LLAMA_125M)
    tiny = _train("llama-125m", h100, arch=arch, batch_size=1, seq_len=128).time
    assert tiny.bound == "launch" and tiny.host_s > tiny.device_s > 0
    assert tiny.step_time_s >= tiny.host_s
    assert tiny.by_class_s["launch"] > 0 and any("launch-bound" in w for w in tiny.warnings)
    big = _train("llama-125m", h100, arch=arch).time
    assert big.bound != "launch" and big.host_s < big.device_s
