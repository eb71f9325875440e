"""A serving trial: Llama-3-70B under vLLM on one H100 does not fit, yet ``estimate`` said the batch "takes 22.0 s end
to end: … 372 output tokens/s" as if it ran, and "longest context that fits 0 tokens …, largest batch that fits 0".
A job that does not fit its GPU is not timed as text (it cannot run there; each change that fits gives its own step
time), and "nothing fits" is said once. The JSON keeps its fields (docs/llm.md says what they mean then)."""

import json

import pytest

L70 = "hf:meta-llama/Meta-Llama-3-70B"
SERVE = [L70, "--mode", "infer", "--engine", "vllm", "--seq-len", "1024", "--max-new-tokens", "256",
         "--gpu", "h100-sxm"]
TIME_WORDS = ("end to end", "tokens/s", "time to first token", "Step time", "by operator class")


@pytest.fixture
def gpuwise(cli_run, monkeypatch):
    def run(*args):
        monkeypatch.setenv("COLUMNS", "250")   # one line per figure, so the text checks see whole lines
        code, out, err = cli_run(*args)
        assert code == 0, out + err
        return out

    return run


def test_serving_job_that_does_not_fit_is_not_timed_and_says_nothing_fits_once(gpuwise):
    out = json.loads(gpuwise("estimate", *SERVE, "--json"))
    assert out["fits"] is False and out["inference"]["max_batch_size"] == 0
    text = gpuwise("estimate", *SERVE)
    assert not any(word in text for word in TIME_WORDS), text
    assert "cannot run there" in text and "fits 0" not in text
    tokens = 1024 + 256
    assert text.count(f"not one sequence of {tokens:,} tokens fits") == 1


def test_json_of_a_job_that_does_not_fit_keeps_its_fields(gpuwise):
    out = json.loads(gpuwise("estimate", *SERVE, "--json"))
    # what the step would take were the memory there (docs/llm.md): present, and not the answer's fit
    assert out["fits"] is False and out["time"]["step_time_s"] > 0 and out["inference"]["ttft_s"] > 0
    assert out["inference"]["max_context_tokens"] == 0 and out["max_batch_size"] == 0


def test_training_job_that_does_not_fit_is_not_timed(gpuwise):
    args = [L70, "--seq-len", "1024", "--gpu", "h100-sxm"]
    out = json.loads(gpuwise("estimate", *args, "--json"))
    assert out["fits"] is False and out["time"] is not None and out["changes_that_fit"]
    text = gpuwise("estimate", *args)
    assert "Step time" not in text and "cannot run there" in text
    assert "each change above that makes it fit gives its own step time" in text


def test_a_batch_larger_than_fits_says_the_capacity_it_has(gpuwise):
    # on 2 GPUs vLLM holds some sequences, not the batch of 32: those figures mean something and are said
    args = [*SERVE, "--num-gpus", "2"]
    inf = json.loads(gpuwise("estimate", *args, "--json"))["inference"]
    assert 0 < inf["max_batch_size"] < inf["batch_size"] and inf["max_context_tokens"] > 0
    text = gpuwise("estimate", *args)
    assert f"largest batch that fits {inf['max_batch_size']:,}" in text
    assert f"longest context that fits {inf['max_context_tokens']:,} tokens" in text
    assert "end to end" not in text


def test_a_tight_fit_is_still_timed(gpuwise):
    # within the uncertainty: fits is false, but the estimate's own total fits, so it may well run
    args = ["hf:meta-llama/Llama-2-7b-hf", "--gpu", "h100-sxm", "--num-gpus", "8", "--sharding", "zero3",
            "--batch-size", "4", "--seq-len", "2048"]
    out = json.loads(gpuwise("estimate", *args, "--json"))
    assert out["fits"] is False and out["fit_summary"].startswith("tight")
    text = gpuwise("estimate", *args)
    assert "Step time" in text and "cannot run there" not in text


def test_no_context_fitting_the_batch_is_said_as_such():
    from gpuwise.cli.estimate import capacity_words     # here: the tests above also run against older versions

    inf = {"max_context_tokens": 0, "max_batch_size": 3, "batch_size": 32, "prompt_tokens": 1024, "new_tokens": 256}
    words = capacity_words(inf, prefill_only=False)
    assert words[0] == "no context fits a batch of 32" and words[1] == "largest batch that fits 3"
