"""--lora-targets that select no layer are refused with the model's linear layers, in the closed form and on
traced models, instead of an estimate without adapters (or a backward with nothing to train); a model
without linear layers in repeated blocks says which --finetune it can take."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torchvision.models as tvm

from gpuwise.trace.peft import apply_finetune
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.decoder import load_arch

QWEN_LINEARS = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"


def _estimate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", *args, "--batch-size", "2"],
                          capture_output=True, text=True, timeout=300)


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), r.stderr
    return lines[0]


def test_an_unknown_target_of_an_llm_exits_2_naming_its_linear_layers():
    line = _one_error_line(_estimate("hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--lora-targets", "foo",
                                     "--seq-len", "1024", "--gpu", "a100-80gb-sxm4"))
    assert line.endswith("--lora-targets: no module named 'foo' in hf:Qwen/Qwen2.5-7B "
                         f"(its linear layers: {QWEN_LINEARS})")


@pytest.mark.parametrize("targets, refused", [
    (("foo",), "no module named 'foo'"),
    (("q_proj", "q_prj"), "no module named 'q_prj'"),                 # a typo next to a good name
    (("qkv",), "no module named 'qkv'"),                               # a role this model does not have
    (("qkv", "w1"), "--lora-targets qkv,w1: none names a linear layer"),
])
def test_the_closed_form_refuses_targets_that_adapt_nothing_or_name_nothing(targets, refused):
    with pytest.raises(WorkloadError, match=refused):
        load_arch("hf:Qwen/Qwen2.5-7B").lora_params(16, targets)


def test_a_generic_target_list_adapts_what_this_model_has_as_peft_does():
    arch = load_arch("hf:Qwen/Qwen2.5-7B")
    assert arch.lora_params(16, ("q_proj", "w1")) == arch.lora_params(16, ("q_proj",)) > 0
    assert arch.lora_params(16, ("all-linear",)) == arch.lora_params(16) > 0


def _meta(builder):
    with torch.device("meta"):
        return builder(weights=None)


def test_a_traced_model_refuses_an_unknown_target_before_tracing():
    with pytest.raises(WorkloadError, match=r"no module named 'foo' in torchvision:vit_b_16 "
                                            r"\(its linear layers: 0 \(mlp\.0\), 3 \(mlp\.3\)\)"):
        apply_finetune(_meta(tvm.vit_b_16), Workload("torchvision:vit_b_16", finetune="lora", lora_targets=("foo",)))
    # a role the ViT lacks adapts nothing: refused too, rather than a backward with nothing to train
    with pytest.raises(WorkloadError, match="no module named 'q' in torchvision:vit_b_16"):
        apply_finetune(_meta(tvm.vit_b_16), Workload("torchvision:vit_b_16", finetune="lora", lora_targets=("q",)))


def test_lora_targets_foo_on_a_vit_exits_2_with_one_line():
    line = _one_error_line(_estimate("torchvision:vit_b_16", "--image-size", "32", "--finetune", "lora",
                                     "--lora-targets", "foo"))
    assert "--lora-targets: no module named 'foo' in torchvision:vit_b_16" in line


@pytest.mark.parametrize("finetune, quant, mode, message", [
    ("lora", "none", "train", "LoRA needs nn.Linear layers inside repeated blocks; torchvision:resnet50 has none: "
                              "use --finetune full"),
    ("qlora", "nf4", "train", "LoRA needs .* use --finetune full"),
    ("freeze", "int8", "train", "--quant int8 quantizes nn.Linear layers .* use --quant none"),
    ("full", "int8", "infer", "--quant int8 quantizes nn.Linear layers .* use --quant none"),
])
def test_a_cnn_says_which_finetune_it_can_take(finetune, quant, mode, message):
    workload = Workload("torchvision:resnet50", finetune=finetune, quant=quant, mode=mode)
    with pytest.raises(WorkloadError, match=message):
        apply_finetune(_meta(tvm.resnet50), workload)
