"""Traced generation's ``--json`` counts the kernels and the micro-step of its prefill, the traced forward whose
launch-bound warning names them (was: ``kernel_launches: 0`` and ``micro_step_s: 0`` beside a warning of "162
kernels per step")."""

from __future__ import annotations

import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan import model_for
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.llm import DecodeStep, generation_time
from gpuwise.runtime.model import StepTime
from gpuwise.workload import Workload

PROMPT_TOKENS, NEW_TOKENS, BATCH = 128, 64, 4


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from transformers import LlamaConfig

    folder = tmp_path_factory.mktemp("tinyllama")
    LlamaConfig(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                intermediate_size=256).save_pretrained(folder)
    return f"hf:{folder}"


def test_generation_json_counts_the_prefills_kernels_that_its_launch_warning_names(tiny_llama, cli_json):
    out = cli_json(["estimate", tiny_llama, "--mode", "infer", "--seq-len", str(PROMPT_TOKENS), "-b", str(BATCH),
                    "--max-new-tokens", str(NEW_TOKENS), "--gpu", "a100-80gb", "--json"])
    time = out["time"]
    launch = next(w for w in time["warnings"] if w.startswith("launch-bound"))
    assert time["kernel_launches"] == int(re.search(r"issue (\d+) kernels", launch).group(1))
    # the prefill's own figures, from the traced forward of the prompts
    job = Workload(tiny_llama, mode="infer", seq_len=PROMPT_TOKENS, batch_size=BATCH, max_new_tokens=NEW_TOKENS)
    model = model_for(job)
    prefill = predict_step_time(model.trace(), resolve_gpu(load_catalog(user_file=False), "a100-80gb"),
                                workload=model.workload)
    assert time["kernel_launches"] == prefill.kernel_launches > 0
    assert time["micro_step_s"] == pytest.approx(prefill.micro_step_s) and time["micro_step_s"] > 0
    assert time["micro_step_s"] == pytest.approx(out["inference"]["ttft_s"])


def test_generation_time_keeps_the_prefills_kernels_and_micro_step():
    prefill = StepTime(gpu="a100-80gb-sxm4", count=1, step_time_s=0.006, samples_per_s=600.0,
                       by_class_s={"matmul": 0.001}, bound="launch", micro_step_s=0.006, kernel_launches=162,
                       host_s=0.006, device_s=0.001)
    decode = DecodeStep(step_s=0.004, gpu_s=0.001, host_s=0.004, memory_s=0.001, compute_s=0.0002, tp_comm_s=0.0)
    step = generation_time(prefill, decode, new_tokens=NEW_TOKENS, batch=BATCH, engine="hf",
                           regime="generation").step
    assert (step.kernel_launches, step.micro_step_s) == (prefill.kernel_launches, prefill.micro_step_s)
