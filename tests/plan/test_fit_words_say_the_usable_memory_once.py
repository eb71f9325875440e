"""The memory a need is judged against is said in one phrase everywhere (``memory.uncertainty.usable_words``:
'22.8 GiB usable with 5% of its 24.0 GiB kept free'). Was: ``estimate --json``'s ``fit_summary`` said "of 22.8 GiB
usable" where the text said the whole phrase, and recommend's OOM exclusions said "…, 14.2 GiB usable with 5% kept
free", built apart by string concatenation."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.uncertainty import usable_words
from gpuwise.plan.fit import usable_bytes
from gpuwise.plan.profile import estimate_fit, model_for
from gpuwise.workload import Workload

FULL_7B = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", seq_len=2048, batch_size=1, precision="amp-bf16")


@pytest.fixture(scope="module")
def rtx_4090():
    return load_catalog(None).gpu("rtx-4090")


@pytest.mark.parametrize("headroom_fraction", [0.05, 0.125])
def test_the_fit_summary_and_the_oom_exclusion_say_the_usable_memory_as_usable_words(rtx_4090, headroom_fraction):
    est = model_for(FULL_7B).estimate(rtx_4090)
    fit = estimate_fit(est, headroom_fraction)
    phrase = usable_words(usable_bytes(rtx_4090, headroom_fraction), rtx_4090.visible_memory_bytes,
                          headroom_fraction)
    assert not fit.fits
    assert fit.summary.endswith(f"of {phrase}"), fit.summary
    assert fit.exclusion.text.endswith(f", {phrase}"), fit.exclusion.text
    assert fit.exclusion.text.count("kept free") == 1


def test_estimate_json_fit_summary_is_the_text_fit_line(cli_json, cli_run, rtx_4090):
    job = ["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "2048", "-b", "1",
           "--precision", "amp-bf16", "--gpu", "rtx-4090", "--headroom", "10%"]
    summary = cli_json([*job, "--json"])["fit_summary"]
    code, out, err = cli_run(*job)
    assert code == 0, err
    assert summary.endswith(f"of {usable_words(usable_bytes(rtx_4090, 0.1), rtx_4090.visible_memory_bytes, 0.1)}"), \
        summary
    assert summary in " ".join(out.split()), out
