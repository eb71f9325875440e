"""A remedy that grows the effective batch says so in plain words. Was (a Llama-3-8B full fine-tune at batch 1 on an
H100, offered ZeRO-3 over 4 GPUs): "effective batch 4 instead of 1 samples per optimizer step: 1 do not split evenly
over 4 GPUs"."""

from __future__ import annotations

import json

from gpuwise.plan.remedies import batch_change_note, shard_over_gpus_remedy
from gpuwise.workload import Workload

LLAMA_3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192}


def test_a_batch_grown_by_sharding_names_both_batches_in_samples_and_the_layout_per_gpu():
    job = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", batch_size=1)
    sharded = shard_over_gpus_remedy(job, 4).apply(job)
    note = batch_change_note(job, sharded)
    grown = sharded.effective_batch_size
    assert note.startswith(f"effective batch {grown} samples per optimizer step instead of {job.effective_batch_size} ")
    assert f"(batch {grown // sharded.num_gpus} per GPU × {sharded.num_gpus} GPUs" in note
    assert f"{job.effective_batch_size} does not split evenly over {sharded.num_gpus})" in note
    assert "samples per optimizer step:" not in note and " do not " not in note


def test_estimate_offers_zero3_over_gpus_in_those_words(cli_json, tmp_path):
    config = tmp_path / "llama3.json"
    config.write_text(json.dumps(LLAMA_3_8B))
    out = cli_json(["estimate", f"hf:{config}", "--finetune", "full", "--precision", "amp-bf16", "--seq-len", "2048",
                    "-b", "1", "--gpu", "h100-sxm", "--json"])
    (shard,) = [ch for ch in out["changes_that_fit"] if ch["change"].startswith("--num-gpus")]
    count = int(shard["change"].split()[1])
    assert shard["batch_note"] == (f"effective batch {count} samples per optimizer step instead of 1 "
                                   f"(batch 1 per GPU × {count} GPUs, as 1 does not split evenly over {count})")
