"""A serving option takes no optimizer step, so its `effective_batch_size` in `recommend --json` is null, as in
`estimate --json`: at a request rate an option gave `"batch_size": 1` beside `"effective_batch_size": 32`."""

from __future__ import annotations

import pytest

SERVE = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "64",
         "--provider", "autodl", "--max-gpus", "2", "--no-remedies", "--json"]


@pytest.mark.parametrize("load", [["--request-rate", "4", "--engine", "vllm"],
                                  ["--batch-size", "8", "--samples", "1000"]])
def test_every_serving_option_has_no_effective_batch(cli_json, load):
    rec = cli_json([*SERVE, *load])
    assert rec["options"]
    served = [o for o in rec["options"] if o["excluded_because"] is None]
    assert served and all(o["batch_size"] is not None for o in served)
    assert all(o["effective_batch_size"] is None for o in rec["options"])


def test_a_training_option_keeps_its_effective_batch(cli_json):
    rec = cli_json(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--steps", "10",
                    "--batch-size", "4", "--grad-accum", "2", "--provider", "autodl", "--max-gpus", "2",
                    "--no-remedies", "--json"])
    fitting = [o for o in rec["options"] if o["fits"]]
    assert fitting
    for o in fitting:
        assert o["effective_batch_size"] == 4 * 2 == o["batch_size"] * o["grad_accum_steps"] * o["count"]
