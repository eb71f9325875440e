"""A Workload built in Python (a notebook, a script) means the job the CLI means: the one default precision
rule is reachable, a non-spec model is refused at once, and the record round-trips through JSON."""

from __future__ import annotations

import json

import pytest
import torch

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload, WorkloadError

LORA = dict(model="hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=2048, batch_size=2)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_with_default_precision_gives_the_rule_the_cli_applies(catalog):
    gpu = resolve_gpu(catalog, "rtx-4090")
    built = Workload(**LORA)
    assert built.precision == "fp32" and not built.precision_default      # as built: PyTorch's default
    job = built.with_default_precision()
    assert (job.precision, job.precision_default) == ("amp-bf16", True)
    # the CLI's 62.7 GiB at amp-bf16, not the 112.8 GiB of fp32
    assert estimate_llm(job, gpu).memory.total_bytes / 2**30 == pytest.approx(62.7, abs=0.1)


def test_with_default_precision_on_a_gpu_without_bf16_is_the_fp16_twin(catalog):
    job = Workload(**LORA).with_default_precision(resolve_gpu(catalog, "t4"))
    assert (job.precision, job.precision_default) == ("amp-fp16", True)
    assert Workload("torchvision:resnet50").with_default_precision().precision == "fp32"


def test_the_cli_reaches_its_default_through_the_workload_method(monkeypatch):
    from gpuwise.cli.workload_options import workload_from

    expected = Workload(**LORA).with_default_precision().with_(optimizer_default=True)
    calls = []
    original = Workload.with_default_precision

    def spy(self, gpu=None):
        calls.append(self.model)
        return original(self, gpu)

    monkeypatch.setattr(Workload, "with_default_precision", spy)
    job = workload_from("hf:Qwen/Qwen2.5-7B", {"finetune": "lora", "seq_len": 2048}, batch_size=2)
    assert calls == ["hf:Qwen/Qwen2.5-7B"]
    assert job == expected
    named = workload_from("hf:Qwen/Qwen2.5-7B", {"finetune": "lora", "precision": "fp32"}, batch_size=2)
    assert calls == ["hf:Qwen/Qwen2.5-7B"] and named.precision == "fp32" and not named.precision_default


@pytest.mark.parametrize("model", [torch.nn.Linear(4, 4), None, 3])
def test_a_model_that_is_not_a_spec_string_is_refused_when_the_workload_is_built(model):
    with pytest.raises(WorkloadError, match=r'spec string such as "torchvision:resnet50"') as info:
        Workload(model=model)
    assert "\n" not in str(info.value)


def test_the_json_record_reads_back_as_the_same_hashable_workload():
    job = Workload(**LORA, lora_targets=("q_proj", "v_proj"), num_gpus=2, precision="amp-bf16")
    record = json.loads(json.dumps(job.to_dict()))
    assert Workload(**record) == job and hash(Workload(**record)) == hash(job)
    assert Workload.from_dict(record) == job
    assert Workload.from_dict({**record, "a_field_of_a_later_version": 1}) == job
    with pytest.raises(WorkloadError, match="names no model"):
        Workload.from_dict({"batch_size": 2})
    with pytest.raises(WorkloadError, match="batch_size is True"):
        Workload.from_dict({**record, "batch_size": True})


def test_lora_targets_as_a_string_are_split_on_commas_as_the_flag_is():
    assert Workload(**LORA, lora_targets="q_proj").lora_targets == ("q_proj",)
    assert Workload(**LORA, lora_targets="q_proj, v_proj,").lora_targets == ("q_proj", "v_proj")
    assert Workload(**LORA, lora_targets=["q_proj", "v_proj"]).lora_targets == ("q_proj", "v_proj")
    with pytest.raises(WorkloadError, match="--lora-targets"):
        Workload(**LORA, lora_targets=[1, 2])


def test_workload_records_are_read_by_the_one_public_reader():
    # was: report/measured.py's own workload_of, a second reader of Workload.to_dict() records
    from pathlib import Path

    import gpuwise

    src = Path(gpuwise.__file__).parent
    readers = [p.name for p in src.rglob("*.py") if "workload_of" in p.read_text()]
    assert not readers
    users = {p.name for p in src.rglob("*.py") if "Workload.from_dict(" in p.read_text()}
    assert {"predicted_vs_measured.py", "rows.py", "measure_json.py"} <= users


def test_python_and_the_cli_estimate_the_same_job_without_a_precision(catalog, cli_json):
    from gpuwise.plan import model_for

    gpu = resolve_gpu(catalog, "rtx-4090")
    answer = cli_json(["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "2048",
                       "--batch-size", "2", "--gpu", "rtx-4090", "--json"])
    est = model_for(Workload(**LORA).with_default_precision(gpu)).estimate(gpu)
    assert answer["workload"]["precision"] == est.workload.precision == "amp-bf16"
    assert answer["memory"]["total_bytes"] == est.memory.total_bytes
