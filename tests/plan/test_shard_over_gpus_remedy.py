"""A training job that fits no single GPU is offered sharding over several (ZeRO-3), before changes of method.

A new user's trial: a 7B full fine-tune that fits on no single GPU was only told "--finetune lora / qlora" (another
model), never to shard it, though `--sharding zero3` fits it on 4x H800 for about ¥14.51; `estimate --gpu
a100-80gb-sxm4` listed lora, qlora, adamw-8bit and offload but no multi-GPU sharding.
"""

from __future__ import annotations

from gpuwise.workload import Workload

QWEN_FULL = ["hf:Qwen/Qwen2.5-7B", "--finetune", "full", "--seq-len", "2048", "--batch-size", "2",
             "--grad-checkpointing"]
ESTIMATE = ["estimate", *QWEN_FULL, "--gpu", "a100-80gb-sxm4", "--json"]


def test_estimate_offers_zero3_over_the_fewest_gpus_that_fit_before_lora(cli_json):
    out = cli_json(ESTIMATE)
    assert out["fits"] is False
    changes = [c["change"] for c in out["changes_that_fit"]]
    sharded = [c for c in changes if c.endswith("--sharding zero3")]
    assert len(sharded) == 1, changes
    count = int(sharded[0].split()[1])
    assert changes.index(sharded[0]) < changes.index("--finetune lora") < changes.index("--finetune qlora")
    # the change as typed fits; the next smaller count of the ones tried does not
    change = out["changes_that_fit"][changes.index(sharded[0])]
    applied = cli_json([*ESTIMATE, *sharded[0].split()])
    assert applied["fits"] is True and applied["memory"]["total_upper_bytes"] == change["peak_total_bytes"]
    if count > 2:
        fewer = cli_json([*ESTIMATE, "--num-gpus", str(count // 2), "--sharding", "zero3"])
        assert fewer["fits"] is False


def test_recommend_offers_the_job_sharded_over_several_gpus_first_and_priced_as_a_row(cli_json):
    argv = ["recommend", *QWEN_FULL, "--effective-batch", "16", "--samples", "20000", "--provider", "autodl",
            "--json"]
    out = cli_json(argv)
    assert out["best"] is None
    remedies = out["remedies"]
    first = remedies[0]
    assert first["change"] == "--sharding zero3" and first["count"] > 1 and first["fits"] is True, remedies
    assert [r["change"] for r in remedies][1:] and all("--finetune" in r["change"] for r in remedies[1:])
    # priced as the table's row of the job under --sharding zero3 is
    sharded = cli_json([*argv, "--sharding", "zero3"])
    (row,) = [o for o in sharded["options"] if (o["gpu"], o["count"], o["provider"]) ==
              (first["gpu"], first["count"], first["provider"])]
    assert row["fits"] and row["total_cost_ranked"] == first["total_cost_ranked"]


def test_the_shard_remedy_is_for_one_gpu_s_training_not_yet_fully_sharded():
    from gpuwise.plan.remedies import changes_method, shard_over_gpus_remedy

    w = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full")
    assert shard_over_gpus_remedy(w).change == "--sharding zero3"
    assert shard_over_gpus_remedy(w, 4).workload_fields == {"num_gpus": 4, "batch_size": 8, "sharding": "zero3"}
    assert shard_over_gpus_remedy(w.with_(sharding="fsdp")) is None
    assert shard_over_gpus_remedy(w.with_(mode="infer")) is None
    assert shard_over_gpus_remedy(w.with_(num_gpus=2)) is None    # sharding_remedies offers the next stages there
    assert not changes_method(shard_over_gpus_remedy(w, 4))
