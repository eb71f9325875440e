"""A served checkpoint's own quantization counts (issue 24): DeepSeek-V3 ships FP8 weights (its config's
quantization_config: e4m3, a float32 scale per 128 x 128 block), yet ``recommend hf:deepseek-ai/DeepSeek-V3
--mode infer`` counted 1,263 GiB of bf16 weights and ``--precision fp8`` was refused without a way out."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import inference_weight_bytes
from gpuwise.plan.profile import cannot_run
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.llm import decode_step, quant_around_s, serve_time, served_linears
from gpuwise.runtime.quant_linears import fp8_refusal
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.checkpoint import checkpoint_note, checkpoint_quant, served_quant
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.llm_config import load_config
from gpuwise.workload.model import check_precision
from gpuwise.workload.storage import quant_bytes_per_param

DS = "hf:deepseek-ai/DeepSeek-V3"
GIB = 2**30


@pytest.fixture(scope="module")
def gpus():
    return {g.id: g for g in load_catalog(user_file=False).gpus}


def test_the_quantization_config_names_the_weights_format():
    assert checkpoint_quant(load_config(DS)) == "fp8"
    assert checkpoint_quant(load_config("hf:meta-llama/Llama-3.1-8B")) == "none"
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert checkpoint_quant({"quantization_config": bnb}) == "nf4"
    assert checkpoint_quant({"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}}) == "int8"
    assert checkpoint_quant({"quantization_config": {"quant_method": "gptq", "bits": 4}}) == "w4a16"


def test_serving_takes_the_checkpoints_quantization_training_and_an_asked_quant_do_not():
    assert served_quant(DS, mode="infer") == "fp8"
    assert served_quant(DS, mode="train") == "none"
    assert served_quant(DS, mode="infer", quant="nf4") == "nf4"
    assert "128 x 128" in checkpoint_note(DS, "fp8") and "8.9" in checkpoint_note(DS, "fp8")


def test_fp8_weights_are_one_byte_and_a_scale_per_block():
    assert quant_bytes_per_param("fp8") == pytest.approx(1 + 4 / (128 * 128))
    arch = load_arch(DS)
    bf16, fp8 = (inference_weight_bytes(arch, Workload(DS, mode="infer", precision="bf16", quant=q))
                 for q in ("none", "fp8"))
    assert bf16 / GIB > 1200                      # what the issue saw
    assert 600 < fp8 / GIB < 660                  # 671B parameters, 1 B each but the embeddings and the head


def test_fp8_is_for_serving_and_is_no_precision():
    with pytest.raises(WorkloadError, match="--mode infer"):
        Workload(DS, mode="train", precision="bf16", quant="fp8")
    with pytest.raises(WorkloadError, match="--quant fp8"):
        check_precision("fp8")
    with pytest.raises(WorkloadError, match="--quant fp8"):
        Workload(DS, mode="infer", precision="fp8")


def test_decode_reads_one_byte_a_weight(gpus):
    arch, h100 = load_arch(DS), gpus["h100-sxm"]
    steps, jobs = {}, {}
    for q in ("none", "fp8"):
        jobs[q] = w = Workload(DS, mode="infer", precision="bf16", quant=q, engine="vllm", num_gpus=8, batch_size=64)
        steps[q] = decode_step(arch, w, h100, weights_bytes=inference_weight_bytes(arch, w) / 8, context_tokens=512,
                               batch=64, kv_bytes_per_element=2.0)
    q = served_linears(arch, jobs["fp8"], h100, rows=64)
    assert q.path.matmul_bytes == pytest.approx(1 + 4 / (128 * 128)) and q.gemv_bytes == 0
    kv_s = arch.kv_cache_bytes(512, 64, 2.0, mla_latent=True) / (h100.memory_bandwidth_gbs * 1e9 * 0.8)   # the same on both
    reads = {k: d.memory_s - kv_s for k, d in steps.items()}
    reads["fp8"] -= quant_around_s(q, h100, load_calibration())     # activation quantization: kernels apart
    # half the weights' time, a little more: the embedding and the head stay in bf16
    assert 0.5 < reads["fp8"] / reads["none"] < 0.56
    assert steps["fp8"].quant_path == "FP8 block GEMM"


def test_where_fp8_runs_as_vllm_and_transformers_say(gpus):
    # vLLM: FP8 tensor cores from 8.9, weight-only Marlin from 8.0 (Fp8Config.get_min_capability 80); transformers 8.9
    assert fp8_refusal(gpus["h100-sxm"], "hf") is None and fp8_refusal(gpus["l40s"], "hf") is None
    assert fp8_refusal(gpus["a100-80gb-sxm4"], "vllm") is None
    assert "8.9" in fp8_refusal(gpus["a100-80gb-sxm4"], "hf")
    assert "8.0" in fp8_refusal(gpus["t4"], "vllm")
    w = Workload(DS, mode="infer", precision="bf16", quant="fp8", engine="vllm")
    assert cannot_run(w, gpus["v100-32gb-sxm2"]) and not cannot_run(w, gpus["a100-80gb-sxm4"])
    arch = load_arch(DS)
    a100 = gpus["a100-80gb-sxm4"]
    st = serve_time(arch, w.with_(num_gpus=8), a100, weights_bytes=inference_weight_bytes(arch, w) / 8,
                    prompt_tokens=512, new_tokens=64, batch=8, kv_bytes_per_element=2.0)
    assert any("Marlin" in note for note in st.step.warnings)


def test_recommend_counts_the_checkpoints_fp8_weights(cli_json):
    out = cli_json(["estimate", DS, "--mode", "infer", "--gpu", "h100-sxm", "--num-gpus", "8", "--engine", "vllm",
                    "--seq-len", "1024", "--max-new-tokens", "64", "--batch-size", "4", "--json"])
    assert out["workload"]["quant"] == "fp8"
    assert 75 < out["memory"]["weights_bytes"] / GIB < 85           # 1,263 GiB / 8 was 158


def test_a_checkpoint_stored_quantized_has_no_quantize_on_load_transient():
    from gpuwise.memory.llm import quantize_on_load_bytes
    from gpuwise.workload import Workload
    from gpuwise.workload.decoder import load_arch

    v3 = "hf:deepseek-ai/DeepSeek-V3"
    arch = load_arch(v3)
    assert quantize_on_load_bytes(arch, Workload(v3, mode="infer", quant="fp8")) == 0.0
    # a 16-bit checkpoint quantized while loading keeps the transient
    llama = "hf:meta-llama/Llama-2-7b-hf"
    assert quantize_on_load_bytes(load_arch(llama), Workload(llama, mode="infer", quant="nf4")) > 0


def test_the_fp8_block_is_read_where_the_quantization_is_nested_in_text_config():
    from gpuwise.workload.checkpoint import fp8_block

    qc = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [64, 64]}
    for cfg in ({"quantization_config": qc}, {"text_config": {"hidden_size": 4096, "quantization_config": qc}}):
        assert checkpoint_quant(cfg) == "fp8" and fp8_block(cfg) == (64, 64)


def test_a_checkpoints_config_is_read_once_for_its_quantization_and_its_note(monkeypatch):
    import gpuwise.workload.checkpoint as checkpoint

    reads = []
    qc = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    monkeypatch.setattr(checkpoint, "try_load_decoder_config",
                        lambda model: reads.append(model) or {"text_config": {"hidden_size": 4096,
                                                                              "quantization_config": qc}})
    checkpoint.stored_weights.cache_clear()
    try:
        model = "hf:example/fp8-only-in-text-config"
        assert served_quant(model, mode="infer") == "fp8"
        assert "128 x 128" in checkpoint_note(model, "fp8")
        assert checkpoint.stored_quant(model) == "fp8"
        assert reads == [model]
    finally:
        checkpoint.stored_weights.cache_clear()
