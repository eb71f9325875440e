"""What a launch is priced on beyond the batch split: ZeRO/FSDP sharding and offload (a new user's trial), and
the SkyPilot loop's run logs.

Before: `recommend … --sharding zero3 --emit skypilot --command "python train.py"` emitted plain torchrun with no
word of DeepSpeed: the job that ran was DDP, which needs far more memory a GPU than the ZeRO-3 plan priced. And
the SkyPilot `run` loop restarted `gpuwise run --log gpuwise-run-$SKYPILOT_NODE_RANK.db` after exit 75, writing
the second start into the first start's run log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gpuwise.launch import BatchSplit, ShardingSetup, plan_launch, render
from gpuwise.launch.skypilot import skypilot_task
from gpuwise.launch.wheel import build_wheel
from gpuwise.workload import Workload

LLAMA = "hf:meta-llama/Llama-2-13b-hf"


def _option(count, provider, batch_size=1, grad_accum_steps=1):
    return SimpleNamespace(count=count, provider=provider, spot=False, batch_size=batch_size,
                           grad_accum_steps=grad_accum_steps)


def _plan(cat, workload, option, gpu="a100-80gb-sxm4"):
    return plan_launch(option, cat.gpu(gpu), "python train.py", batch=BatchSplit.of(option, training=True),
                       sharding=ShardingSetup.of(workload, option.count))


def _shim(folder, body: str) -> None:
    # a python with gpuwise installed: the emitted lines' first check (python -c 'import gpuwise') passes
    shim = folder / "python"
    shim.write_text("#!/bin/sh\n[ \"$1\" = -c ] && exit 0\n" + body)
    shim.chmod(0o755)


def test_a_zero3_plan_says_deepspeed_sets_the_env_and_the_torchrun_text_writes_its_config(cat, tmp_path):
    w = Workload(LLAMA, finetune="full", precision="amp-bf16", sharding="zero3", num_gpus=8, seq_len=2048)
    plan = _plan(cat, w, _option(8, "autodl", 2, 4))
    note = plan.notes[1]
    assert note.startswith("the plan is priced on DeepSpeed ZeRO-3 (weights, gradients and optimizer state "
                           "partitioned over the 8 GPUs)") and "not on plain DDP" in note
    assert plan.env["GPUWISE_SHARDING"] == "zero3" and plan.env["GPUWISE_DEEPSPEED_CONFIG"] == "gpuwise-ds-config.json"
    text = render(plan, "torchrun")
    assert "# note: the plan is priced on DeepSpeed ZeRO-3" in text
    # the text runs as printed: the worker finds the config beside it and its path in the environment
    _shim(tmp_path, 'echo "sharding=$GPUWISE_SHARDING"; cat "$GPUWISE_DEEPSPEED_CONFIG"\n')
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    first, config = done.stdout.splitlines()
    assert first == "sharding=zero3"
    assert json.loads(config) == {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
                                  "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
                                  "zero_optimization": {"stage": 3}}


def test_the_skypilot_task_writes_the_config_on_every_node_and_parses(sky, cat, tmp_path):
    w = Workload(LLAMA, finetune="full", precision="amp-fp16", sharding="zero2", offload="optimizer",
                 num_gpus=16, seq_len=2048)
    plan = _plan(cat, w, _option(16, "aws"), gpu="h100-sxm")
    text = render(plan, "skypilot", wheel=build_wheel(tmp_path / "wheels"))
    path = tmp_path / "task.yaml"
    path.write_text(text)
    task = sky.Task.from_yaml(str(path))
    assert task.envs["GPUWISE_SHARDING"] == "zero2" and task.envs["GPUWISE_OFFLOAD"] == "optimizer"
    assert "ZeRO-2" in text and "ZeRO-Offload" in text
    assert task.run.index("gpuwise-ds-config.json") < task.run.index("until gpuwise run")
    config = json.loads(plan.files["gpuwise-ds-config.json"])
    assert config["fp16"] == {"enabled": True}
    assert config["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}


@pytest.mark.parametrize("sharding, offload, stage", [("ddp", "optimizer", 2), ("zero1", "params", 3),
                                                      ("zero1", "none", 1)])
def test_the_stage_is_the_one_the_memory_model_prices(cat, sharding, offload, stage):
    # the memory model treats --offload optimizer from ddp/zero1 as zero2, --offload params as zero3
    w = Workload(LLAMA, finetune="full", precision="amp-bf16", sharding=sharding, offload=offload, num_gpus=2)
    plan = _plan(cat, w, _option(2, "autodl"))
    assert json.loads(plan.files["gpuwise-ds-config.json"])["zero_optimization"]["stage"] == stage
    assert f"ZeRO-{stage}" in plan.notes[1]


def test_fsdp_is_said_without_a_deepspeed_config_and_ddp_says_nothing(cat):
    fsdp = _plan(cat, Workload(LLAMA, finetune="full", sharding="fsdp", num_gpus=8), _option(8, "autodl"))
    assert "PyTorch FSDP" in fsdp.notes[1] and fsdp.files == {} and fsdp.env["GPUWISE_SHARDING"] == "fsdp"
    assert "GPUWISE_DEEPSPEED_CONFIG" not in fsdp.env
    ddp = _plan(cat, Workload(LLAMA, finetune="full", num_gpus=8), _option(8, "autodl"))
    assert not any("DeepSpeed" in n or "FSDP" in n for n in ddp.notes)
    assert ddp.files == {} and "GPUWISE_SHARDING" not in ddp.env
    # a traced estimate keeps everything on the GPU: its launch names no offload
    traced = ShardingSetup.of(Workload("torchvision:resnet50", offload="optimizer"), 1, closed_form=False)
    assert traced is None


def test_recommend_with_zero3_emits_what_the_plan_is_priced_on(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", LLAMA, "--finetune", "full",
                        "--seq-len", "2048", "-b", "8", "--precision", "amp-bf16", "--grad-checkpointing",
                        "--sharding", "zero3", "--steps", "1000", "--provider", "aws", "--emit", "skypilot",
                        "--command", "python train.py", "--json"], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    launch = json.loads(r.stdout)["launch"]
    assert launch["env"]["GPUWISE_SHARDING"] == "zero3"
    assert any(n.startswith("the plan is priced on DeepSpeed ZeRO-3") for n in launch["notes"])
    config = json.loads(launch["files"]["gpuwise-ds-config.json"])
    assert config["zero_optimization"]["stage"] == 3 and config["bf16"] == {"enabled": True}
    assert "cat > gpuwise-ds-config.json" in launch["text"]
    # the wheel lands in the documented cache folder ($XDG_CACHE_HOME/gpuwise/wheels)
    assert launch["wheel"].startswith(str(tmp_path / "cache" / "gpuwise" / "wheels"))


def test_the_skypilot_loop_gives_each_start_a_run_log_of_its_own(cat, tmp_path):
    plan = plan_launch(_option(1, "lambda"), cat.gpu("rtx-a6000"), "python train.py")
    run = skypilot_task(plan, tmp_path / "gpuwise.whl")["run"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gpuwise = bin_dir / "gpuwise"
    gpuwise.write_text(f"#!/bin/sh\nexec {sys.executable} -m gpuwise.cli.app \"$@\"\n")
    gpuwise.chmod(0o755)
    # the torchrun wrapper: preempted (75) on the first start, done on the second
    _shim(bin_dir, "echo start >> starts\n[ $(wc -l < starts) -lt 2 ] && exit 75\nexit 0\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_MONITOR_BACKEND"}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", SKYPILOT_NODE_RANK="0", SKYPILOT_NUM_GPUS_PER_NODE="1")
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "starts").read_text().count("start") == 2
    from gpuwise.runlog import read_meta

    logs = sorted(tmp_path.glob("gpuwise-run-*.db"))
    assert len(logs) == 2 and sorted(read_meta(p)["exit_code"] for p in logs) == ["0", "75"]


@pytest.mark.parametrize("optimizer, expected", [
    ("adamw", "optimizer=deepspeed.ops.adam.DeepSpeedCPUAdam(model.parameters(), lr=...)"),
    ("adam", "optimizer=deepspeed.ops.adam.DeepSpeedCPUAdam(model.parameters(), lr=..., adamw_mode=False)"),
    ("lion", "optimizer=deepspeed.ops.lion.DeepSpeedCPULion(model.parameters(), lr=...)"),
])
def test_under_zero_offload_the_note_names_deepspeeds_cpu_optimizer(cat, optimizer, expected):
    # DeepSpeed raises ZeRORuntimeException for a client torch optimizer under ZeRO-Offload
    # (zero_force_ds_cpu_optimizer, true by default): the note said "optimizer=...", the script's own
    w = Workload(LLAMA, finetune="full", precision="amp-bf16", sharding="zero2", offload="optimizer",
                 optimizer=optimizer, num_gpus=4, seq_len=2048)
    note = next(n for n in _plan(cat, w, _option(4, "autodl")).notes if "DeepSpeed ZeRO-2" in n)
    assert expected in note
    assert "accelerate swaps its optimizer for DeepSpeed's CPU one" in note
    # without offload the script's own optimizer is fine, and nothing is said of a CPU one
    plain = next(n for n in _plan(cat, Workload(LLAMA, finetune="full", precision="amp-bf16", sharding="zero2",
                                                optimizer=optimizer, num_gpus=4, seq_len=2048),
                                  _option(4, "autodl")).notes if "DeepSpeed ZeRO-2" in n)
    assert "optimizer=..., config=" in plain and "DeepSpeedCPU" not in plain
