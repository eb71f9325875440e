"""vLLM is refused on GPUs it does not run on (trial of LLM serving, defect 6): ``--engine vllm --gpu p100-16gb-pcie``
(compute capability 6.0) gave an estimate and rc 0. The rule sits beside ``fp8_refusal``: ``quant_refusal``, which
``plan.profile.cannot_run`` applies for every command."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.profile import cannot_run
from gpuwise.runtime.quant_linears import vllm_refusal
from gpuwise.workload import Workload


@pytest.fixture(scope="module")
def gpus():
    return {g.id: g for g in load_catalog(user_file=False).gpus}


def test_vllm_is_refused_below_compute_capability_7_and_hf_generate_is_not(gpus):
    p100 = gpus["p100-16gb-pcie"]
    assert "7.0" in vllm_refusal(p100, "vllm") and vllm_refusal(p100, "hf") is None
    assert vllm_refusal(gpus["v100-32gb-sxm2"], "vllm") is None and vllm_refusal(gpus["t4"], "vllm") is None
    served = Workload("hf:Qwen/Qwen2.5-0.5B", mode="infer", seq_len=1024, max_new_tokens=256, engine="vllm")
    assert "7.0" in cannot_run(served, p100)
    assert cannot_run(served.with_(engine="hf"), p100) is None


def test_estimate_refuses_vllm_on_a_pascal_gpu_in_one_line(cli_run):
    code, out, err = cli_run("estimate", "hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "1024",
                             "--max-new-tokens", "256", "--engine", "vllm", "--gpu", "p100-16gb-pcie")
    assert code == 2 and "7.0" in err and len(err.strip().splitlines()) == 1, err
