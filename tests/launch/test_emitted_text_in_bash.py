"""The launch text gpuwise emits, run in bash with shims that record their argv: the user's command reaches the
worker with the arguments as the user quoted them, gpuwise's own shell variables expand, and a multi-node block
stops at once, saying what to set, where MASTER_ADDR is not set.

A new user's trial: `--command "python train.py --name 'run_\\$(whoami)' --price 'cost\\$5'"` ran with `run_root` and
`cost`, and `--fmt 'a\\"\\$b'` was a bash syntax error (an argument with `$` was left unquoted); a 16-GPU block run
without MASTER_ADDR failed in torchrun with "rendezvous endpoint ':29500'".
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import plan_launch, render
from gpuwise.launch.skypilot import skypilot_task

# arguments a shell would change if they were left unquoted: a command substitution, a variable, a lone quote
USER_ARGS = ["--name", "run_$(whoami)", "--price", "cost$5", "--fmt", 'a"$b', "--home", "$HOME"]
COMMAND = "python train.py --name 'run_$(whoami)' --price 'cost$5' --fmt 'a\"$b' --home '$HOME'"

# records each run's argv (NUL-separated) in argv.<n>; `python -c 'import gpuwise'`, the install check, passes
RECORDER = """#!/bin/sh
[ "$1" = -c ] && exit 0
n=$(ls argv.* 2>/dev/null | wc -l)
printf '%s\\0' "$(basename "$0")" "$@" > "argv.$n"
exit 0
"""


def _shims(tmp_path: Path, *names: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": "/home/someone"}


def _run(text: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)


def _argvs(tmp_path: Path) -> list[list[str]]:
    runs = sorted(tmp_path.glob("argv.*"), key=lambda p: int(p.suffix[1:]))
    return [p.read_text().split("\0")[:-1] for p in runs]


def test_the_torchrun_line_passes_the_user_s_quoted_arguments_literally(cat, tmp_path):
    plan = plan_launch(SimpleNamespace(count=1, provider="autodl", spot=False), cat.gpu("rtx-4090"), COMMAND)
    done = _run(render(plan, "torchrun"), tmp_path, _shims(tmp_path, "python"))
    assert done.returncode == 0, done.stderr
    (argv,) = _argvs(tmp_path)
    assert argv[argv.index("train.py") + 1:] == USER_ARGS


def test_on_several_nodes_master_addr_expands_and_the_user_s_arguments_do_not(cat, tmp_path):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), COMMAND)
    env = {**_shims(tmp_path, "python"), "MASTER_ADDR": "10.1.2.3"}
    done = _run(render(plan, "torchrun"), tmp_path, env)
    assert done.returncode == 0, done.stderr
    argvs = _argvs(tmp_path)
    assert len(argvs) == plan.nodes == 2
    for rank, argv in enumerate(argvs):
        assert "--rdzv-endpoint=10.1.2.3:29500" in argv and f"--rdzv-conf=is_host={int(rank == 0)}" in argv
        assert argv[argv.index("train.py") + 1:] == USER_ARGS


def test_the_skypilot_run_script_expands_skypilot_s_variables_and_keeps_the_user_s_arguments(cat, tmp_path):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), COMMAND)
    run = skypilot_task(plan, Path("gpuwise-0-py3-none-any.whl"))["run"]
    env = {**_shims(tmp_path, "gpuwise"), "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NUM_GPUS_PER_NODE": "8", "SKYPILOT_NODE_IPS": "10.0.0.7\n10.0.0.8"}
    done = _run(run, tmp_path, env)
    assert done.returncode == 0, done.stderr
    (argv,) = _argvs(tmp_path)
    for expanded in ("--rdzv-conf=is_host=0", "--nnodes=2", "--nproc-per-node=8", "--rdzv-endpoint=10.0.0.7:29500"):
        assert expanded in argv, argv
    assert argv[argv.index("train.py") + 1:] == USER_ARGS


@pytest.mark.parametrize("master_addr", [None, ""])
def test_a_node_block_without_master_addr_stops_before_torchrun_and_says_what_to_set(cat, tmp_path, master_addr):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py")
    text = render(plan, "torchrun")
    env = _shims(tmp_path, "python")
    if master_addr is not None:
        env["MASTER_ADDR"] = master_addr
    done = _run(text, tmp_path, env)
    assert done.returncode != 0
    assert "set MASTER_ADDR to the address of node 0" in done.stderr, done.stderr
    assert _argvs(tmp_path) == [], "torchrun ran without a rendezvous address"


def test_each_node_s_block_says_it_runs_on_that_node_s_own_machine(cat):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py")
    lines = render(plan, "torchrun").splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("# node ")]
    assert [lines[i] for i in heads] == [f"# node {r} of 2: run this block on node {r}'s machine" for r in range(2)]
    assert all(lines[i + 1].startswith(': "${MASTER_ADDR:?') for i in heads)     # the check comes first
    assert any("one per node" in line and "not all on one" in line for line in lines[:heads[0]])
