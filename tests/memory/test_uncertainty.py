"""The safe answer: an estimate carries its upper side, and "fits" uses it."""

from dataclasses import replace
from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory import estimate_memory
from gpuwise.memory.model import MemoryEstimate
from gpuwise.memory.uncertainty import fit_wording
from gpuwise.plan.fit import usable_bytes
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import Estimate
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

HERE = Path(__file__).parent
GIB = 1 << 30


@pytest.fixture(scope="module")
def t4():
    return resolve_gpu(load_catalog(user_file=False), "t4")


def _memory(total_bytes: int, upper_extra: int) -> MemoryEstimate:
    return MemoryEstimate(peak_allocated_bytes=total_bytes, peak_reserved_bytes=total_bytes, cuda_context_bytes=0,
                          total_bytes=total_bytes, weights_bytes=0, gradients_bytes=0, optimizer_bytes=0,
                          activations_bytes=total_bytes, uncertainty=(("guess", upper_extra),))


def test_a_job_that_fits_only_inside_the_uncertainty_does_not_fit(t4):
    usable = usable_bytes(t4)
    memory = _memory(usable - GIB // 2, GIB)
    est = Estimate(Workload("hf:gpt2"), t4, 1, memory, None)
    assert memory.total_bytes <= usable < memory.total_upper_bytes
    assert est.fits is False
    assert fit_wording(memory, usable).startswith("tight: within the uncertainty")


def test_wording_says_how_much_is_spare_or_missing(t4):
    usable = usable_bytes(t4)
    roomy = _memory(usable - 3 * GIB, GIB)
    assert fit_wording(roomy, usable).startswith("fits with 2.0 GiB to spare")
    # the low end is the total the estimate's table shows (it read "needs up to" the high end alone)
    low, high = roomy.total_bytes / GIB, roomy.total_upper_bytes / GIB
    assert f"(needs {low:.1f}–{high:.1f} of " in fit_wording(roomy, usable)
    certain = _memory(usable - 3 * GIB, 0)          # nothing guessed: one figure, not "needs 7.0–7.0"
    assert f"(needs {certain.total_bytes / GIB:.1f} of " in fit_wording(certain, usable)
    assert Estimate(Workload("hf:gpt2"), t4, 1, roomy, None).fits is True
    assert fit_wording(_memory(usable + GIB, GIB), usable).startswith("does not fit")


def test_traced_estimate_names_what_is_guessed_and_its_upper_side_is_above_total():
    conv = estimate_memory(trace_workload(Workload(f"{HERE / 'tiny_models.py'}:convnet", batch_size=2, image_size=32)))
    attn = estimate_memory(trace_workload(Workload(f"{HERE / 'tiny_models.py'}:transformer", batch_size=2, seq_len=16)))
    for est in (conv, attn):
        names = dict(est.uncertainty)
        assert names["cuda_context"] > 0 and "allocator" in names
        assert est.total_upper_bytes == est.total_bytes + sum(names.values()) > est.total_bytes
        assert est.to_dict()["total_upper_bytes"] == est.total_upper_bytes
    # cuDNN's convolution workspace is a guess: only convolutions carry it
    assert "cudnn_workspace" in dict(conv.uncertainty) and "cudnn_workspace" not in dict(attn.uncertainty)


def test_closed_form_upper_side_covers_context_activations_and_fragmentation():
    est = estimate_llm(Workload("hf:meta-llama/Llama-2-7b-hf", batch_size=2, seq_len=1024, precision="bf16",
                                finetune="lora")).memory
    assert set(dict(est.uncertainty)) == {"cuda_context", "activations", "fragmentation"}
    assert est.total_upper_bytes > est.total_bytes
    # the spread grows with what is not weights
    bigger = estimate_llm(Workload("hf:meta-llama/Llama-2-7b-hf", batch_size=8, seq_len=1024, precision="bf16",
                                   finetune="lora")).memory
    assert bigger.uncertainty_bytes > est.uncertainty_bytes
    assert replace(est, uncertainty=()).total_upper_bytes == est.total_bytes
