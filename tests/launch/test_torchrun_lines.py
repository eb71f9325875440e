"""The torchrun lines gpuwise emits: their shape per node, and a real run of them (2 processes, gloo, CPU)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch import plan_launch, render
from gpuwise.launch.torchrun import torchrun_argv, torchrun_lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_guarded.py"


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


def test_one_line_per_node_with_a_static_rendezvous_on_node_zero(cat):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py --lr 3e-4")
    lines = torchrun_lines(plan)
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        argv = shlex.split(line)
        assert argv[0] == "torchrun" and f"--node-rank={rank}" in argv and "--nnodes=2" in argv
        assert "--nproc-per-node=8" in argv and argv[-3:] == ["train.py", "--lr", "3e-4"]
        assert "--master-addr=$MASTER_ADDR" in line


def test_modules_and_non_python_commands_keep_their_meaning(cat):
    gpu = cat.gpu("t4")
    option = SimpleNamespace(count=1, provider="aws", spot=False)
    assert torchrun_argv(plan_launch(option, gpu, "python -m my.train --x 1"))[-4:] == ["--module", "my.train", "--x", "1"]
    assert "--no-python" in torchrun_argv(plan_launch(option, gpu, "./train.sh"))
    assert "--standalone" in torchrun_argv(plan_launch(option, gpu, "train.py"))


@pytest.mark.slow
def test_the_emitted_lines_run_the_guarded_example_on_two_cpu_processes(cat, tmp_path):
    command = f"python {EXAMPLE} --checkpoint-dir {tmp_path / 'ckpt'} --steps 3 --save-every 2 --batch-size 8 " \
              f"--samples 32 --hidden 16"
    plan = plan_launch(SimpleNamespace(count=2, provider="autodl", spot=False), cat.gpu("rtx-4090"), command)
    text = render(plan, "torchrun")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("torchrun ")]
    argv = shlex.split(line)
    # `torchrun` is torch.distributed.run's console script: run it with this interpreter.
    argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    env = {"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("final_checksum=")
    assert (tmp_path / "ckpt").is_dir()
