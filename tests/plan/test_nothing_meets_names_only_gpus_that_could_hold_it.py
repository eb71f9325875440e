"""When nothing fits, the "no bf16 (--precision amp-fp16 runs there)" hint names only the GPUs without bf16 that
could hold the job by memory: a 72B full fine-tune needing ~1.4 TiB on every GPU named the T4s and V100s too."""

from gpuwise.plan.fit import usable_of

QWEN_72B_FULL = ["recommend", "hf:Qwen/Qwen2.5-72B", "--finetune", "full", "--seq-len", "2048", "--batch-size", "1",
                 "--precision", "amp-bf16", "--steps", "100", "--no-remedies", "--json"]


def test_a_job_too_large_for_every_gpu_names_no_gpu_without_bf16(cli_json):
    rec = cli_json(QWEN_72B_FULL)
    refused = {o["gpu"]: o for o in rec["options"] if (o["excluded_because"] or "").startswith("no bf16")}
    assert {"t4", "v100-32gb-sxm2"} <= refused.keys()
    smallest_need_bytes = min(o["peak_total_bytes"] for o in rec["options"] if o["peak_total_bytes"] is not None)
    assert all(usable_of(o["gpu_memory_bytes"]) < smallest_need_bytes for o in refused.values())
    assert "amp-fp16 runs there" not in rec["nothing_meets"]
    for gpu in refused:
        assert gpu not in rec["nothing_meets"]
    # nor is "with bf16" said, as if the GPUs without it might hold the job; nor "at this batch size", as if a
    # smaller one might: the weights alone fill every GPU sized (tests/plan/test_serving_plan_trial_defects.py)
    assert rec["nothing_meets"].startswith("nothing meets the request: the model's weights alone do not fit on any "
                                           "one GPU on offer: no batch size fits")
