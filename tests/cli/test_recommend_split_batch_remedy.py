"""`gpuwise recommend` prices the effective batch that splits over several GPUs where none of theirs did.

Was: "nothing meets the request … (the multi-GPU options need an effective batch they can split: --effective-batch
N, or --per-gpu-batch …)", then only --optimizer adamw-8bit and --finetune lora/qlora lines, with figures; the same
full fine-tune over several GPUs had none.
"""

from __future__ import annotations

from gpuwise.units import format_duration, format_money

ARGV = ["recommend", "hf:Qwen/Qwen2.5-14B", "--precision", "bf16", "--seq-len", "2048", "--batch-size", "1",
        "--grad-checkpointing", "--sharding", "zero3", "--steps", "1000", "--provider", "autodl"]


def test_json_lists_the_batch_remedy_with_the_figures_of_the_recommendation_it_names(cli_json):
    out = cli_json([*ARGV, "--json"])
    assert out["best"] is None
    (remedy,) = [r for r in out["remedies"] if r["change"].startswith("--effective-batch ")]
    assert remedy["count"] > 1 and remedy["batch_note"]
    best = cli_json([*ARGV, *remedy["change"].split(), "--json"])["best"]
    assert (best["gpu"], best["count"], best["total_time_s"], best["total_cost_ranked"]) == (
        remedy["gpu"], remedy["count"], remedy["total_time_s"], remedy["total_cost_ranked"])


def test_the_text_names_the_change_the_gpus_and_their_time_and_cost(cli_json, cli_run, monkeypatch):
    (remedy,) = [r for r in cli_json([*ARGV, "--json"])["remedies"] if r["change"].startswith("--effective-batch ")]
    monkeypatch.setenv("COLUMNS", "400")     # one remedy a line
    code, out, _err = cli_run(*ARGV)
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if f"{remedy['change']} →" in ln]
    assert line.startswith(f"To make the job fit: {remedy['change']} → {remedy['count']}× {remedy['gpu_name']}")
    assert f"{format_duration(remedy['total_time_s'])}, {format_money(remedy['total_cost_ranked'], 'CNY')}" in line
    assert line.endswith(f"; {remedy['batch_note']}")
