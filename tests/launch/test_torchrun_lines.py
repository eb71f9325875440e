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
from gpuwise.launch.torchrun import LAUNCHER, torchrun_argv, torchrun_lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_guarded.py"


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


def test_one_line_per_node_with_a_c10d_rendezvous_hosted_on_node_zero(cat):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py --lr 3e-4")
    lines = torchrun_lines(plan)
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        argv = shlex.split(line)
        assert tuple(argv[:3]) == LAUNCHER and "--rdzv-backend=c10d" in argv and "--nnodes=2" in argv
        assert f"--rdzv-conf=is_host={int(rank == 0)}" in argv and not any(a.startswith("--node-rank") for a in argv)
        assert "--nproc-per-node=8" in argv and argv[-3:] == ["train.py", "--lr", "3e-4"]
        assert "--rdzv-endpoint=$MASTER_ADDR:29500" in line


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
    assert "<" not in text.replace("<=", "")                        # before: a literal `until <line>; ...`
    # The text runs as printed, in bash; its `python` is this interpreter (a shim on PATH).
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    env = {"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "PATH": f"{shim.parent}:/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("final_checksum=")
    assert (tmp_path / "ckpt").is_dir()


def test_each_emitted_line_starts_the_job_again_on_the_restart_code_and_stops_on_any_other(cat, tmp_path):
    # A preempted, checkpointed worker exits 75: the emitted loop runs it again; any other code ends it.
    plan = plan_launch(SimpleNamespace(count=1, provider="autodl", spot=False), cat.gpu("rtx-4090"),
                       "python train.py")
    text = render(plan, "torchrun")
    shim = tmp_path / "python"
    # the first two runs are "preempted" (75), the third fails with 3: three runs, exit 3
    # (a python with gpuwise installed: the lines' first check, python -c 'import gpuwise', passes)
    shim.write_text("#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho run >> runs\nn=$(wc -l < runs)\n[ $n -lt 3 ] && exit 75\nexit 3\n")
    shim.chmod(0o755)
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 3 and (tmp_path / "runs").read_text().count("run") == 3
