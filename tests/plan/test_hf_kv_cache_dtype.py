"""--kv-cache-dtype fp8 with HF generate: transformers' caches are the model's own dtype or its QuantizedCache's integer
codes (quanto: 2/4 bits, HQQ: 1-4/8 bits; transformers 4.57 ``cache_utils``), and it has no FP8 cache. gpuwise
accepted ``--engine hf --kv-cache-dtype fp8`` and halved the cache as if transformers could hold it; it is refused in
one line naming what HF generate takes, and stays accepted for vLLM, whose FP8 cache it is."""

import pytest

from gpuwise.plan.generation import generation_arch
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.storage import HF_KV_CACHE_DTYPES, KV_CACHE_BYTES

# 2 × 32 layers × 32 KV heads × 128 × 2 B: vLLM's and transformers' 16-bit cache a token
KV_BYTES_PER_TOKEN_16BIT = 2 * 32 * 32 * 128 * 2


def _serving(model: str, **kw) -> Workload:
    return Workload(model, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=8, precision="fp16", **kw)


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_hf_generate_refuses_an_fp8_kv_cache_naming_what_it_takes(llama7b_spec, dtype):
    with pytest.raises(WorkloadError) as refused:
        estimate_llm(_serving(llama7b_spec, engine="hf"), kv_cache_dtype=dtype)
    message = str(refused.value)
    assert "\n" not in message and dtype in message and "int8" in message and "int4" in message
    assert "--engine vllm" in message


def test_vllm_keeps_its_fp8_kv_cache_at_one_byte_an_element(llama7b_spec):
    served = estimate_llm(_serving(llama7b_spec, engine="vllm"), kv_cache_dtype="fp8").inference
    assert served.kv_cache_bytes_per_token * 2 == KV_BYTES_PER_TOKEN_16BIT


@pytest.mark.parametrize("dtype, bytes_per_element", [("auto", 2), ("int8", 1), ("int4", 0.5)])
def test_hf_generate_keeps_its_own_and_quantized_caches(llama7b_spec, dtype, bytes_per_element):
    served = estimate_llm(_serving(llama7b_spec, engine="hf"), kv_cache_dtype=dtype).inference
    assert served.kv_cache_bytes_per_token == KV_BYTES_PER_TOKEN_16BIT * bytes_per_element / 2


def test_every_dtype_hf_takes_is_one_gpuwise_can_size_and_the_workload_refuses_the_rest(llama7b_spec):
    assert set(HF_KV_CACHE_DTYPES) <= set(KV_CACHE_BYTES)
    for dtype in KV_CACHE_BYTES:
        if dtype in HF_KV_CACHE_DTYPES:
            _serving(llama7b_spec, engine="hf", kv_cache_dtype=dtype)
        else:
            with pytest.raises(WorkloadError, match="HF generate's KV cache is one of"):
                _serving(llama7b_spec, kv_cache_dtype=dtype)      # the default engine of a job without a rate


@pytest.mark.parametrize("command, gpu", [("estimate", "--gpu"), ("recommend", "--gpus")])
def test_the_cli_refuses_fp8_on_hf_generate_in_one_line(cli_run, llama7b_spec, command, gpu):
    code, out, err = cli_run(command, llama7b_spec, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256",
                             "-b", "8", "--kv-cache-dtype", "fp8", gpu, "a100-80gb-sxm4")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "fp8" in lines[0] and "int8" in lines[0]


def test_the_cli_serves_fp8_with_vllm(cli_json, llama7b_spec):
    served = cli_json(["estimate", llama7b_spec, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256",
                       "-b", "8", "--engine", "vllm", "--kv-cache-dtype", "fp8", "--gpu", "a100-80gb-sxm4", "--json"])
    assert served["inference"]["kv_cache_bytes_per_token"] * 2 == KV_BYTES_PER_TOKEN_16BIT


def test_a_traced_decoder_generating_refuses_fp8_before_it_is_traced(cli_run):
    code, out, err = cli_run("estimate", "hf:gpt2", "--mode", "infer", "--seq-len", "32", "--max-new-tokens", "32",
                             "-b", "2", "--kv-cache-dtype", "fp8")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "int8" in err, err


def test_the_library_refuses_fp8_for_a_traced_decoder_before_tracing_it():
    with pytest.raises(WorkloadError, match="int8"):
        generation_arch(Workload("hf:gpt2", mode="infer", seq_len=32, max_new_tokens=32, batch_size=2,
                                 kv_cache_dtype="fp8"))


@pytest.mark.parametrize("precision, dtype", [("fp16", "fp32"), ("fp32", "fp16"), ("amp-bf16", "fp32")])
def test_hf_generate_refuses_a_float_cache_of_another_width_than_its_compute(llama7b_spec, precision, dtype):
    # HF's DynamicCache keeps keys and values as the model computes them: an fp16 model's cache is never fp32, an
    # fp32 model's never fp16 (was priced at the bytes named: 2x too little memory for the fp32 model)
    w = Workload(llama7b_spec, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=8, precision=precision,
                 engine="hf", kv_cache_dtype=dtype)
    with pytest.raises(WorkloadError, match="holds the keys and values as the model computes them"):
        estimate_llm(w)


@pytest.mark.parametrize("precision, dtype", [("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "fp32"), ("fp16", "bf16")])
def test_hf_generate_takes_a_float_cache_of_its_compute_width(llama7b_spec, precision, dtype):
    w = Workload(llama7b_spec, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=8, precision=precision,
                 engine="hf", kv_cache_dtype=dtype)
    assert estimate_llm(w).inference.kv_cache_bytes == estimate_llm(w.with_(kv_cache_dtype="auto")).inference.kv_cache_bytes
