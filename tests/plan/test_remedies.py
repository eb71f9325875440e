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


LLAMA_13B_8X = ["estimate", "hf:meta-llama/Llama-2-13b-hf", "--finetune", "full", "--seq-len", "2048", "-b", "1",
                "--precision", "amp-bf16", "--grad-checkpointing", "--gpu", "a100-80gb-sxm4", "--json"]


def _fits_as_named(cli_json, argv, change):
    """The named change, typed as printed, fits, at the memory it was quoted at."""
    applied = cli_json([*argv, *change["change"].split()])
    assert applied["fits"] is True and applied["memory"]["total_upper_bytes"] == change["peak_total_bytes"]


def test_on_several_gpus_the_zero_stages_that_fit_are_offered_without_changing_the_method(cli_json):
    # a new user's trial: 13B full fine-tuning on 8 A100s under DDP "does not fit: needs 301.6 GiB" and only
    # --finetune lora/qlora were offered, though --sharding zero2 and zero3 fit keeping full fine-tuning
    argv = [*LLAMA_13B_8X, "--num-gpus", "8", "--sharding", "ddp"]
    out = cli_json(argv)
    assert out["fits"] is False
    changes = {c["change"]: c for c in out["changes_that_fit"]}
    for stage in ("--sharding zero2", "--sharding zero3"):
        assert stage in changes, list(changes)
        _fits_as_named(cli_json, argv, changes[stage])
    assert changes["--sharding zero3"]["peak_total_bytes"] < changes["--sharding zero2"]["peak_total_bytes"]
    # those that keep the training the same before those that change the method (LoRA, QLoRA), each group
    # fastest (so cheapest on these GPUs) first
    same = [c for c in out["changes_that_fit"] if "--finetune" not in c["change"]]
    method = [c for c in out["changes_that_fit"] if "--finetune" in c["change"]]
    assert out["changes_that_fit"] == same + method
    for group in (same, method):
        times = [c["step_time_s"] for c in group]
        assert times == sorted(times)


def test_one_gpu_is_offered_cpu_offload_and_no_sharding(cli_json):
    # 7B full fine-tuning on one A100 80GB: --offload optimizer fits (ZeRO-Offload), it was never offered
    out = cli_json(["estimate", "hf:meta-llama/Llama-2-7b-hf", "--finetune", "full", "--seq-len", "2048", "-b", "1",
                    "--precision", "amp-bf16", "--grad-checkpointing", "--gpu", "a100-80gb-sxm4", "--json"])
    assert out["fits"] is False
    changes = {c["change"]: c for c in out["changes_that_fit"]}
    assert "--offload optimizer" in changes and not any(c.startswith("--sharding") for c in changes)
    _fits_as_named(cli_json, ["estimate", "hf:meta-llama/Llama-2-7b-hf", "--finetune", "full", "--seq-len", "2048",
                              "-b", "1", "--precision", "amp-bf16", "--grad-checkpointing", "--gpu", "a100-80gb-sxm4",
                              "--json"], changes["--offload optimizer"])


def test_sharding_and_offload_candidates_follow_the_job_s_own_setting():
    w = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", num_gpus=4, sharding="zero1")
    changes = [r.change for r in candidate_remedies(w, True)]
    assert "--sharding zero1" not in changes and changes.index("--sharding zero2") < changes.index("--sharding zero3")
    assert changes.index("--sharding zero3") < changes.index("--finetune lora") < changes.index("--offload optimizer")
    assert not any(c.startswith("--sharding") for c in (r.change for r in candidate_remedies(w.with_(sharding="fsdp"), True)))
    assert not any(c.startswith("--sharding") for c in (r.change for r in candidate_remedies(w.with_(num_gpus=1), True)))
    # offload is the closed form's (traced estimates keep everything on the GPU)
    assert not any(c.startswith("--offload") for c in (r.change for r in candidate_remedies(w, False)))
    assert [r.change for r in candidate_remedies(w.with_(offload="optimizer"), True)][-1] == "--offload params"


def test_under_zero_offload_no_change_is_offered_that_the_job_refuses(cli_json):
    # before: the 8-bit AdamW candidate was built under --offload optimizer (DeepSpeed's CPU optimizer has none),
    # and its refusal ended the whole command: "no adamw-8bit", exit 2, for a user who asked for AdamW
    argv = ["estimate", "hf:meta-llama/Llama-3.1-70B", "--finetune", "full", "--seq-len", "2048", "-b", "1",
            "--precision", "amp-bf16", "--sharding", "zero3", "--offload", "optimizer", "--num-gpus", "2",
            "--gpu", "rtx-4090", "--json"]
    out = cli_json(argv)
    assert out["fits"] is False
    assert out["changes_that_fit"] == [] or all("adamw-8bit" not in c["change"] for c in out["changes_that_fit"])
    w = Workload(model="hf:meta-llama/Llama-3.1-70B", finetune="full", sharding="zero3", offload="optimizer",
                 num_gpus=2, precision="amp-bf16")
    changes = [r.change for r in candidate_remedies(w, True)]
    assert "--optimizer adamw-8bit" not in changes and "--offload params" in changes
    assert "--optimizer adamw-8bit" in [r.change for r in candidate_remedies(w.with_(offload="none"), True)]
