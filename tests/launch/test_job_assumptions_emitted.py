"""`--emit` carries what the plan needs to fit: precision, gradient checkpointing, LoRA/QLoRA, sequence length.

A new user's trial: an 8B LoRA plan on an RTX 4090 fits only with gradient checkpointing (40.2 GiB without), but
the emitted YAML and torchrun lines said only the batch split: a script run without checkpointing OOMs on the
GPU the plan chose. Both emitters now set GPUWISE_PRECISION, GPUWISE_GRAD_CHECKPOINTING, GPUWISE_FINETUNE … and
say them in a note, as they do the batch split.
"""

from __future__ import annotations

import subprocess

COMMAND = "python train.py --checkpoint-dir ckpt"
LLAMA_LORA = ["recommend", "hf:meta-llama/Llama-3.1-8B", "--finetune", "lora", "--seq-len", "2048", "--batch-size",
              "1", "--grad-checkpointing", "--samples", "1000", "--gpus", "rtx-4090", "--max-gpus", "1",
              "--no-remedies", "--emit", "torchrun", "--command", COMMAND]


def test_the_emitted_plan_sets_and_says_the_assumptions_it_fits_with(cli_json, tmp_path):
    answer = cli_json([*LLAMA_LORA, "--json"])
    launch = answer["launch"]
    env = launch["env"]
    assert env["GPUWISE_GRAD_CHECKPOINTING"] == "1"
    assert env["GPUWISE_FINETUNE"] == "lora" and env["GPUWISE_LORA_RANK"] == "16"
    assert env["GPUWISE_PRECISION"] == "amp-bf16" and env["GPUWISE_SEQ_LEN"] == "2048"
    assert "GPUWISE_QUANT" not in env
    note = next(n for n in launch["notes"] if n.startswith("the plan fits and is priced only for the job as estimated"))
    assert "gradient checkpointing on" in note and "LoRA rank 16" in note and "2048 tokens a sequence" in note
    assert f"# note: {note}" in launch["text"]
    # the text runs as printed: the worker sees them in its environment
    shim = tmp_path / "python"
    shim.write_text('#!/bin/sh\ncase "$*" in *gpuwise.guard.torchrun*) echo "ckpt=$GPUWISE_GRAD_CHECKPOINTING '
                    'ft=$GPUWISE_FINETUNE seq=$GPUWISE_SEQ_LEN prec=$GPUWISE_PRECISION";; esac\n')
    shim.chmod(0o755)
    done = subprocess.run(["bash", "-c", launch["text"]], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "ckpt=1 ft=lora seq=2048 prec=amp-bf16" in done.stdout


def test_qlora_and_a_default_precision_on_a_gpu_without_bf16_are_emitted_as_priced(cli_json):
    answer = cli_json(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "qlora", "--seq-len", "1024", "--samples",
                       "1000", "--gpus", "t4", "--max-gpus", "1", "--no-remedies", "--emit", "torchrun", "--command",
                       COMMAND, "--json"])
    env = answer["launch"]["env"]
    assert answer["fallback_precision"].get("t4") == env["GPUWISE_PRECISION"] == "amp-fp16"
    assert env["GPUWISE_FINETUNE"] == "qlora" and env["GPUWISE_QUANT"] == "nf4"
    assert env["GPUWISE_GRAD_CHECKPOINTING"] == "0"


def test_job_assumptions_of_a_serving_job_name_no_training_settings():
    from gpuwise.launch import JobAssumptions
    from gpuwise.workload import Workload

    env = JobAssumptions.of(Workload("hf:Qwen/Qwen2.5-7B", mode="infer", precision="bf16", quant="int8",
                                     seq_len=4096), closed_form=True).env
    assert env == {"GPUWISE_PRECISION": "bf16", "GPUWISE_QUANT": "int8", "GPUWISE_SEQ_LEN": "4096"}


def test_a_traced_text_model_without_seq_len_says_the_default_it_was_priced_at():
    # from the review: only the closed form's default length was emitted; a traced BERT priced at 128 tokens said none
    from gpuwise.launch.assumptions import JobAssumptions
    from gpuwise.workload import Workload

    bert = JobAssumptions.of(Workload(model="hf:bert-base-uncased", batch_size=32))
    assert bert.seq_len == 128 and bert.env["GPUWISE_SEQ_LEN"] == "128"
    resnet = JobAssumptions.of(Workload(model="torchvision:resnet50", batch_size=32))
    assert resnet.seq_len is None and "GPUWISE_SEQ_LEN" not in resnet.env
