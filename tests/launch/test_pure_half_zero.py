"""A ZeRO plan priced at pure 16-bit is refused, not launched with a config that runs something else.

Before: `recommend hf:<70B> --sharding zero3 --precision bf16 --provider aws --max-gpus 64 --emit skypilot` picked
16 H100s (56.6 GiB a GPU: bf16 weights, gradients and Adam state, 8 bytes a parameter) and wrote
`{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}`. DeepSpeed's bf16 mode keeps float32 master
weights and Adam state beside the bf16 weights (what gpuwise prices as amp-bf16: 180 GiB a GPU on 8, no fit on 16),
so the job launched ran out of memory on the machines priced for it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwise.launch import LaunchError, ShardingSetup
from gpuwise.workload import Workload

LLAMA = "hf:meta-llama/Llama-2-13b-hf"


def _job(precision: str, sharding: str = "zero3", offload: str = "none") -> Workload:
    return Workload(LLAMA, finetune="full", precision=precision, sharding=sharding, offload=offload, num_gpus=8,
                    seq_len=2048)


@pytest.mark.parametrize("precision, sharding, offload", [
    ("bf16", "zero3", "none"), ("fp16", "zero2", "none"), ("bf16", "zero1", "none"),
    ("bf16", "ddp", "optimizer"),      # --offload optimizer is priced as ZeRO-2
])
def test_pure_16_bit_under_zero_is_refused_naming_what_deepspeed_runs(precision, sharding, offload):
    with pytest.raises(LaunchError) as caught:
        ShardingSetup.of(_job(precision, sharding, offload), 8)
    why = str(caught.value)
    assert "\n" not in why and "float32 master weights" in why
    assert f"--precision amp-{precision}" in why and "--sharding fsdp" in why


@pytest.mark.parametrize("precision, sharding", [("amp-bf16", "zero3"), ("amp-fp16", "zero2"), ("bf16", "fsdp")])
def test_what_deepspeed_or_fsdp_runs_as_priced_is_launched(precision, sharding):
    setup = ShardingSetup.of(_job(precision, sharding), 8)
    assert setup is not None and setup.sharding == sharding


def test_recommend_refuses_the_emit_in_one_line_with_exit_2(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", LLAMA, "--finetune", "full",
                        "--seq-len", "2048", "-b", "8", "--precision", "bf16", "--grad-checkpointing",
                        "--sharding", "zero3", "--steps", "1000", "--provider", "aws", "--emit", "skypilot",
                        "--command", "python train.py"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "DeepSpeed ZeRO-3 at --precision bf16" in r.stderr
