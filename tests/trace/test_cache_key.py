"""The trace cache keys on the fields a trace reads, no more (issue 23 item 2): stack-only options reuse a
trace; the runtime takes the job's accumulation and stack from the workload, never from an edited trace."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime import predict_step_time
from gpuwise.trace import cache, trace_workload
from gpuwise.workload import Workload
from gpuwise.workload.specs import resolve_model_spec

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuwise"
SMALL = Workload(model="torchvision:resnet18", batch_size=2, image_size=32, optimizer="adamw")
STACK_ONLY = {"input_rate": 50.0, "engine": "vllm", "num_gpus": 4, "sharding": "zero3", "offload": "optimizer",
              "compile": True, "logits": "chunked", "max_new_tokens": 16}


def test_workloads_differing_only_in_stack_options_share_a_key_and_batch_does_not():
    spec = resolve_model_spec(SMALL.model)
    key = cache.trace_key(SMALL, spec)
    for name, value in STACK_ONLY.items():
        assert cache.trace_key(SMALL.with_(**{name: value}), spec) == key, name
    assert cache.trace_key(SMALL.with_(cpu_workers=8), spec) == key
    assert cache.trace_key(SMALL.with_(precision_default=True), spec) == key
    assert cache.trace_key(SMALL.with_(batch_size=4), spec) != key
    assert cache.trace_key(SMALL.with_(precision="amp-fp16"), spec) != key


def test_a_stack_only_change_hits_the_cache_and_the_trace_carries_the_asking_workload(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPUWISE_NO_CACHE", raising=False)       # the suite turns the cache off
    first = trace_workload(SMALL)
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    other = SMALL.with_(input_rate=50.0, compile=True)
    hit = trace_workload(other)
    assert len(list(tmp_path.glob("*.pickle"))) == 1             # no second trace
    assert hit.workload == other and hit.ops == first.ops          # the job's own stack, the same step
    trace_workload(SMALL.with_(batch_size=4))
    assert len(list(tmp_path.glob("*.pickle"))) == 2


def test_the_tracer_reads_no_workload_field_the_key_leaves_out():
    read = set()
    for path in [*(SRC / "trace").glob("*.py"), SRC / "workload" / "spec_builders.py"]:
        read |= set(re.findall(r"\bworkload\.([a-z_]+)\b", path.read_text()))
    fields = {f.name for f in dataclasses.fields(Workload)}
    assert read & fields <= set(cache.TRACED_FIELDS), sorted((read & fields) - set(cache.TRACED_FIELDS))


def test_the_runtime_takes_accumulation_and_input_rate_from_the_job_not_the_trace():
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    trace = trace_workload(SMALL.with_(grad_accum_steps=2))
    one = predict_step_time(trace, gpu, workload=trace.workload.with_(grad_accum_steps=1))
    four = predict_step_time(trace, gpu, workload=trace.workload.with_(grad_accum_steps=4))
    assert four.samples_per_s * four.step_time_s == pytest.approx(4 * one.samples_per_s * one.step_time_s)
    assert four.step_time_s > 3 * one.micro_step_s
    slow = predict_step_time(trace, gpu, workload=trace.workload.with_(input_rate=1.0))
    assert slow.bound == "input" and trace.workload.input_rate is None
