"""Offload runs under ZeRO-2 or ZeRO-3 whatever ``--sharding`` said (review finding): the rule lived in the
memory model and the launch, and the time model used the raw ``--sharding``. A 13B full fine-tune on 4xA100
with ``--sharding ddp --offload optimizer`` was priced on ZeRO-2's memory but timed as DDP (every GPU running the
whole CPU optimizer step, 15.38 s, against ZeRO-2's 3.84 s and its sharding overhead). Now one rule,
``gpuwise.workload.parallelism.effective_sharding``, and memory, time and launch agree on it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch import BatchSplit, ShardingSetup, plan_launch
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.parallelism import effective_sharding

L13 = "hf:meta-llama/Llama-2-13b-hf"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _w(sharding: str, offload: str) -> Workload:
    return Workload(L13, finetune="full", precision="amp-bf16", optimizer="adamw", sharding=sharding,
                    offload=offload, num_gpus=4, batch_size=1, seq_len=512)


@pytest.mark.parametrize("sharding, offload, effective", [
    ("ddp", "optimizer", "zero2"), ("zero1", "optimizer", "zero2"), ("ddp", "params", "zero3"),
    ("zero1", "params", "zero3"), ("zero2", "params", "zero3"), ("fsdp", "params", "fsdp"),
    ("zero3", "optimizer", "zero3"), ("ddp", "none", "ddp"), ("zero1", "none", "zero1")])
def test_the_rule(sharding, offload, effective):
    assert effective_sharding(_w(sharding, offload)) == effective


@pytest.mark.parametrize("sharding, offload, effective", [("ddp", "optimizer", "zero2"),
                                                          ("zero1", "params", "zero3")])
def test_memory_time_and_launch_agree_on_the_effective_sharding(catalog, sharding, offload, effective):
    gpu = catalog.gpu("a100-80gb-sxm4")
    said, priced = estimate_llm(_w(sharding, offload), gpu), estimate_llm(_w(effective, offload), gpu)
    assert said.memory.total_bytes == priced.memory.total_bytes
    assert said.time.optimizer_s == pytest.approx(priced.time.optimizer_s)      # was 15.38 s against 3.84 s
    assert said.time.sharding_overhead_s == pytest.approx(priced.time.sharding_overhead_s)
    assert said.time.step_time_s == pytest.approx(priced.time.step_time_s)
    option = SimpleNamespace(count=4, provider="autodl", spot=False, batch_size=1, grad_accum_steps=1)
    plan = plan_launch(option, gpu, "python train.py", batch=BatchSplit.of(option, training=True),
                       sharding=ShardingSetup.of(_w(sharding, offload), 4))
    assert plan.env["GPUWISE_SHARDING"] == effective
    stage = int(effective[-1])
    assert json.loads(plan.files["gpuwise-ds-config.json"])["zero_optimization"]["stage"] == stage
