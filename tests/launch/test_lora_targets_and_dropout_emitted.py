"""`--emit` names the LoRA adapters' layers and dropout the plan is priced on, not only their rank.

A new user's trial: an 8B LoRA plan is priced on gpuwise's default, adapters on every linear of the blocks with
dropout 0.05 (99 GiB at batch 4, 2048 tokens); PEFT's own defaults (``q_proj,v_proj``, dropout 0) peak about 30 GiB
lower. The launch said only "LoRA rank 16", so a script could neither run the job as priced nor check it did.
"""

from __future__ import annotations

import pytest

from gpuwise.launch import JobAssumptions
from gpuwise.workload import Workload

COMMAND = "python train.py --checkpoint-dir ckpt"


def _lora_plan(cli_json, *options: str) -> dict:
    return cli_json(["recommend", "hf:meta-llama/Llama-3.1-8B", "--finetune", "lora", "--seq-len", "2048",
                     "--batch-size", "1", "--grad-checkpointing", "--samples", "1000", "--gpus", "a100-80gb-sxm4",
                     "--max-gpus", "1", "--no-remedies", *options, "--emit", "torchrun", "--command", COMMAND,
                     "--json"])["launch"]


def _assumptions_note(launch: dict) -> str:
    return next(n for n in launch["notes"] if n.startswith("the plan fits and is priced only for the job as estimated"))


def test_the_default_adapters_are_emitted_as_every_linear_with_the_default_dropout(cli_json):
    launch = _lora_plan(cli_json)
    assert launch["env"]["GPUWISE_LORA_TARGETS"] == "all-linear"
    assert launch["env"]["GPUWISE_LORA_DROPOUT"] == "0.05"
    note = _assumptions_note(launch)
    assert "LoRA rank 16 on every linear of the blocks (all-linear), dropout 0.05" in note
    assert "$GPUWISE_LORA_TARGETS" in note and "$GPUWISE_LORA_DROPOUT" in note
    assert "GPUWISE_LORA_TARGETS=all-linear" in launch["text"]


def test_named_targets_and_dropout_are_emitted_as_given(cli_json):
    launch = _lora_plan(cli_json, "--lora-targets", "q_proj,v_proj", "--lora-dropout", "0")
    assert launch["env"]["GPUWISE_LORA_TARGETS"] == "q_proj,v_proj"
    assert launch["env"]["GPUWISE_LORA_DROPOUT"] == "0"
    assert "LoRA rank 16 on q_proj, v_proj, dropout 0, 2048 tokens a sequence" in _assumptions_note(launch)


@pytest.mark.parametrize("finetune", ["full", "freeze"])
def test_a_job_without_adapters_names_none(finetune):
    env = JobAssumptions.of(Workload("hf:Qwen/Qwen2.5-0.5B", finetune=finetune, seq_len=512),
                            closed_form=True).env
    assert not {"GPUWISE_LORA_RANK", "GPUWISE_LORA_TARGETS", "GPUWISE_LORA_DROPOUT"} & set(env)


def test_qlora_says_its_adapters_too():
    said = JobAssumptions.of(Workload("hf:Qwen/Qwen2.5-0.5B", finetune="qlora", seq_len=512, lora_rank=8,
                                      lora_targets="all", lora_dropout=0.1), closed_form=True)
    assert said.env["GPUWISE_LORA_TARGETS"] == "all-linear" and said.env["GPUWISE_LORA_DROPOUT"] == "0.1"
    assert "QLoRA rank 8 on every linear of the blocks (all-linear), dropout 0.1" in said.note()
