"""A new user's trial of the planning commands: what the output says must be what it is.

- `estimate hf:meta-llama/Llama-3.1-8B --finetune lora --seq-len 2048` ran at the default batch of 32 (786.8 GiB)
  without saying it was the default, as the precision and the optimizer do.
- A full fine-tune's "workspace 30.0 GiB" was foreach AdamW's step temporaries, not cuBLAS's workspace.
- At `--seq-len 1000000` the advice "try --num-gpus N with --sharding zero3" misleads: the activations are the need,
  and ZeRO-3 does not shard activations.
- `recommend --json`'s `peak_total_bytes` is estimate's `memory.total_upper_bytes` (the upper side), not its
  `memory.total_bytes`: documented, the key kept.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_a_default_batch_is_said_to_be_the_default(cli_run):
    argv = ("estimate", "hf:meta-llama/Llama-3.1-8B", "--finetune", "lora", "--seq-len", "2048")
    code, out, err = cli_run(*argv)
    assert code == 0, err
    assert "batch 32 (the default; --batch-size to choose)" in " ".join(out.split())
    code, out, err = cli_run(*argv, "--batch-size", "32")
    assert code == 0, err
    assert "batch 32" in out and "(the default; --batch-size" not in " ".join(out.split())


def test_a_full_fine_tune_s_optimizer_temporaries_are_not_called_workspace(cli_run, cli_json):
    argv = ["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "full", "--seq-len", "2048", "-b", "2",
            "--grad-checkpointing"]
    mem = cli_json([*argv, "--json"])["memory"]
    assert mem["workspace_bytes"] > 2**30
    assert "adamw step temporaries" in mem["workspace_label"]
    code, out, err = cli_run(*argv)
    assert code == 0, err
    rows = [line for line in out.splitlines() if "28.4 GiB" in line or "GiB" in line]
    assert any("adamw step temporaries" in row for row in rows)
    assert not any(row.strip("│┃ ").startswith("workspace ") for row in rows)


def test_when_activations_are_the_need_zero3_is_not_offered_as_the_cure(cli_run):
    code, out, err = cli_run("estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1000000",
                             "--batch-size", "1", "--gpu", "h100-sxm")
    assert code == 0, err
    said = " ".join(out.split())
    assert "none of the changes tried makes it fit" in said
    assert "try more GPUs (--num-gpus N with --sharding zero3" not in said
    assert "never activations" in said and "Sequence (context) parallelism" in said


def test_recommend_s_peak_total_bytes_is_estimate_s_upper_side_and_the_docs_say_so(cli_json):
    job = ["hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "1024", "-b", "4"]
    rec = cli_json(["recommend", *job, "--samples", "1000", "--gpus", "rtx-4090", "--max-gpus", "1",
                    "--no-remedies", "--json"])
    (option,) = rec["options"]
    est = cli_json(["estimate", *job, "--gpu", "rtx-4090", "--json"])
    assert option["peak_total_bytes"] == est["memory"]["total_upper_bytes"] != est["memory"]["total_bytes"]
    plan = " ".join((DOCS / "plan.md").read_text().split())
    assert "`peak_total_bytes`" in plan and "`memory.total_upper_bytes`" in plan
    assert "`inference.kv_cache_bytes_per_token` are **per GPU**" in plan
    assert "`memory.total_upper_bytes`" in " ".join((DOCS / "memory.md").read_text().split())
