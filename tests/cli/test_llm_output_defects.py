"""Issue 24, a new user's trial of the LLM output: a prefill-only job (``--max-new-tokens 0``) was given a decode
warning, decode figures and "bound by launch"; the by-class line of a multi-GPU LLM step said "communication"
twice (the closed form put it in ``by_class_s`` and the CLI appends ``communication_s``)."""

import json

import pytest


L7 = "hf:meta-llama/Llama-2-7b-hf"
PREFILL_ONLY = [L7, "--mode", "infer", "--batch-size", "4", "--seq-len", "2048", "--max-new-tokens", "0"]
DECODE_KEYS = ("decode_tokens_per_s", "decode_s", "time_per_output_token_s", "decode_tokens_per_s_per_user")


@pytest.fixture
def gpuwise(cli_run, monkeypatch):
    def run(*args):
        monkeypatch.setenv("COLUMNS", "200")   # one line per figure, so the text checks see whole lines
        code, out, err = cli_run(*args)
        assert code == 0, out + err
        return out

    return run


def _by_class_line(text: str) -> str:
    return next(line for line in text.splitlines() if "by operator class:" in line)


def test_estimate_of_a_prefill_only_job_says_so_and_gives_no_decode_figure(gpuwise):
    out = json.loads(gpuwise("estimate", *PREFILL_ONLY, "--gpu", "h100-sxm", "--json"))
    inf, time = out["inference"], out["time"]
    assert set(DECODE_KEYS) <= set(inf) and all(inf[k] is None for k in DECODE_KEYS)
    assert inf["new_tokens"] == 0 and inf["ttft_s"] == time["step_time_s"] > 0
    assert set(time["by_class_s"]) == {"prefill"} and time["bound"] == "compute"   # 8k tokens of prefill
    assert not any("decode" in w for w in time["warnings"])
    text = gpuwise("estimate", *PREFILL_ONLY, "--gpu", "h100-sxm")
    assert "prefill only" in text and "decode" not in text and "per output token" not in text
    assert "(prompt + answer)" not in text


def test_recommend_of_a_prefill_only_job_has_no_time_per_token(gpuwise):
    args = ["recommend", *PREFILL_ONLY, "--samples", "1000", "--gpus", "h100-sxm,l4", "--max-gpus", "1"]
    best = json.loads(gpuwise(*args, "--json"))["best"]
    assert best["tpot_s"] is None and best["ttft_s"] == best["step_time_s"] and best["bound"] == "compute"
    text = gpuwise(*args)
    assert "prefill only" in text and "a token" not in text and "tokens/s" not in text


@pytest.mark.parametrize("args", [
    ["--finetune", "full", "--num-gpus", "8", "--sharding", "zero3", "--batch-size", "4", "--seq-len", "2048"],
    ["--mode", "infer", "--num-gpus", "4", "--batch-size", "4", "--seq-len", "2048", "--max-new-tokens", "128"],
])
def test_communication_is_one_part_of_the_step_said_once(gpuwise, args):
    out = json.loads(gpuwise("estimate", L7, "--gpu", "h100-sxm", *args, "--json"))["time"]
    assert "communication" not in out["by_class_s"] and out["communication_s"] > 0
    parts = sum(out["by_class_s"].values()) + out["communication_s"] + out["sharding_overhead_s"]
    assert parts == pytest.approx(out["step_time_s"], rel=1e-9)
    line = _by_class_line(gpuwise("estimate", L7, "--gpu", "h100-sxm", *args))
    assert line.count("communication") == 1, line
