"""The one "cannot run here" rule (bf16 needs a GPU with bf16), applied and said the same way by
`recommend` with an explicit or automatic batch, by `estimate` on one GPU or on all, and in the
"nothing meets the request" message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

NO_BF16 = ("v100-32gb-sxm2", "rtx-2080-ti")
QWEN_7B_LORA = ["recommend", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--samples", "20000",
                "--provider", "autodl", "--effective-batch", "16", "--grad-checkpointing", "--gpus", ",".join(NO_BF16),
                "--max-gpus", "1"]
ESTIMATE_7B_BF16 = ["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--batch-size", "1",
                    "--grad-checkpointing", "--precision", "amp-bf16"]


def gpuwise(*args: str, columns: int = 200) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["COLUMNS"] = str(columns)
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("batch", ["auto", "4"])
def test_recommend_quotes_a_default_bf16_lora_at_fp16_without_bf16_with_any_batch_and_says_so(cli_json, batch):
    # the defect: with --batch-size auto the V100 came out BEST under a header saying amp-bf16, and nothing
    # in the text said the V100 and the 2080 Ti were quoted at amp-fp16 (the default where bf16 is missing)
    rec = cli_json([*QWEN_7B_LORA, "--batch-size", batch, "--json"])
    assert rec["workload"]["precision"] == "amp-bf16"
    assert rec["fallback_precision"] == {gpu: "amp-fp16" for gpu in NO_BF16}
    for option in rec["options"]:
        assert not (option["excluded_because"] or "").startswith("no bf16")
        assert any(w.startswith("runs at amp-fp16 here") for w in option["warnings"])
    text = gpuwise(*QWEN_7B_LORA, "--batch-size", batch)
    assert "no bf16 on rtx-2080-ti, v100-32gb-sxm2: quoted at amp-fp16 there" in text
    best = next(line for line in text.splitlines() if line.startswith("Best:"))
    assert "V100" in best and "at amp-fp16 (no bf16)" in best
    v100_row = next(line for line in text.splitlines() if "v100-32gb-sxm2 " in line and "autodl" in line)
    assert "at amp-fp16: " in v100_row


@pytest.mark.parametrize("batch", ["auto", "4"])
def test_recommend_refuses_an_asked_for_bf16_on_gpus_without_it_with_any_batch(cli_json, batch):
    rec = cli_json([*QWEN_7B_LORA, "--batch-size", batch, "--precision", "amp-bf16", "--json"])
    assert rec["best"] is None
    assert {o["gpu"] for o in rec["options"]} == set(NO_BF16)
    assert all(o["excluded_because"].startswith("no bf16 on this GPU") for o in rec["options"])
    # the defect: "the job does not fit on any GPU on offer at this batch size" (memory was never the reason)
    assert "does not fit" not in rec["nothing_meets"]
    assert rec["nothing_meets"] == ("nothing meets the request: no GPU on offer has bf16 (turing, volta), which "
                                    "amp-bf16 needs: use --precision amp-fp16, or GPUs of Ampere or newer")
    assert rec["fallback_precision"] == {}      # asked for bf16: not silently changed
    text = " ".join(gpuwise(*QWEN_7B_LORA, "--batch-size", batch, "--precision", "amp-bf16").split())
    assert "no GPU on offer has bf16" in text and "use --precision amp-fp16" in text


def test_nothing_meets_names_the_gpus_without_bf16_next_to_those_out_of_memory(cli_json):
    # a 7B LoRA needing ~27 GB: over the 4090's usable memory, within the 32 GB V100's, far over the 16 GB T4's
    # (which "amp-fp16 runs there" was also said of, before only the GPUs that could hold it were named)
    rec = cli_json(["recommend", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "4096", "--batch-size", "1",
                    "--grad-checkpointing", "--precision", "amp-bf16", "--steps", "100",
                    "--gpus", "rtx-4090,v100-32gb-sxm2,t4", "--max-gpus", "1", "--no-remedies", "--json"])
    by_gpu = {o["gpu"]: o for o in rec["options"]}
    assert by_gpu["rtx-4090"]["fits"] is False
    assert by_gpu["t4"]["excluded_because"].startswith("no bf16")
    assert by_gpu["v100-32gb-sxm2"]["excluded_because"].startswith("no bf16")
    need_bytes = by_gpu["rtx-4090"]["peak_total_bytes"]
    assert by_gpu["t4"]["gpu_memory_bytes"] < need_bytes < by_gpu["v100-32gb-sxm2"]["gpu_memory_bytes"] * 0.95
    assert rec["nothing_meets"].startswith("nothing meets the request: the job does not fit on any GPU on offer "
                                           "with bf16 at this batch size")
    assert rec["nothing_meets"].endswith("; v100-32gb-sxm2 has no bf16 (--precision amp-fp16 runs there)")


def refusal(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.parametrize("args, gpu, runs", [
    (ESTIMATE_7B_BF16, "v100-32gb-sxm2", "amp-fp16"),
    (["estimate", "torchvision:resnet50", "--precision", "bf16"], "v100-32gb-sxm2", "fp16"),
    ([*ESTIMATE_7B_BF16, "--max-batch"], "t4", "amp-fp16"),
])
def test_estimate_refuses_a_precision_the_one_gpu_named_cannot_run_naming_those_it_runs(args, gpu, runs):
    # the defect: "On v100-32gb-sxm2: cannot run: no bf16 on this GPU (volta)" under a full answer, exit 0
    result = refusal(*args, "--gpu", gpu)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    precision = args[args.index("--precision") + 1]
    assert line.startswith(f"gpuwise: error: --precision {precision}: {gpu} cannot run it: no bf16 on this GPU")
    assert f"use --precision {runs}" in line and line.endswith("(it runs fp32, amp-fp16, fp16)")  # no tf32 rate before Ampere


def test_estimate_on_every_gpu_says_no_bf16_where_the_job_cannot_run_at_80_columns(cli_json):
    # the defect: V100, T4 and P100 listed as "fits yes" with dashes and no reason
    rows = cli_json([*ESTIMATE_7B_BF16, "--gpu", "all", "--json"])["per_gpu"]
    refused = {r["gpu"] for r in rows if r["cannot_run"]}
    assert {"v100-32gb-sxm2", "t4", "p100-16gb-pcie", "rtx-2080-ti"} <= refused
    assert all(r["step_time_s"] is None for r in rows if r["cannot_run"])
    out = gpuwise(*ESTIMATE_7B_BF16, "--gpu", "all", columns=80)
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    below = out[out.index("Every GPU in the catalog"):].splitlines()
    below = below[next(i for i, line in enumerate(below) if line.strip().startswith("─")) + 1:]   # after the rule
    table = below[:next(i for i, line in enumerate(below) if not line.strip())]
    cells = {line.split()[0]: line.split() for line in table}
    assert {r["gpu"] for r in rows} <= set(cells)       # every id whole
    for gpu in refused:
        assert cells[gpu][5:7] == ["no", "bf16"], cells[gpu]
    for gpu in set(cells) & ({r["gpu"] for r in rows} - refused):
        assert cells[gpu][5] in ("yes", "no") and cells[gpu][6] != "bf16"
    order = [line.split()[0] for line in table]
    assert len(order) == len(rows) and set(order[-len(refused):]) == refused        # below every GPU the job can run on
