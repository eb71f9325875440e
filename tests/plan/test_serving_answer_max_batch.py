"""``estimate --json`` for serving said ``max_batch_size`` null at the top while ``inference.max_batch_size`` was
256 (a new user's trial): the answer's figure is the model's own largest batch where it gives one, so the two
agree; ``--max-batch`` still sets it by its search, and a model that gives none (training) keeps null."""

from __future__ import annotations

import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan import model_for
from gpuwise.plan.answer import estimate_answer, largest_batch_answer
from gpuwise.workload import Workload

L8 = "hf:meta-llama/Meta-Llama-3-8B"


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


@pytest.mark.parametrize("engine", ["vllm", "hf"])
def test_the_top_level_largest_batch_is_the_inference_one(h100, engine):
    w = Workload(L8, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=32, engine=engine, precision="bf16")
    out, _ = estimate_answer(model_for(w), [h100], headroom_fraction=0.05)
    assert out["inference"]["max_batch_size"] > 0
    assert out["max_batch_size"] == out["inference"]["max_batch_size"]        # was None
    assert "requested_batch_size" not in out
    if engine == "vllm":                          # the cache or vLLM's max_num_seqs (1024 on an H100), the lesser
        vllm = out["inference"]["vllm"]
        assert vllm["max_num_seqs"] == 1024 and out["max_batch_size"] == min(vllm["sequences_at_context"], 1024)
    searched, _ = largest_batch_answer(model_for(w), h100, headroom_fraction=0.05)
    assert searched["max_batch_size"] == searched["inference"]["max_batch_size"] == out["max_batch_size"]


def test_training_gives_no_largest_batch_without_the_search(h100):
    w = Workload(L8, mode="train", seq_len=512, batch_size=1, finetune="qlora", precision="bf16")
    out, _ = estimate_answer(model_for(w), [h100], headroom_fraction=0.05, suggest_changes=False)
    assert out["max_batch_size"] is None


def test_the_text_output_does_not_read_it_as_a_max_batch_search(cli_run):
    code, out, err = cli_run("estimate", L8, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256", "-b",
                             "32", "--engine", "vllm", "--gpu", "h100-sxm")
    assert code == 0, err
    assert "Largest batch that fits" not in out and re.search(r"largest batch that fits \d+", " ".join(out.split()))
