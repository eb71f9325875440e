"""A serving trial: Llama-3-70B under vLLM on one H100 does not fit, and the only remedy ``estimate`` offered was
``--quant nf4``; the usual answer is tensor parallelism. The served job over the fewest GPUs of the kind it fits
(2, 4 or 8, a count whose heads split) is offered, each count estimated as the job on those GPUs is."""

from __future__ import annotations

import pytest

L70 = "hf:meta-llama/Meta-Llama-3-70B"
SERVE = [L70, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256", "--gpu", "h100-sxm"]


def _estimate(cli_json, *args) -> dict:
    return cli_json(["estimate", *args, "--json"])


@pytest.mark.parametrize("engine", ["vllm", "hf"])
def test_served_llm_that_does_not_fit_is_offered_the_fewest_gpus_it_fits(cli_json, engine):
    job = [*SERVE, "--engine", engine]
    out = _estimate(cli_json, *job)
    assert out["fits"] is False
    fitting = [k for k in (2, 4, 8) if _estimate(cli_json, *job, "--num-gpus", str(k))["fits"]]
    assert fitting, "the job fits no count tried: the test needs one that does"
    fewest = _estimate(cli_json, *job, "--num-gpus", str(fitting[0]))
    offered = {ch["change"]: ch for ch in out["changes_that_fit"]}
    more = [c for c in offered if c.startswith("--num-gpus")]
    assert more == [f"--num-gpus {fitting[0]}"]
    assert offered[more[0]]["peak_total_bytes"] == fewest["memory"]["total_upper_bytes"]
    assert offered[more[0]]["step_time_s"] == pytest.approx(fewest["time"]["step_time_s"])
    # the same job (no change of method): before the quantized weights
    assert out["changes_that_fit"][0]["change"] == more[0]


def test_served_llm_that_fits_no_count_tried_is_offered_none_and_told_more_than_were_tried(cli_json, cli_run):
    job = ["hf:meta-llama/Llama-3.1-405B", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256",
           "--gpu", "l4", "--engine", "vllm"]
    out = _estimate(cli_json, *job)
    assert out["fits"] is False
    assert not _estimate(cli_json, *job, "--num-gpus", "8")["fits"] and not out["changes_that_fit"]
    code, text, _err = cli_run("estimate", *job)
    assert code == 0 and "more than the 8 tried" in " ".join(text.split())


def test_training_is_still_offered_zero3_not_a_bare_count(cli_json):
    out = _estimate(cli_json, "hf:meta-llama/Llama-2-7b-hf", "--seq-len", "1024", "--batch-size", "1",
                    "--finetune", "full", "--gpu", "rtx-4090")
    assert out["fits"] is False
    counts = [ch["change"] for ch in out["changes_that_fit"] if ch["change"].startswith("--num-gpus")]
    assert all("--sharding zero3" in c for c in counts)
