"""The changes offered to make a job fit a GPU are ones that GPU runs: no bf16 on a GPU without it."""

from __future__ import annotations

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import cannot_run
from gpuwise.workload import Workload

QWEN_FP32_T4 = ["estimate", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "full", "--seq-len", "1024", "-b", "16",
                "--precision", "fp32", "--gpu", "t4", "--json"]


def test_a_gpu_without_bf16_is_offered_only_changes_it_runs(cli_json):
    # a new user's trial: "fits with --precision amp-bf16 …" on a T4, which then refuses --precision amp-bf16
    out = cli_json(QWEN_FP32_T4)
    assert out["fits"] is False and out["changes_that_fit"]
    t4 = resolve_gpu(load_catalog(user_file=False), "t4")
    base = Workload(model="hf:Qwen/Qwen2.5-0.5B", seq_len=1024, batch_size=16, precision="fp32")
    for change in out["changes_that_fit"]:
        flags = change["change"].split()
        if "--precision" in flags:
            precision = flags[flags.index("--precision") + 1]
            assert cannot_run(base.with_(precision=precision, precision_default=False), t4) is None, change
        # the change, typed as printed, runs there and fits
        applied = cli_json([*QWEN_FP32_T4, *flags])
        assert applied["fits"] is True and applied["cannot_run"] is None
