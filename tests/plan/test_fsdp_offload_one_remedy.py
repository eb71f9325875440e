"""Under FSDP, --offload optimizer and --offload params are one job (FSDP's one CPU offload moves the weights too:
``workload.parallelism.params_offloaded``), so a job that does not fit is offered one offload remedy, not two with
the same figures; and none once it offloads. DeepSpeed's ZeRO keeps both."""

import os

from gpuwise.plan.remedies import offload_remedies
from gpuwise.workload import Workload

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA8 = "hf:meta-llama/Llama-3.1-8B"


def _flags(**kw) -> list[str]:
    w = Workload(LLAMA8, finetune="full", seq_len=1024, batch_size=1, precision="amp-fp16", num_gpus=8, **kw)
    return [r.change for r in offload_remedies(w)]


def test_fsdp_is_offered_one_offload_and_none_once_it_offloads():
    assert _flags(sharding="fsdp") == ["--offload optimizer"]
    assert _flags(sharding="fsdp", offload="optimizer") == []


def test_zero_keeps_both_offloads():
    assert _flags(sharding="zero2") == ["--offload optimizer", "--offload params"]
    assert _flags(sharding="zero3", offload="optimizer") == ["--offload params"]
