"""--finetune freeze on a CNN trains its classifier (linear probing): the head is found by structure (what follows
the last repeated block), so a model without linear layers inside its blocks (ResNet, a UNet) takes it too.
Before, it was refused as needing "a transformer: nn.Linear layers inside repeated blocks"."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
import torchvision.models as tvm

from gpuwise.trace import trace_workload
from gpuwise.trace.peft import apply_finetune
from gpuwise.workload import Workload


def test_a_resnet_frozen_trains_its_fc_only():
    with torch.device("meta"):
        module = tvm.resnet50()
    apply_finetune(module, Workload("torchvision:resnet50", finetune="freeze"))
    trained = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trained == {"fc.weight", "fc.bias"}


def test_a_frozen_resnet_trace_keeps_optimizer_state_for_the_fc_only():
    trace = trace_workload(Workload("torchvision:resnet18", batch_size=2, image_size=32, finetune="freeze"),
                           use_cache=False)
    fc_params = 512 * 1000 + 1000
    assert trace.trainable_param_count == fc_params
    assert trace.param_count > 10 * fc_params


def test_estimate_freeze_on_a_cnn_exits_0():
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", "torchvision:resnet18", "--batch-size",
                        "2", "--image-size", "32", "--finetune", "freeze", "--no-cache", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    fc_bytes = 4 * (512 * 1000 + 1000)
    optimizer_bytes = json.loads(r.stdout)["memory"]["optimizer_bytes"]
    # exp_avg and exp_avg_sq of the fc, and at most foreach AdamW's fc-sized temporary (+ the allocator's rounding);
    # the whole model's state would be 2 x 46.8 MB
    assert 2 * fc_bytes <= optimizer_bytes < 3 * fc_bytes + 2**20
