"""apply_finetune on real transformers modules: exact LoRA counts, freezing, quantized storage."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

from gpuwise.workload import WorkloadError as LlmError
from gpuwise.workload.decoder import arch_from_config
from gpuwise.memory.llm import quantized_weight_bytes
from gpuwise.trace.peft import LoraLinear, QuantLinear, apply_finetune
from gpuwise.workload import Workload

from .tiny import TINY, build_meta


def _trainable(module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


@pytest.mark.parametrize("family", sorted(TINY))
def test_lora_parameter_count_matches_the_module_exactly(family):
    cfg = TINY[family]
    module = apply_finetune(build_meta(cfg), Workload("x", finetune="lora", lora_rank=8))
    assert _trainable(module) == arch_from_config(cfg).lora_params(8)
    assert _trainable(module) > 0


@pytest.mark.parametrize("targets", [("q", "v"), ("q_proj", "k_proj", "v_proj", "o_proj"), ("down",), ("gate", "up")])
def test_lora_targets_select_the_same_layers_in_both_paths(targets):
    for family in ("llama", "qwen2_moe", "mixtral", "deepseek_v3"):
        cfg = TINY[family]
        w = Workload("x", finetune="lora", lora_rank=4, lora_targets=targets)
        module = apply_finetune(build_meta(cfg), w)
        assert _trainable(module) == arch_from_config(cfg).lora_params(4, targets), family


def test_lora_never_wraps_routers_or_the_lm_head():
    module = apply_finetune(build_meta(TINY["qwen2_moe"]), Workload("x", finetune="lora"))
    names = [n for n, m in module.named_modules() if isinstance(m, LoraLinear)]
    assert names and not any(n.endswith((".gate", "shared_expert_gate", "lm_head")) for n in names)


def test_lora_freezes_every_base_weight():
    module = apply_finetune(build_meta(TINY["llama"]), Workload("x", finetune="lora"))
    trained = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trained and all(".lora_A" in n or ".lora_B" in n for n in trained)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt_neox"])
def test_freeze_trains_only_the_lm_head_and_final_norm(family):
    cfg = TINY[family]
    module = apply_finetune(build_meta(cfg), Workload("x", finetune="freeze"))
    arch = arch_from_config(cfg)
    norm = arch.hidden_size * (2 if arch.layernorm else 1)
    assert _trainable(module) == arch.vocab_size * arch.hidden_size + norm


@pytest.mark.parametrize("quant,double_quant", [("nf4", True), ("nf4", False), ("int8", True)])
def test_quantized_storage_matches_the_closed_form(quant, double_quant):
    cfg = TINY["llama"]
    module = apply_finetune(build_meta(cfg), Workload("x", finetune="lora", quant=quant), double_quant=double_quant)
    stored = sum(b.numel() * b.element_size() for m in module.modules() if isinstance(m, QuantLinear)
                 for b in m.buffers())
    expected = quantized_weight_bytes(arch_from_config(cfg), quant, double_quant)
    assert stored == pytest.approx(expected, rel=0.01)
    assert not any(isinstance(m, torch.nn.Linear) and "layers" in n for n, m in module.named_modules()
                   if not isinstance(m, QuantLinear) and ".lora" not in n)


def test_nf4_round_trip_keeps_real_weights_close():
    torch.manual_seed(0)
    linear = torch.nn.Linear(256, 128)
    for dq in (True, False):
        q = QuantLinear(linear, "nf4", double_quant=dq)
        w = q.dequantize(torch.float32)
        assert ((w - linear.weight).norm() / linear.weight.norm()).item() < 0.12
    q8 = QuantLinear(linear, "int8")
    assert ((q8.dequantize(torch.float32) - linear.weight).norm() / linear.weight.norm()).item() < 0.01


def test_qlora_trains_adapters_on_real_tensors():
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = TINY["llama"]
    config = AutoConfig.for_model("llama", **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    module = apply_finetune(AutoModelForCausalLM.from_config(config), Workload("x", finetune="qlora", lora_rank=4))
    ids = torch.randint(0, cfg["vocab_size"], (2, 8))
    module(input_ids=ids, labels=ids).loss.backward()
    q = module.model.layers[0].self_attn.q_proj
    assert q.lora_B.grad is not None and q.lora_B.grad.abs().sum() > 0
    assert isinstance(q.base, QuantLinear)


def test_quantized_lora_runs_forward_and_backward_on_fake_tensors():
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = TINY["qwen2"]
    config = AutoConfig.for_model("qwen2", **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    with FakeTensorMode(allow_non_fake_inputs=True):
        module = AutoModelForCausalLM.from_config(config)
        apply_finetune(module, Workload("x", finetune="qlora", lora_rank=4, precision="amp-bf16"))
        ids = torch.zeros(2, 16, dtype=torch.long)
        loss = module(input_ids=ids, labels=ids).loss
        loss.backward()
        q = module.model.layers[0].self_attn.q_proj
        assert is_fake(q.base.weight_packed) and q.lora_A.grad.shape == (4, cfg["hidden_size"])
        assert q.lora_A.dtype == torch.float32          # adapters float32 under AMP
        assert module.model.embed_tokens.weight.dtype == torch.bfloat16   # frozen base in 16-bit


def test_full_fine_tuning_of_quantized_weights_is_refused():
    with pytest.raises(LlmError, match="--finetune full"):
        apply_finetune(build_meta(TINY["llama"]), Workload("x", finetune="full", quant="nf4"))


def test_full_without_quantization_leaves_the_module_alone():
    module = build_meta(TINY["llama"])
    before = _trainable(module)
    assert apply_finetune(module, Workload("x")) is module and _trainable(module) == before


def test_casting_the_module_keeps_the_quantized_storage():
    module = apply_finetune(build_meta(TINY["llama"]), Workload("x", finetune="qlora"), double_quant=False)
    module.to(torch.bfloat16)
    q = module.model.layers[0].mlp.down_proj.base
    assert q.weight_packed.dtype == torch.uint8 and q.absmax.dtype == torch.float32
