"""The guard's checkpoint of a LoRA/QLoRA job holds the adapters and their optimizer state, not the frozen base
(docs/guard.md, "What is saved"): the disk counts that, and the base once, as the model's weights. Before, each of the
4 checkpoints on disk was counted as the whole model (an 8B LoRA: 16.6 GB a checkpoint where the guard writes 0.5 GB)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.launch import disk_need, downloaded_weights_bytes, trained_param_count
from gpuwise.launch.disk import (CHECKPOINTS_ON_DISK, DiskNeed, checkpoint_optimizer_bytes,
                                 checkpoint_weights_bytes)
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload

MODEL = "hf:meta-llama/Llama-3.1-8B"
FP32_WEIGHT_BYTES = 4                   # trained weights under AMP (amp-bf16, the default for these jobs)
ADAMW_FP32_STATE_BYTES = 2 * 4          # exp_avg and exp_avg_sq, each a float32 per trained parameter


def need_of(cat, finetune: str) -> tuple[DiskNeed, int, int]:
    """The disk need of an 8B job, its trained parameters and the weights it holds, from the plan's estimate."""
    job = Workload(MODEL, finetune=finetune, seq_len=2048, grad_checkpointing=True).with_default_precision()
    model = model_for(job)
    estimate = model.estimate(cat.gpu("h100-sxm"), count=1, batch_size=1, with_time=False)
    trained = trained_param_count(model, estimate)
    weights_bytes = estimate.memory.weights_bytes
    need = DiskNeed.of(weights_bytes, checkpoint_optimizer_bytes(estimate.workload, trained), training=True,
                       downloaded_bytes=downloaded_weights_bytes(job),
                       saved_weights_bytes=checkpoint_weights_bytes(estimate.workload, weights_bytes, trained))
    return need, trained, weights_bytes


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_a_lora_checkpoint_is_the_adapters_and_their_adamw_states(cat, finetune):
    need, trained, _ = need_of(cat, finetune)
    assert need.checkpoint_bytes == trained * (FP32_WEIGHT_BYTES + ADAMW_FP32_STATE_BYTES)
    assert "of trained weights and their optimizer state, without the frozen base" in need.note(machine="node")


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_the_frozen_base_is_counted_once_as_the_model_s_weights(cat, finetune):
    need, _, weights_bytes = need_of(cat, finetune)
    assert need.model_bytes == max(weights_bytes, downloaded_weights_bytes(
        Workload(MODEL, finetune=finetune, seq_len=2048)))
    assert need.job_bytes == need.model_bytes + CHECKPOINTS_ON_DISK * need.checkpoint_bytes
    assert CHECKPOINTS_ON_DISK * need.checkpoint_bytes < need.model_bytes / 4


def test_a_full_fine_tune_s_checkpoint_still_holds_every_weight(cat):
    need, trained, weights_bytes = need_of(cat, "full")
    assert need.checkpoint_bytes == weights_bytes + trained * ADAMW_FP32_STATE_BYTES
    assert "without the frozen base" not in need.note(machine="node")


def test_the_launch_of_an_8b_lora_counts_its_adapters_per_checkpoint_not_the_base(cat):
    """End to end through ``launch.disk_need`` (what recommend's launch asks for): an 8B LoRA's checkpoint is its
    adapters and their AdamW state (was: the whole base in every one of the four checkpoints)."""
    job = Workload(MODEL, finetune="lora", seq_len=2048, grad_checkpointing=True).with_default_precision()
    need = disk_need(job, SimpleNamespace(batch_size=1, grad_accum_steps=1), cat.gpu("h100-sxm"))
    _, trained, weights_bytes = need_of(cat, "lora")
    assert need.checkpoint_bytes == trained * (FP32_WEIGHT_BYTES + ADAMW_FP32_STATE_BYTES) and need.frozen_base
    assert need.model_bytes >= weights_bytes > 20 * need.checkpoint_bytes


@pytest.mark.parametrize("sharding", ["fsdp", "zero2", "zero3"])
def test_a_sharded_lora_checkpoint_holds_the_whole_model(cat, sharding):
    """Sharded saves (FSDP's DCP, DeepSpeed's) hold the frozen base too: a 70B-class LoRA needs FSDP, and its checkpoints were counted as
    the adapters' (2.5 GB) where the guard writes the whole model (~141 GB): the task's disk ~560 GB short."""
    job = Workload(MODEL, finetune="lora", seq_len=2048, grad_checkpointing=True, num_gpus=8,
                   sharding=sharding).with_default_precision()
    need = disk_need(job, SimpleNamespace(batch_size=1, grad_accum_steps=1), cat.gpu("h100-sxm"))
    _, trained, weights_bytes = need_of(cat, "lora")
    assert need.checkpoint_bytes == weights_bytes + trained * ADAMW_FP32_STATE_BYTES and not need.frozen_base
