"""Several nodes timed over a cluster network ask SkyPilot for it (`network_tier: best`).

Before: `recommend … --provider aws --gpus h100-sxm --max-gpus 16 --emit skypilot` timed 2 nodes of 8 over the p5's
3200 Gb/s EFA, and the task asked for nothing more: SkyPilot 0.14 attaches EFA (AWS) and GPUDirect-TCPX (GCP's A3)
only at `network_tier: best`, so the nodes ran their all-reduces over the VPC's ethernet, far slower than priced.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from gpuwise.launch import plan_launch, render
from gpuwise.launch.skypilot import skypilot_task


def _task(cat, gpu, count, provider, tmp_path):
    option = SimpleNamespace(count=count, provider=provider, spot=False)
    plan = plan_launch(option, cat.gpu(gpu), "python train.py --checkpoint-dir ckpt")
    return plan, skypilot_task(plan, tmp_path / "gpuwise.whl")


@pytest.mark.parametrize("gpu, provider", [("h100-sxm", "aws"), ("h100-sxm", "gcp"), ("a100-40gb-sxm4", "aws")])
def test_nodes_timed_over_a_cluster_network_ask_for_it_and_skypilot_reads_it(cat, sky, tmp_path, gpu, provider):
    plan, task = _task(cat, gpu, 16, provider, tmp_path)
    assert plan.nodes == 2 and plan.network.kind in ("efa", "roce")
    parsed = sky.Task.from_yaml_config(task)
    assert parsed.num_nodes == 2
    (resources,) = parsed.resources
    assert resources.network_tier.value == "best"


@pytest.mark.parametrize("gpu, count, provider", [
    ("h100-sxm", 8, "aws"),             # one node: nothing between nodes
    ("a100-40gb-sxm4", 16, "gcp"),      # a2-highgpu: timed over 100 Gb/s ethernet, the default tier's
])
def test_one_node_or_plain_ethernet_asks_for_no_network_tier(cat, sky, tmp_path, gpu, count, provider):
    _, task = _task(cat, gpu, count, provider, tmp_path)
    assert "network_tier" not in task["resources"]
    (resources,) = sky.Task.from_yaml_config(task).resources
    assert resources.network_tier is None


def test_aws_efa_header_says_skypilot_uses_all_interfaces_only_with_internal_ips(cat, tmp_path):
    option = SimpleNamespace(count=16, provider="aws", spot=False)
    plan = plan_launch(option, cat.gpu("h100-sxm"), "python train.py")
    text = render(plan, "skypilot", wheel=tmp_path / "gpuwise.whl")
    notes = [line for line in text.splitlines() if line.startswith("# note:") and "EFA" in line]
    assert len(notes) == 1 and "use_internal_ips: true" in notes[0] and "3200 Gb/s" in notes[0]
    assert yaml.safe_load(text)["resources"]["network_tier"] == "best"
    gcp = plan_launch(SimpleNamespace(count=16, provider="gcp", spot=False), cat.gpu("h100-sxm"), "python train.py")
    assert "use_internal_ips" not in render(gcp, "skypilot", wheel=tmp_path / "gpuwise.whl")
