"""The changes that make a job fit one GPU: the ones people reach for, fewest needed, effective batch kept."""

from __future__ import annotations

from gpuwise.plan.remedies import candidate_remedies, micro_batch_remedy
from gpuwise.workload import Workload

QWEN_LORA = ["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "2048", "--gpu", "rtx-4090", "--json"]


def test_a_smaller_micro_batch_with_more_accumulation_steps_comes_before_changing_the_method(cli_json):
    # before: "fits with --grad-checkpointing --logits chunked --finetune qlora" while 2 x 2 accumulation
    # steps with checkpointing and chunked logits fits and keeps LoRA and the effective batch of 4
    out = cli_json([*QWEN_LORA, "--batch-size", "4"])
    assert out["fits"] is False
    (change,) = out["changes_that_fit"]
    assert change["change"] == "--batch-size 2 --grad-accum 2 --grad-checkpointing --logits chunked"
    assert change["peak_total_bytes"] <= 0.95 * change["gpu_memory_bytes"]
    # the named change, typed as printed, fits
    flags = change["change"].split()
    applied = cli_json([*QWEN_LORA, *flags])
    assert applied["fits"] is True and applied["memory"]["total_upper_bytes"] == change["peak_total_bytes"]


def test_the_micro_batch_remedy_keeps_the_effective_batch_and_is_left_to_recommend_s_own_split():
    w = Workload(model="hf:Qwen/Qwen2.5-7B", batch_size=8, grad_accum_steps=3, finetune="lora")
    half = micro_batch_remedy(w).apply(w)
    assert (half.batch_size, half.grad_accum_steps, half.effective_batch_size) == (4, 6, w.effective_batch_size)
    assert micro_batch_remedy(w.with_(batch_size=3)) is None and micro_batch_remedy(w.with_(batch_size=1)) is None
    assert candidate_remedies(w, True)[0].change == "--batch-size 4 --grad-accum 6"
    assert not any(r.change.startswith("--batch-size") for r in candidate_remedies(w, True, micro_batch=False))
