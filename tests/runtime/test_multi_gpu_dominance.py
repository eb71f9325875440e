"""Physics on several GPUs: a GPU at least as large as another on its datasheet, faster alone and linked at
least as fast, is never predicted slower once the step is data parallel (a physics trial, defect).

Before: the collectives' exposed time was measured against the backward's GPU-busy time, while a launch-bound
backward lasts as long as the host takes to issue it and NCCL's stream runs in its gaps. A faster GPU had a
shorter busy backward, so more of its communication counted as exposed: BERT-base batch 8 under FSDP on 8 GPUs
took 28.5 ms on an H800 and 27.3 ms on an A800 80GB SXM4 (the same NVSwitch); ResNet-18 batch 8 DDP on 8 L40S
13.53 ms against 13.46 on 8 L40s.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload

RATES = ("fp32", "tf32", "fp16", "bf16")


def _larger_on_datasheet(a, b) -> bool:
    return (a.sm_count >= b.sm_count and a.memory_bandwidth_gbs >= b.memory_bandwidth_gbs and a.tdp_w >= b.tdp_w
            and all((a.peak(r) or 0) >= (b.peak(r) or 0) for r in RATES))

BERT_FSDP = Workload("hf:bert-base-uncased", seq_len=128, batch_size=8, precision="amp-fp16", optimizer="adamw",
                     sharding="fsdp")
RESNET18 = Workload("torchvision:resnet18", batch_size=8, precision="amp-fp16")

# (the larger GPU, the smaller, the job, the counts)
CASES = [("h800", "a800-80gb-sxm4", BERT_FSDP, (2, 4, 8)),
         ("l40s", "l40", RESNET18, (2, 4, 8)),
         ("l40s", "l40", BERT_FSDP, (2, 8))]


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


@pytest.mark.parametrize("bigger, smaller, workload, counts", CASES, ids=lambda v: getattr(v, "model", v))
def test_a_larger_gpu_on_links_as_fast_is_never_slower_on_several_gpus(cat, bigger, smaller, workload, counts):
    a, b = resolve_gpu(cat, bigger), resolve_gpu(cat, smaller)
    assert _larger_on_datasheet(a, b)             # the pair is what the rule is about
    model = model_for(workload)
    assert model.estimate(a).time.step_time_s <= model.estimate(b).time.step_time_s      # faster alone
    for count in counts:
        ta, tb = topology_for(a), topology_for(b)
        assert ta.intra == tb.intra and ta.intra_link.bus_gbs >= tb.intra_link.bus_gbs
        fast, slow = (model.estimate(g, count=count).time for g in (a, b))
        assert fast.step_time_s <= slow.step_time_s * (1 + 1e-9), (count, fast.step_time_s, slow.step_time_s)
        # the step on a larger GPU is the forward, the later of the backward and its collectives, the optimizer:
        # its communication is never more exposed than the whole collective time
        assert 0.0 <= fast.communication_s <= slow.communication_s + (slow.compute_s - fast.compute_s) + 1e-12
