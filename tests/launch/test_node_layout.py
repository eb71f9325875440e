"""One rule for the machines a GPU count runs on: what estimate times and describes is what launch runs.

A new user's trial: `estimate --num-gpus 12 --gpu h100-sxm --provider aws` said "2 nodes of 8" (and timed rings of 8
inside a node) while the launch of 12 ran 2 nodes of 6, and refused counts such as 9 as "do not split evenly".
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from gpuwise.catalog.topology import topology_for
from gpuwise.launch import plan_launch
from gpuwise.launch.plan import LaunchError

LLM = ["hf:Qwen/Qwen2.5-7B", "--seq-len", "512", "-b", "1", "--sharding", "zero3"]


@pytest.mark.parametrize("count", range(1, 33))
def test_launch_runs_a_count_on_the_machines_the_time_model_puts_it_on_or_refuses_it(cat, count):
    gpu = cat.gpu("h100-sxm")
    topo = topology_for(gpu, "aws")
    option = SimpleNamespace(count=count, provider="aws", spot=False)
    nodes = topo.nodes(count)
    timed_per_node = min(count, topo.gpus_per_node)      # the rings the time model runs inside a node
    if nodes * timed_per_node != count:
        with pytest.raises(LaunchError, match=f"{count} GPUs are not whole machines of {topo.gpus_per_node}"):
            plan_launch(option, gpu, "python train.py")
        return
    plan = plan_launch(option, gpu, "python train.py")
    assert (plan.nodes, plan.gpus_per_node) == (nodes, timed_per_node)


@pytest.mark.parametrize("count", [12, 16])
def test_estimate_says_what_launch_would_do_with_the_count(cli_json, cat, count):
    out = cli_json(["estimate", *LLM, "--num-gpus", str(count), "--gpu", "h100-sxm", "--provider", "aws", "--json"])
    warnings = out["time"]["warnings"]
    (described,) = [m for w in warnings if (m := re.match(rf"{count} GPUs: (\d+) nodes of (\d+)", w))]
    refused = [w for w in warnings if w.startswith("gpuwise does not launch this: ")]
    try:
        plan = plan_launch(SimpleNamespace(count=count, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py")
    except LaunchError as exc:
        assert refused == [f"gpuwise does not launch this: {exc}"]
    else:     # launched on the machines the estimate describes (and times)
        assert (plan.nodes, plan.gpus_per_node) == tuple(map(int, described.groups())) and refused == []
