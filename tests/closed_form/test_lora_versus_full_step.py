"""Issue 24, "LoRA slower than full fine-tuning on some GPUs": the closed form costed full fine-tuning's
optimizer step as one fused pass (28 B per float32 AdamW parameter) while the default stack, and the traced
path, run torch's foreach AdamW: seven kernels over the whole model, 84 B per parameter. On a 7B model that
left out ~380 GB of traffic per step, so LoRA (which updates ~0.6% of the parameters) came out slower than
full fine-tuning at 8 x 2048 tokens on an L40S (5.14 s vs 4.94 s for Llama-2-7B)."""

import json

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.precision import default_for_model
from gpuwise.workload.storage import optimizer_step_bytes

BIG = ("hf:meta-llama/Llama-2-7b-hf", "hf:meta-llama/Llama-3.1-8B", "hf:Qwen/Qwen2.5-7B")
# micro-batches of 2k to 16k tokens (batch x seq)
MICRO_BATCHES = ((1, 2048), (8, 2048), (4, 4096))


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _step_s(model: str, gpu, finetune: str, batch: int, seq: int, **fields) -> float:
    precision = default_for_model(model, finetune=finetune, gpu_has_bf16=gpu.has_bf16).name
    w = Workload(model, batch_size=batch, seq_len=seq, finetune=finetune, precision=precision, **fields)
    return estimate_llm(w, gpu).time.step_time_s


@pytest.mark.parametrize("model", BIG)
def test_lora_is_never_slower_than_full_fine_tuning_of_a_7b_on_any_catalog_gpu(catalog, model):
    """Full fine-tuning computes every base weight's gradient (a third of the step's GEMM FLOPs) and runs
    AdamW over 7B parameters; LoRA adds rank-16 GEMMs and its adapters' memory-bound kernels (casts,
    dropout, scaling, sums), which per token cost less than those weight gradients plus the optimizer
    amortised over 2k-16k tokens."""
    slower = []
    for gpu in catalog.gpus:
        for batch, seq in MICRO_BATCHES:
            full, lora = (_step_s(model, gpu, ft, batch, seq) for ft in ("full", "lora"))
            if lora > full:
                slower.append(f"{gpu.id} {batch}x{seq}: lora {lora:.3f} s > full {full:.3f} s")
    assert not slower, slower


def test_the_optimizer_implementation_changes_a_full_fine_tuning_step(catalog):
    """foreach (torch's default) makes seven passes over the states where the fused kernel makes one. The
    saving is bounded by physics, not by the model's own constants: at least one fused AdamW pass over the 6.74B
    float32 parameters (param, grad, m, v read and param, m, v written: 28 B each) at the datasheet bandwidth,
    at most the whole foreach step at half of it; and it is the trained parameters' (LoRA saves almost nothing)."""
    gpu = resolve_gpu(catalog, "h100-sxm")
    model = "hf:meta-llama/Llama-2-7b-hf"
    foreach = _step_s(model, gpu, "full", 4, 2048)
    fused = _step_s(model, gpu, "full", 4, 2048, optimizer_impl="fused")
    params, peak_bytes_per_s = 6.74e9, gpu.memory_bandwidth_gbs * 1e9
    assert params * 28 / peak_bytes_per_s < foreach - fused < params * 84 / (0.5 * peak_bytes_per_s)
    lora_saving = _step_s(model, gpu, "lora", 4, 2048) - _step_s(model, gpu, "lora", 4, 2048, optimizer_impl="fused")
    assert 0 <= lora_saving < 0.02 * (foreach - fused)


def test_paged_adamw_is_one_fused_kernel_whatever_the_torch_implementation(catalog):
    """bitsandbytes' paged optimizers update each parameter in one fused kernel (``--optimizer-impl`` is
    torch's): a paged AdamW step moves what a fused AdamW step does, less than torch's foreach one."""
    for impl in ("foreach", "for-loop", "fused"):
        assert optimizer_step_bytes("paged-adamw", 4, impl) == optimizer_step_bytes("adamw", 4, "fused")
        assert optimizer_step_bytes("paged-adamw-8bit", 4, impl) == optimizer_step_bytes("adamw-8bit", 4, impl)
    assert optimizer_step_bytes("paged-adamw", 4) < optimizer_step_bytes("adamw", 4)
    gpu = resolve_gpu(catalog, "h100-sxm")
    model = "hf:meta-llama/Llama-2-7b-hf"
    paged = _step_s(model, gpu, "full", 4, 2048, optimizer="paged-adamw")
    assert paged == pytest.approx(_step_s(model, gpu, "full", 4, 2048, optimizer_impl="fused"), rel=1e-6)
    assert paged < _step_s(model, gpu, "full", 4, 2048)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam", "adamw", "lion", "adafactor"])
def test_the_closed_form_optimizer_traffic_is_what_the_traced_step_moves(tmp_path, optimizer):
    """The one table of foreach passes (workload.storage) against the optimizer kernels a trace records."""
    from gpuwise.trace import trace_workload

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
           "intermediate_size": 512, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
           "vocab_size": 1000, "tie_word_embeddings": False, "max_position_embeddings": 512}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for precision, tb in (("amp-bf16", 4), ("bf16", 2)):
        trace = trace_workload(Workload(f"hf:{path}", batch_size=1, seq_len=16, precision=precision,
                                        optimizer=optimizer))
        traced = sum(op.bytes_read + op.bytes_written for op in trace.ops if op.phase == "optimizer")
        assert optimizer_step_bytes(optimizer, tb) == pytest.approx(traced / trace.trainable_param_count,
                                                                    rel=0.02), precision
