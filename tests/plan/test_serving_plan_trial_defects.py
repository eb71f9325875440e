"""Defects found by trials of LLM serving plans and of recommend's Best line.

- `estimate … --engine vllm --num-gpus 16 --gpu a100-80gb` timed one tensor-parallel replica over two machines (a
  58.6 s first token over the assumed 10 Gb/s link) that `recommend` leaves out: the two now share one rule.
- A 405B model whose weights fit no GPU on offer even split over 8 read "the job does not fit … at this batch
  size", as if a smaller batch would do.
- A Gemma 3 multimodal config was served counting the language model alone, with no word of its SigLIP tower.
- recommend's Best line gave no word of how far its time may be off, while the notes spoke of several regimes.
"""

from __future__ import annotations

import json

import pytest
import torch
from transformers import SiglipVisionConfig, SiglipVisionModel

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, PlanError, model_for, recommend
from gpuwise.units import format_duration
from gpuwise.workload import Workload
from gpuwise.workload.decoder_configs import vision_tower_params
from gpuwise.workload.llm_config import config_path_for


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _served(model: str, **kw) -> Workload:
    return Workload(model=model, precision="bf16", mode="infer", seq_len=512, batch_size=1, max_new_tokens=16,
                    engine="vllm", **kw)


# 1. one replica over two machines: estimate refuses it as recommend leaves it out, in the same words

def test_estimate_refuses_a_vllm_replica_over_two_machines_in_recommends_words(catalog):
    model = model_for(_served("hf:meta-llama/Meta-Llama-3-8B"))   # 32 heads: 16-way TP is no refusal of its own
    h100 = catalog.gpu("h100-sxm")
    rec = recommend(model, catalog, job=JobSize(samples=100), provider="aws", gpu_ids=["h100-sxm"], max_gpus=16)
    sixteen = next(o for o in rec.options if o.count == 16)
    with pytest.raises(PlanError) as refused:
        model.estimate(h100, count=16, provider="aws")
    assert str(refused.value) == sixteen.excluded_because
    assert model.estimate(h100, count=8, provider="aws").time.step_time_s > 0     # one machine of 8: estimated


def test_the_estimate_cli_refuses_the_trials_70b_over_16_a100s_in_one_line(cli_run):
    code, out, err = cli_run("estimate", "hf:meta-llama/Llama-3.1-70B", "--mode", "infer", "--engine", "vllm",
                             "--num-gpus", "16", "--gpu", "a100-80gb", "--seq-len", "512", "--max-new-tokens", "64")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "one vLLM replica over 2 machines" in err and "serve on at most 8 per replica" in err


# 2. the weights alone do not fit: said so, not "at this batch size"

def test_nothing_meets_says_the_weights_alone_do_not_fit_when_no_batch_would(catalog):
    w = Workload(model="hf:meta-llama/Llama-3.1-405B", mode="infer", engine="vllm", seq_len=1024,
                 max_new_tokens=256, batch_size=8)
    rec = recommend(model_for(w), catalog, job=JobSize(steps=100), provider="aws", max_gpus=8, remedies=False)
    assert rec.best is None
    assert "weights alone do not fit on any GPU on offer, on up to 8 of them" in rec.nothing_meets
    assert "at this batch size" not in rec.nothing_meets
    assert all(o.exclusion.weights_alone for o in rec.options if o.exclusion.kind == "oom")


def test_a_job_whose_weights_fit_still_reads_at_this_batch_size(catalog):
    # an 8B model's 16 GB of weights fit a 24 GB GPU; 64 sequences of 8k tokens of KV cache do not
    w = Workload(model="hf:meta-llama/Meta-Llama-3-8B", precision="bf16", mode="infer", engine="vllm", seq_len=8000,
                 max_new_tokens=100, batch_size=64)
    rec = recommend(model_for(w), catalog, job=JobSize(steps=10), gpu_ids=["a10g"], max_gpus=1, remedies=False)
    assert rec.best is None and rec.nothing_meets.endswith("at this batch size")
    assert not any(o.exclusion.weights_alone for o in rec.options)


# 3. a multimodal Gemma 3: its vision tower, not counted, is said, with its parameters

def test_vision_tower_params_are_those_transformers_builds_for_gemma3s_siglip():
    cfg = json.loads(config_path_for("hf:google/gemma-3-4b-pt").read_text())
    with torch.device("meta"):
        tower = SiglipVisionModel(SiglipVisionConfig(**cfg["vision_config"]))
    assert vision_tower_params(cfg) == sum(p.numel() for p in tower.parameters())
    assert vision_tower_params({"text_config": cfg["text_config"]}) == 0


def test_serving_a_gemma3_multimodal_config_says_its_vision_tower_is_not_counted(catalog):
    est = model_for(_served("hf:google/gemma-3-4b-pt")).estimate(catalog.gpu("l4"))
    said = [n for n in est.memory.notes if "vision tower" in n]
    assert len(said) == 1 and "siglip_vision_model vision tower (0.42B parameters" in said[0]
    text_only = model_for(_served("hf:meta-llama/Meta-Llama-3-8B")).estimate(catalog.gpu("l4"))
    assert not any("vision tower" in n for n in text_only.memory.notes)


# 4. the Best line says how far its time may be off: its regime's range, or that none measures it

RESNET_ON_A100 = ["recommend", "torchvision:resnet50", "--steps", "1000", "--gpus", "a100-80gb-sxm4",
                  "--max-gpus", "1", "--no-remedies"]


def _best_line(text: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Best:"))
    return " ".join(line.strip() for line in lines[start:start + 3])


def test_the_best_line_carries_the_likely_range_of_a_large_batch_pick(cli_run, cli_json):
    best = cli_json([*RESNET_ON_A100, "--batch-size", "128", "--json"])["best"]
    assert best["regime"] == "large-batch" and best["likely_range_note"] is None
    low, high = best["likely_time_range_s"]
    code, out, _ = cli_run(*RESNET_ON_A100, "--batch-size", "128")
    assert code == 0
    assert f"a step; large-batch: likely {format_duration(low)}–{format_duration(high)})" in _best_line(out)


def test_the_best_line_says_no_held_out_run_measures_a_small_batch_pick(cli_run, cli_json):
    best = cli_json([*RESNET_ON_A100, "--batch-size", "8", "--json"])["best"]
    assert best["regime"] == "small-batch" and best["likely_time_range_s"] is None
    assert best["likely_range_note"].startswith("no held-out run measures this (a small-batch step")
    code, out, _ = cli_run(*RESNET_ON_A100, "--batch-size", "8")
    assert code == 0 and "a step; small-batch: no held-out run measures this)" in _best_line(out)

