"""The library's entry points as a notebook calls them: a model's estimate runs on the workload's own GPU
count, a GPU name where a catalog GPU is expected is one clear error of the part, and the public functions
say in their hints what they take."""

from __future__ import annotations

import inspect
import json

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.errors import GpuwiseError
from gpuwise.memory import MemoryError_, estimate_memory
from gpuwise.plan import PlanError, fits, make_quote, model_for, usable_bytes
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime import RuntimeError_, predict_step_time
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

SMALL = Workload("torchvision:resnet18", batch_size=4, image_size=64)
LLM = Workload("hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=2048, batch_size=2, precision="amp-bf16")


@pytest.fixture(scope="module")
def gpu():
    return resolve_gpu(load_catalog(), "a100-80gb")


@pytest.fixture(scope="module")
def trace():
    return trace_workload(SMALL)


def test_closed_form_estimate_runs_on_the_workloads_gpu_count(gpu):
    model = model_for(LLM.with_(num_gpus=2))
    est = model.estimate(gpu)
    assert est.count == 2 and est.workload.num_gpus == 2 and est.time.count == 2
    assert est.memory == model.estimate(gpu, count=2).memory
    assert model.estimate(gpu, count=1).count == 1        # an explicit count still wins
    assert est.memory == estimate_llm(LLM.with_(num_gpus=2), gpu).memory


def test_traced_estimate_runs_on_the_workloads_gpu_count(gpu):
    est = model_for(SMALL.with_(num_gpus=2)).estimate(gpu)
    assert est.count == 2 and est.workload.num_gpus == 2 and est.time.count == 2


def test_a_gpu_name_where_a_catalog_gpu_is_expected_is_the_parts_one_line_error(gpu, trace):
    calls = [(RuntimeError_, lambda: predict_step_time(trace, "a100-80gb")),
             (MemoryError_, lambda: estimate_memory(trace, "a100-80gb")),
             (PlanError, lambda: estimate_llm(LLM, "a100-80gb")),
             (PlanError, lambda: model_for(SMALL).estimate("a100-80gb")),
             (PlanError, lambda: model_for(LLM).estimate("a100-80gb"))]
    for error, call in calls:
        with pytest.raises(error) as info:
            call()
        assert isinstance(info.value, GpuwiseError)
        message = str(info.value)
        assert "\n" not in message
        assert "gpu must be a catalog GPU" in message
        assert "gpuwise.catalog.resolve_gpu(load_catalog(), 'a100-80gb')" in message
    assert estimate_memory(trace).total_bytes > 0       # None still means "no GPU named"


def test_entry_points_name_the_types_they_take():
    def hint(fn, name):
        return str(inspect.signature(fn).parameters[name].annotation)

    for fn in (predict_step_time, estimate_memory, estimate_llm, fits, usable_bytes, make_quote):
        assert "GPU" in hint(fn, "gpu"), fn.__name__
    assert "Trace" in hint(predict_step_time, "trace") and "Trace" in hint(estimate_memory, "trace")
    assert "Workload" in hint(estimate_llm, "workload")


def test_an_estimate_has_a_json_safe_dict(gpu):
    est = model_for(LLM).estimate(gpu)
    d = json.loads(json.dumps(est.to_dict()))
    assert d["gpu"] == gpu.id and d["count"] == 1 and d["fits"] is est.fits
    assert d["workload"] == est.workload.to_dict()
    assert d["memory"] == json.loads(json.dumps(est.memory.to_dict()))
    assert d["time"]["step_time_s"] == est.time.step_time_s
    memory_only = model_for(LLM).estimate(None).to_dict()
    assert memory_only["gpu"] is None and memory_only["time"] is None and memory_only["fits"] is None
