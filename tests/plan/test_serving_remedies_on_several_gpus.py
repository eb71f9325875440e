"""A served model that fits no GPU count on offer is told what would make it fit on several GPUs, and vLLM's own way
to halve its weights, FP8 quantization as it loads (``vllm serve --quantization fp8``), is one of the changes.

Before, from a new user's trial: ``recommend hf:meta-llama/Llama-3.1-405B --mode infer --engine vllm --seq-len 1024
--max-new-tokens 256 -b 8 --steps 100 --max-gpus 16 --provider aws`` said "nothing meets the request" and nothing
more: remedies were tried on single GPUs only (where 405B fits no way), never on the 8-GPU options that --quant fp8
(Meta's own way to serve it on 8 × 80 GB) or int8 make fit; and --quant fp8 was never suggested."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, model_for, recommend
from gpuwise.plan.changes import candidate_remedies
from gpuwise.workload import Workload
from test_recommend import offer, small_catalog   # tests/plan is on sys.path (rootdir-relative imports)

LLAMA_405B = "hf:meta-llama/Llama-3.1-405B"
EIGHT_A100_PER_HOUR = 20.0


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _serving(engine: str) -> Workload:
    return Workload(LLAMA_405B, mode="infer", engine=engine, precision="bf16", seq_len=1024, max_new_tokens=256,
                    batch_size=8)


def test_a_model_no_count_holds_is_offered_the_quantization_that_fits_it_on_eight_gpus(catalog):
    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [offer("a100-80gb-sxm4", EIGHT_A100_PER_HOUR, count=8)])
    rec = recommend(model_for(_serving("vllm")), cat, job=JobSize(steps=100), max_gpus=8, remedies=True)
    (row,) = rec.options
    assert rec.best is None and row.fits is False and row.count == 8
    fp8 = [r for r in rec.remedies if r["change"] == "--quant fp8"]
    assert fp8 and fp8[0]["count"] == 8 and fp8[0]["fits"]


def test_fp8_is_a_serving_change_for_vllm_only(catalog):
    assert "--quant fp8" in [r.change for r in candidate_remedies(_serving("vllm"), True)]
    assert "--quant fp8" not in [r.change for r in candidate_remedies(_serving("hf"), True)]
    assert "--quant fp8" not in [r.change for r in candidate_remedies(_serving("vllm").with_(quant="nf4"), True)]
