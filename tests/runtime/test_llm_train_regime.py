"""The LLM closed form's training of every weight is a regime of its own (`llm-train`), the kind of step
llm-foundry's held-out MPT runs measure: it gets their likely range; LoRA, QLoRA, offload, MoE and serving stay
`llm`, which no public run measures (issue 28 item 4: a range only where held-out runs of that regime exist).
Before, every closed-form step said "no held-out public runs measure its time error yet"."""

from __future__ import annotations

import pytest

from gpuwise.plan.accuracy import regime_of
from gpuwise.runtime.accuracy import LLM_REGIMES, MIN_CASES, REGIMES, load_accuracies, load_accuracy
from gpuwise.runtime.llm import train_regime
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config

DENSE = arch_from_config({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
                          "intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16,
                          "num_hidden_layers": 4, "vocab_size": 32000, "max_position_embeddings": 2048})
MOE = arch_from_config({"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 1024,
                        "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 8,
                        "num_hidden_layers": 2, "vocab_size": 32000, "num_local_experts": 8,
                        "num_experts_per_tok": 2, "max_position_embeddings": 2048})
FULL = Workload("m", mode="train", finetune="full", precision="amp-bf16", optimizer="adamw")


@pytest.mark.parametrize("arch, changes, regime", [
    (DENSE, {}, "llm-train"),
    (DENSE, {"num_gpus": 8, "sharding": "fsdp"}, "llm-train"),
    (DENSE, {"finetune": "lora"}, "llm"),
    (DENSE, {"finetune": "qlora", "quant": "nf4"}, "llm"),
    (DENSE, {"num_gpus": 2, "sharding": "zero3", "offload": "optimizer"}, "llm"),
    (MOE, {}, "llm"),
])
def test_only_training_every_weight_of_a_dense_decoder_without_offload_is_the_measured_kind(arch, changes, regime):
    assert train_regime(arch, FULL.with_(**changes)) == regime


def test_a_mig_slice_is_no_whole_gpu_the_runs_measured():
    from gpuwise.catalog import load_catalog, resolve_gpu

    catalog = load_catalog(user_file=False)
    assert train_regime(DENSE, FULL, resolve_gpu(catalog, "a100-80gb-sxm4")) == "llm-train"
    assert train_regime(DENSE, FULL, resolve_gpu(catalog, "a100-80gb-sxm4-mig-3g.40gb")) == "llm"


def test_the_closed_forms_regimes_pass_through_and_nothing_else_does():
    assert set(LLM_REGIMES) <= set(REGIMES)
    for regime in LLM_REGIMES:
        assert regime_of("closed-form", regime) == regime
    assert regime_of("closed-form", "") == "llm" and regime_of("closed-form", "large-batch") == "llm"
    assert regime_of("traced", "llm-train") == "llm-train" and regime_of("traced", "") == "large-batch"


def test_the_shipped_file_gives_the_measured_kind_a_range_and_the_rest_none():
    shipped = load_accuracies()
    assert "llm" not in shipped                        # LoRA, offload, serving: no public run measures them
    train = load_accuracy("llm-train")
    assert train is not None and train.cases >= MIN_CASES
    assert 0 < train.ratio_q10 <= train.ratio_q90 and "llm-foundry" in train.source


def test_estimate_prints_the_range_for_a_full_fine_tune_and_not_for_lora(cli_json):
    common = ["hf:Qwen/Qwen2.5-7B", "--seq-len", "1024", "--batch-size", "1", "--precision", "amp-bf16",
              "--grad-checkpointing", "--gpu", "h100-sxm", "--num-gpus", "8", "--sharding", "fsdp", "--json"]
    full = cli_json(["estimate", *common, "--finetune", "full"])
    assert full["time"]["regime"] == "llm-train"
    low, high = full["time"]["likely_step_time_range_s"]
    train = load_accuracy("llm-train")
    assert low == pytest.approx(full["time"]["step_time_s"] / train.ratio_q90)
    assert high == pytest.approx(full["time"]["step_time_s"] / train.ratio_q10)
    lora = cli_json(["estimate", *common, "--finetune", "lora"])
    assert lora["time"]["regime"] == "llm" and lora["time"]["likely_step_time_range_s"] is None
