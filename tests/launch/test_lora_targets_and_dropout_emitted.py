"""`--emit` names the LoRA adapters' layers and dropout the plan is priced on, not only their rank.

A new user's trial: an 8B LoRA plan is priced on gpuwise's default, adapters on every linear of the blocks with
dropout 0.05 (99 GiB at batch 4, 2048 tokens); PEFT's own defaults (``q_proj,v_proj``, dropout 0) peak about 30 GiB
lower. The launch said only "LoRA rank 16", so a script could neither run the job as priced nor check it did.
"""

from __future__ import annotations

import pytest

from gpuwise.launch import JobAssumptions
from gpuwise.launch.assumptions import lora_targets_said
from gpuwise.workload.decoder import ROLE_ALIASES
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


def test_gpuwise_roles_are_emitted_as_the_module_names_peft_takes():
    """``--lora-targets q,v,down`` (gpuwise's role names) was emitted as ``q,v,down``, which PEFT's target_modules
    matches on no Llama module (it raises): each role is emitted as the module names it stands for."""
    emitted = lora_targets_said(("q", "v_proj", "down")).split(",")
    assert emitted[:3] == list(ROLE_ALIASES["q"]) and "v_proj" in emitted and "down_proj" in emitted
    assert not {"q", "down"} & set(emitted) and len(emitted) == len(set(emitted))
    assert lora_targets_said(("q_proj", "q")).split(",") == list(ROLE_ALIASES["q"])   # each once


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
