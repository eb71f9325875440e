"""The batch split a launch is priced on, said in the emitted files and set in their environment.

A new user's trial: `recommend torchvision:resnet50 -b 256 --precision amp-fp16 --gpus rtx-3080-ti --max-gpus 1
--emit torchrun --command 'python train.py --batch-size 256'` priced micro-batch 128 × 2 accumulation steps (256
does not fit 12 GiB) and emitted `train.py --batch-size 256` unchanged, with no word of the split in the header or
in `launch.notes`; an 8-GPU plan at 32 samples a GPU (effective 256) said nothing either, and a script that does not
divide by the world size runs 256 on every GPU.
"""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from gpuwise.launch import BatchSplit, plan_launch, render
from gpuwise.launch.skypilot import skypilot_task
from gpuwise.launch.wheel import build_wheel

COMMAND = "python train.py --batch-size 256"


def _option(count, provider, batch_size, grad_accum_steps=1):
    return SimpleNamespace(count=count, provider=provider, spot=False, batch_size=batch_size,
                           grad_accum_steps=grad_accum_steps)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_a_one_gpu_plan_with_accumulation_says_its_split_in_the_header_and_exports_it(cat, tmp_path):
    option = _option(1, "autodl", 128, 2)
    plan = plan_launch(option, cat.gpu("rtx-3080-ti"), COMMAND, batch=BatchSplit.of(option, training=True))
    text = render(plan, "torchrun")
    header = _words(" ".join(line for line in text.splitlines() if line.startswith("#")))
    assert ("micro-batch 128 per GPU x 2 accumulation steps x 1 GPU = effective batch 256 samples per optimizer "
            "step: your command must run that split") in header
    assert "gpuwise does not rewrite its flags" in header
    assert "--batch-size 256 runs 256 samples a forward pass unless the script accumulates 2 micro-batches of 128" \
        in header
    assert plan.notes[0].startswith("the plan is priced on micro-batch 128")
    # the text runs as printed: the worker sees the split in its environment
    shim = tmp_path / "python"
    shim.write_text('#!/bin/sh\necho "micro=$GPUWISE_MICRO_BATCH accum=$GPUWISE_GRAD_ACCUM '
                    'effective=$GPUWISE_EFFECTIVE_BATCH"\n')
    shim.chmod(0o755)
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "micro=128 accum=2 effective=256" in done.stdout


def test_an_eight_gpu_plan_says_the_per_gpu_batch_and_that_an_undivided_flag_runs_on_every_gpu(cat):
    option = _option(8, "aws", 32)
    plan = plan_launch(option, cat.gpu("h100-sxm"), COMMAND, batch=BatchSplit.of(option, training=True))
    note = plan.notes[0]
    assert "micro-batch 32 per GPU x 1 accumulation step x 8 GPUs = effective batch 256" in note
    assert "runs 256 samples a forward pass on every GPU unless the script divides it over the 8 GPUs" in note
    assert plan.env == {"GPUWISE_MICRO_BATCH": "32", "GPUWISE_GRAD_ACCUM": "1", "GPUWISE_EFFECTIVE_BATCH": "256"}
    # a flag that already is the micro-batch needs no word beyond the split
    plan = plan_launch(option, cat.gpu("h100-sxm"), "python train.py --batch-size=32",
                       batch=BatchSplit.of(option, training=True))
    assert "as written" not in plan.notes[0]


def test_the_skypilot_task_carries_the_split_in_envs_and_still_parses(sky, cat, tmp_path):
    option = _option(16, "aws", 16, 2)
    plan = plan_launch(option, cat.gpu("h100-sxm"), COMMAND, batch=BatchSplit.of(option, training=True))
    wheel = build_wheel(tmp_path / "wheels")
    text = render(plan, "skypilot", wheel=wheel)
    assert "# note: the plan is priced on micro-batch 16 per GPU x 2 accumulation steps x 16 GPUs = effective " \
           "batch 512" in text
    path = tmp_path / "task.yaml"
    path.write_text(text)
    task = sky.Task.from_yaml(str(path))
    assert task.envs == {"GPUWISE_MICRO_BATCH": "16", "GPUWISE_GRAD_ACCUM": "2", "GPUWISE_EFFECTIVE_BATCH": "512"}
    assert skypilot_task(plan, wheel)["envs"] == task.envs


def test_serving_says_its_batch_of_requests():
    split = BatchSplit.of(_option(2, "aws", 4), training=False, per_gpu=False)
    assert split.env == {"GPUWISE_MICRO_BATCH": "4"}
    assert "batches of 4 requests on the model split over 2 GPUs" in split.note()


@pytest.mark.slow
def test_recommend_emit_says_the_split_it_priced(cli_run):
    # the trial's own command: 256 does not fit a 12 GiB RTX 3080 Ti at amp-fp16, 128 × 2 does
    args = ("recommend", "torchvision:resnet50", "-b", "256", "--precision", "amp-fp16", "--steps", "1000",
            "--gpus", "rtx-3080-ti", "--max-gpus", "1", "--no-remedies", "--emit", "torchrun", "--command", COMMAND)
    code, out, err = cli_run(*args, "--json")
    assert code == 0, err
    answer = json.loads(out)
    best, launch = answer["best"], answer["launch"]
    assert (best["batch_size"], best["grad_accum_steps"]) == (128, 2)
    assert launch["notes"][0].startswith("the plan is priced on micro-batch 128 per GPU x 2 accumulation steps x "
                                         "1 GPU = effective batch 256")
    split = {"GPUWISE_MICRO_BATCH": "128", "GPUWISE_GRAD_ACCUM": "2", "GPUWISE_EFFECTIVE_BATCH": "256"}
    assert {k: v for k, v in launch["env"].items() if k in split} == split
    # and the job's assumptions (launch.assumptions.JobAssumptions) after the split
    assert launch["env"]["GPUWISE_PRECISION"] == "amp-fp16" and launch["env"]["GPUWISE_GRAD_CHECKPOINTING"] == "0"
    assert "export GPUWISE_MICRO_BATCH=128 GPUWISE_GRAD_ACCUM=2 GPUWISE_EFFECTIVE_BATCH=256 " in launch["text"]
    code, out, err = cli_run(*args)
    assert code == 0, err
    assert "# note: the plan is priced on micro-batch 128 per GPU x 2 accumulation steps" in out
