"""Several nodes meet at torchrun's c10d rendezvous, as torchrun's own "fault tolerant" example runs them
(``torch/distributed/run.py``): one id on every node, node 0 hosting it at ``$MASTER_ADDR``, the ranks the
rendezvous's to give; ``--max-restarts`` then restarts every node's workers together, and a node whose torchrun
the exit-75 loop starts again joins the running job. One node keeps ``--standalone``.

A new user's trial: the multi-node lines used a static rendezvous (``--node-rank=R --master-addr=$MASTER_ADDR
--master-port=29500``), under which a node restarted by the loop waited for ever for the other node's workers.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch.distributed.run import config_from_args, parse_args

import gpuwise.launch.torchrun as torchrun_module
from gpuwise.launch import plan_launch, render
from gpuwise.launch.skypilot import skypilot_task

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python train.py --lr 3e-4"

# an interpreter stub: `-c 'import gpuwise'` passes; every other run records its argv (NUL-separated) in argv.<n>
RECORDER = """#!/bin/bash
[ "$1" = -c ] && exit 0
n=0; while [ -e "argv.$n" ]; do n=$((n + 1)); done
printf '%s\\0' "$0" "$@" > "argv.$n"
"""


def _stub_path(tmp_path: Path, name: str) -> str:
    stub = tmp_path / "bin" / name
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(RECORDER)
    stub.chmod(0o755)
    return f"{stub.parent}:/usr/bin:/bin"


def _blocks(text: str) -> list[str]:
    """Each node's block of the torchrun text, with the header lines before them (comments only)."""
    return ["# node " + block for block in text.split("\n# node ")[1:]]


def _torch_config(argv: list[str], monkeypatch):
    """The launch config torchrun itself reads from a line's argv (after the interpreter and ``-m module``)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")      # config_from_args sets it where unset
    config, _, worker_args = config_from_args(parse_args(argv[3:]))
    return config, worker_args


def _recorded(tmp_path: Path) -> list[list[str]]:
    runs = sorted(tmp_path.glob("argv.*"), key=lambda p: int(p.suffix[1:]))
    return [p.read_text().split("\0")[:-1] for p in runs]


def test_every_node_joins_one_c10d_rendezvous_hosted_by_node_zero(cat, tmp_path, monkeypatch):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), COMMAND)
    assert plan.nodes == 2
    env = {"PATH": _stub_path(tmp_path, "python"), "MASTER_ADDR": "10.1.2.3"}
    configs = []
    for node, block in enumerate(_blocks(render(plan, "torchrun"))):    # each block on its own machine
        done = subprocess.run(["bash", "-c", block], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        argv = _recorded(tmp_path)[node]
        assert not any(a.startswith(("--node-rank", "--master-addr", "--master-port")) for a in argv), argv
        config, worker_args = _torch_config(argv, monkeypatch)
        assert worker_args[-3:] == ["train.py", "--lr", "3e-4"]
        configs.append(config)
    assert [c.rdzv_backend for c in configs] == ["c10d", "c10d"]
    assert {c.rdzv_endpoint for c in configs} == {"10.1.2.3:29500"}
    assert len({c.run_id for c in configs}) == 1 and configs[0].run_id != "none"
    assert [c.rdzv_configs["is_host"] for c in configs] == ["1", "0"]
    assert all((c.min_nodes, c.max_nodes, c.nproc_per_node, c.max_restarts) == (2, 2, 8, 3) for c in configs)


def test_another_job_gets_another_rendezvous_id_and_the_same_job_the_same(cat):
    option = SimpleNamespace(count=16, provider="aws", spot=False)
    ids = [torchrun_module.rdzv_id(plan_launch(option, cat.gpu("h100-sxm"), c)) for c in (COMMAND, COMMAND, "python b.py")]
    assert ids[0] == ids[1] != ids[2]


def test_one_node_keeps_torchrun_s_standalone_rendezvous(cat, monkeypatch):
    plan = plan_launch(SimpleNamespace(count=8, provider="aws", spot=False), cat.gpu("h100-sxm"), COMMAND)
    (line,) = torchrun_module.torchrun_lines(plan)
    argv = line.split()
    assert "--standalone" in argv and not any(a.startswith("--rdzv") for a in argv)
    assert parse_args(argv[3:]).standalone


@pytest.mark.parametrize("rank, host", [("0", "1"), ("1", "0")])
def test_the_skypilot_task_joins_the_rendezvous_of_its_task_id_on_the_first_node(sky, cat, tmp_path, monkeypatch,
                                                                                    rank, host):
    plan = plan_launch(SimpleNamespace(count=16, provider="aws", spot=False), cat.gpu("h100-sxm"), COMMAND)
    wheel = Path("gpuwise-0-py3-none-any.whl")
    path = tmp_path / "task.yaml"
    path.write_text(render(plan, "skypilot", wheel=wheel))
    assert sky.Task.from_yaml(str(path)).num_nodes == 2                 # SkyPilot's own parser takes it
    env = {"PATH": _stub_path(tmp_path, "gpuwise"), "SKYPILOT_NODE_RANK": rank, "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NUM_GPUS_PER_NODE": "8", "SKYPILOT_NODE_IPS": "10.0.0.7\n10.0.0.8",
           "SKYPILOT_TASK_ID": "sky-2026-01-01-00-00-00-000000_gpuwise_1"}
    done = subprocess.run(["bash", "-c", skypilot_task(plan, wheel)["run"]], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (argv,) = _recorded(tmp_path)
    config, _ = _torch_config(argv[argv.index("--") + 1:], monkeypatch)
    assert (config.rdzv_backend, config.rdzv_endpoint, config.run_id) == (
        "c10d", "10.0.0.7:29500", env["SKYPILOT_TASK_ID"])
    assert config.rdzv_configs["is_host"] == host and (config.min_nodes, config.max_nodes) == (2, 2)


# A worker of a 2-node job: after a first all-reduce, node b's worker "preempts" its node: it signals its torchrun
# (its parent), which stops the workers (each exits 75 as a checkpointed Guard worker does) and exits 75; the
# emitted loop starts that torchrun again. Node a's worker, left alone in the job, fails; the job finishes only
# if both nodes' workers start again together and meet (WORLD_SIZE 2, all-reduce of ones = 2).
WORKER = """
import os, signal, sys, time
import torch, torch.distributed as dist
signal.signal(signal.SIGTERM, lambda *_: os._exit(75))
signal.alarm(170)   # torchrun starts workers in sessions of their own: a hung one must not outlive the test
dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
if os.environ["NODE"] == "b" and not os.path.exists("preempted"):
    open("preempted", "w").close()
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(120)
dist.barrier()
total = torch.ones(1)
dist.all_reduce(total)
with open("done-" + os.environ["NODE"], "w") as f:
    f.write(f"{total.item():g} {os.environ['WORLD_SIZE']} {os.environ['TORCHELASTIC_RESTART_COUNT']}")
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_node_restarted_by_the_loop_rejoins_and_both_nodes_workers_restart_together(cat, tmp_path, monkeypatch):
    gpu = dataclasses.replace(cat.gpu("rtx-4090"), gpus_per_node=1)   # two nodes of one GPU: one worker each
    plan = plan_launch(SimpleNamespace(count=2, provider="autodl", spot=False), gpu, "python worker.py")
    # not the fixed 29500 another run may hold
    monkeypatch.setattr(torchrun_module, "RDZV_PORT", _free_port(), raising=False)
    (tmp_path / "worker.py").write_text(WORKER)
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"),
           "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}
    nodes = [subprocess.Popen(["bash", "-c", block], cwd=tmp_path, env={**env, "NODE": name}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
             for name, block in zip("ab", _blocks(render(plan, "torchrun")))]
    try:
        outs = [node.communicate(timeout=180)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(o[-3000:] for o in outs)
    assert (tmp_path / "preempted").exists()
    assert "restarting" in outs[1]                                      # node b's loop started torchrun again
    total, world, restarts = (tmp_path / "done-a").read_text().split()
    assert (total, world) == ("2", "2") and int(restarts) >= 1          # node a's workers restarted, in the job
    assert (tmp_path / "done-b").read_text().split()[:2] == ["2", "2"]
