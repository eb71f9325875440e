"""Where the counts the effective batch splits over run out of memory and the larger counts that would hold the job
do not split it, the smallest effective batch a fitting count splits is offered, priced as that recommendation's row.

Before, from a new user's trial: ``recommend hf:meta-llama/Llama-3.1-70B --finetune full --seq-len 4096 -b 1
--grad-accum 4 --precision amp-bf16 --grad-checkpointing --sharding zero3 --steps 1000 --provider aws --max-gpus 32``
said "nothing meets the request … --effective-batch N" and offered nothing: 2 and 4 GPUs (which split 4) ran out of
memory, 8, 16 and 32 did not split 4, and the remedy was sought only where every multi-GPU option was left out for
the split. --effective-batch 8 and 16 fit nowhere either; a user had to guess 32."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, model_for, recommend
from gpuwise.plan.reasons import OOM, SPLIT
from gpuwise.workload import Workload

JOB = JobSize(steps=1000)
LLAMA_70B_FULL = Workload("hf:meta-llama/Llama-3.1-70B", finetune="full", precision="amp-bf16", seq_len=4096,
                          batch_size=1, grad_accum_steps=4, grad_checkpointing=True, sharding="zero3")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _recommend(catalog, **kwargs):
    return recommend(model_for(LLAMA_70B_FULL), catalog, job=JOB, provider="aws", gpu_ids=["a10g", "h100-sxm"], max_gpus=32,
                     remedies=True, **kwargs)


def test_the_batch_a_larger_fitting_count_splits_is_offered_where_the_counts_that_split_it_run_out_of_memory(catalog):
    rec = _recommend(catalog)
    kinds = {(o.gpu, o.count): o.exclusion.kind for o in rec.options if o.count > 1}
    assert rec.best is None and kinds[("a10g", 4)] == OOM and kinds[("h100-sxm", 32)] == SPLIT
    (remedy,) = [r for r in rec.remedies if r["change"].startswith("--effective-batch ")]
    batch = int(remedy["change"].split()[1])
    assert remedy["fits"] and remedy["count"] > 4 and batch % remedy["count"] == 0
    again = _recommend(catalog, effective_batch=batch)
    assert (again.best.count, again.best.total_cost_ranked) == (remedy["count"], remedy["total_cost_ranked"])
