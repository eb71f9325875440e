"""The right-sizing report's step time on a GPU where the job cannot be laid out is None, as where it cannot run:
a vLLM replica of 8 GPUs on a GPU sold in machines of 4 would span two machines, which estimate refuses; before,
that refusal escaped as a PlanError and ended the whole report (a second review's finding)."""

from __future__ import annotations

import dataclasses

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.scaling import time_scaling
from gpuwise.workload import Workload


def test_a_gpu_whose_machines_would_split_the_replica_has_no_step_time():
    cat = load_catalog(user_file=False)
    h100, l4 = resolve_gpu(cat, "h100-sxm"), resolve_gpu(cat, "l4")
    served = Workload("hf:meta-llama/Meta-Llama-3-8B", mode="infer", engine="vllm", num_gpus=8, precision="bf16",
                      seq_len=512, max_new_tokens=16, batch_size=1)
    scaling = time_scaling("bf16", served)
    assert scaling.ratio(h100, dataclasses.replace(l4, gpus_per_node=4)) is None
