"""The disk counts the checkpoint a job downloads, not only the weights it holds: a QLoRA base holds nf4 weights
(8B: 5.9 GB) but downloads the 16-bit checkpoint they are quantized from as they load (16 GB; 70B: 141 GB)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.launch import disk_need
from gpuwise.launch.disk import checkpoint_bytes_per_param
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

OPTION = SimpleNamespace(batch_size=1, grad_accum_steps=1)


def _held_weights_bytes(workload, gpu) -> int:
    return model_for(workload).estimate(gpu, count=1, batch_size=1, with_time=False).memory.weights_bytes


@pytest.mark.parametrize("model", ["hf:meta-llama/Llama-3.1-8B", "hf:meta-llama/Llama-3.1-70B"])
def test_a_qlora_base_needs_the_disk_of_its_16_bit_checkpoint_not_of_its_nf4_weights(cat, model):
    job = Workload(model, finetune="qlora", seq_len=2048, grad_checkpointing=True).with_default_precision()
    gpu = cat.gpu("h100-sxm")
    need = disk_need(job, OPTION, gpu)
    sixteen_bit_bytes = load_arch(model).param_counts().total * 2      # the configs say torch_dtype bfloat16
    assert need.model_bytes == sixteen_bit_bytes
    assert need.model_bytes > 2.5 * _held_weights_bytes(job, gpu)     # nf4: about 0.52 bytes a block weight


def test_serving_a_16_bit_checkpoint_quantized_as_it_loads_counts_the_download(cat):
    job = Workload("hf:meta-llama/Llama-3.1-8B", mode="infer", engine="vllm", quant="fp8", seq_len=1024,
                   max_new_tokens=256).with_default_precision()
    need = disk_need(job, OPTION, cat.gpu("h100-sxm"))
    assert need.model_bytes == load_arch(job.model).param_counts().total * 2
    assert need.checkpoint_bytes == 0


def test_a_checkpoint_stored_quantized_downloads_what_it_holds(cat):
    job = Workload("hf:deepseek-ai/DeepSeek-V3", mode="infer", engine="vllm", quant="fp8", seq_len=1024,
                   max_new_tokens=256).with_default_precision()
    gpu = cat.gpu("h200")
    need = disk_need(job, OPTION, gpu)
    assert need.model_bytes == _held_weights_bytes(job, gpu)
    assert need.model_bytes < load_arch(job.model).param_counts().total * 2


def test_a_full_fine_tune_holding_float32_weights_counts_them_not_the_smaller_download(cat):
    job = Workload("hf:Qwen/Qwen2.5-0.5B", seq_len=512, precision="amp-bf16")
    gpu = cat.gpu("h100-sxm")
    assert disk_need(job, OPTION, gpu).model_bytes == _held_weights_bytes(job, gpu)


@pytest.mark.parametrize("dtype, per_param", [("bfloat16", 2), ("torch.float32", 4), ("float16", 2), (None, 2)])
def test_a_checkpoint_s_bytes_a_parameter_follow_its_config_s_dtype(dtype, per_param):
    assert checkpoint_bytes_per_param(dtype) == per_param
