"""Every change `estimate` offers keeps the job's effective batch (samples per optimizer step) where it can, and says
so plainly where it cannot.

A trial: a 7B full fine-tune at --batch-size 8 that fits no A100 80GB was offered "--num-gpus 4 --sharding zero3",
which runs 8 samples on each of the 4 GPUs (an effective batch of 32, not 8), and that step was ranked by its time
against changes that step on 8 samples.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.profile import model_for
from gpuwise.plan.remedies import changes_that_fit, shard_over_gpus_remedy
from gpuwise.workload import Workload

FIELD_OF_FLAG = {"--num-gpus": ("num_gpus", int), "--batch-size": ("batch_size", int),
                 "--grad-accum": ("grad_accum_steps", int), "--sharding": ("sharding", str)}


def _qwen_full(batch_size: int, grad_accum_steps: int) -> Workload:
    return Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", seq_len=2048, batch_size=batch_size,
                    grad_accum_steps=grad_accum_steps, grad_checkpointing=True, precision="amp-bf16")


def _as_typed(w: Workload, change: str) -> Workload:
    """The job with the change's flags applied, as the CLI reads them."""
    words = change.split()
    fields = {FIELD_OF_FLAG[flag][0]: FIELD_OF_FLAG[flag][1](value) for flag, value in zip(words[::2], words[1::2])}
    return w.with_(**fields)


def _sharded(changes) -> dict:
    (found,) = [c for c in changes if c["change"].startswith("--num-gpus")]
    return found


@pytest.fixture(scope="module")
def a100():
    return load_catalog(None).gpu("a100-80gb-sxm4")


@pytest.mark.parametrize("batch_size, grad_accum_steps", [(8, 1), (2, 4)])
def test_zero3_over_n_gpus_splits_the_effective_batch_over_them(a100, batch_size, grad_accum_steps):
    job = _qwen_full(batch_size, grad_accum_steps)
    changes = changes_that_fit(job, a100, headroom_fraction=0.05, closed_form=True)
    shard = _sharded(changes)
    sharded = _as_typed(job, shard["change"])
    assert sharded.num_gpus > 1 and sharded.sharding == "zero3"
    assert sharded.effective_batch_size == job.effective_batch_size, shard["change"]
    assert shard["batch_note"] is None
    # the figures quoted are the named job's: its memory and step on the N GPUs
    est = model_for(sharded).estimate(a100, count=sharded.num_gpus)
    assert shard["peak_total_bytes"] == est.memory.total_upper_bytes
    assert shard["step_time_s"] == est.time.step_time_s


def test_a_batch_the_gpus_cannot_split_is_said_and_ranked_after_the_changes_that_keep_it(a100):
    job = _qwen_full(2, 1)            # fits 4 sharded A100s, not 2: 2 samples a step cannot split over 4
    changes = changes_that_fit(job, a100, headroom_fraction=0.05, closed_form=True)
    shard = _sharded(changes)
    sharded = _as_typed(job, shard["change"])
    assert sharded.effective_batch_size > job.effective_batch_size
    note = shard["batch_note"]
    assert (f"effective batch {sharded.effective_batch_size} samples per optimizer step instead of "
            f"{job.effective_batch_size}") in note
    assert f"× {sharded.num_gpus} GPUs" in note
    # the same training first (effective batch kept), then this one, then the changes of method
    order = [("--finetune" in c["change"], c["batch_note"] is not None) for c in changes]
    assert order == sorted(order) and (False, False) in order and (True, False) in order


def test_the_shard_remedy_names_only_the_batch_flags_it_changes():
    w = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", batch_size=32)
    four = shard_over_gpus_remedy(w, 4)
    assert four.change == "--num-gpus 4 --batch-size 8 --sharding zero3"
    assert four.apply(w).effective_batch_size == w.effective_batch_size
    one = w.with_(batch_size=1)
    assert shard_over_gpus_remedy(one, 2).change == "--num-gpus 2 --sharding zero3"
