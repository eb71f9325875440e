"""A remedy ("To fit a cheaper GPU: …") is priced as a row of the table would be.

A new user's trial: `recommend hf:Qwen/Qwen2.5-7B -b 1 --grad-accum 8 --effective-batch 64 --sharding zero3 --steps 1000
--deadline 24h` was best on 4x H800 at ¥66.46, and hinted "--optimizer adamw-8bit → H200 … 24.7 min, ¥11.82": timed at
the workload's own 8 samples a step, not the 64 every option keeps (at 64 that H200 costs ~¥94, dearer than the best).
"""

from __future__ import annotations

from gpuwise.plan import JobSize, recommend
from gpuwise.plan.remedies import find_remedies
from gpuwise.workload import Workload
from tests.plan.test_recommend import (GB, ScriptedModel, catalog, offer, priced_as_rows,  # noqa: F401 (a fixture)
                                       small_catalog)

# 16 GB before the first sample: the job fits no T4 at any micro-batch; --grad-checkpointing halves that
SIZES = dict(fixed_bytes=16 * GB, per_sample_bytes=0.2 * GB)
JOB = JobSize(steps=1000)
JOB_WORKLOAD = Workload("scripted", batch_size=16, precision="amp-fp16", optimizer="sgd")
EFFECTIVE = 64       # --effective-batch: four times the workload's own micro-batch × accumulation


def _factory(w):
    return ScriptedModel(w, **SIZES)


def _t4_row(cat, workload, effective):
    """The T4's row in a recommendation of ``workload`` as it is at ``effective`` samples a step."""
    rec = recommend(_factory(workload), cat, job=JOB, max_gpus=1, effective_batch=effective, gpu_ids=["t4"])
    (row,) = rec.options
    return row


def test_a_remedy_keeps_the_recommendation_s_effective_batch_and_costs_what_its_table_row_would(catalog):
    cat = small_catalog(catalog, {"t4", "a100-40gb-sxm4"}, [offer("t4", 1.0), offer("a100-40gb-sxm4", 15.0)])
    rec = recommend(_factory(JOB_WORKLOAD), cat, job=JOB, max_gpus=1, effective_batch=EFFECTIVE)
    assert rec.best.gpu == "a100-40gb-sxm4" and rec.best.effective_batch_size == EFFECTIVE
    (remedy,) = find_remedies(rec, cat, JOB, model_factory=_factory, price_option=priced_as_rows(JOB, rec.ranking_currency))
    assert remedy["change"] == "--grad-checkpointing" and remedy["gpu"] == "t4"
    row = _t4_row(cat, JOB_WORKLOAD.with_(grad_checkpointing=True), EFFECTIVE)
    assert row.fits and row.batch_size * row.grad_accum_steps == EFFECTIVE
    assert remedy["effective_batch_size"] == EFFECTIVE
    assert (remedy["batch_size"], remedy["grad_accum_steps"]) == (row.batch_size, row.grad_accum_steps)
    assert (remedy["step_time_s"], remedy["total_time_s"], remedy["total_cost_ranked"]) == (
        row.step_time_s, row.total_time_s, row.total_cost_ranked)


def test_a_remedy_dearer_than_the_best_at_the_effective_batch_is_not_offered_as_cheaper(catalog):
    # the A100 is dearer per hour than a T4, but the job on a T4 at 64 samples a step costs more than on the A100
    cat = small_catalog(catalog, {"t4", "a100-40gb-sxm4"}, [offer("t4", 1.0), offer("a100-40gb-sxm4", 3.0)])
    rec = recommend(_factory(JOB_WORKLOAD), cat, job=JOB, max_gpus=1, effective_batch=EFFECTIVE)
    assert rec.best.gpu == "a100-40gb-sxm4"
    remedied = JOB_WORKLOAD.with_(grad_checkpointing=True)
    # the case the defect hid: at the workload's own batch the T4 would look cheaper than the best, at 64 it is not
    assert _t4_row(cat, remedied, None).total_cost_ranked < rec.best.total_cost_ranked
    assert _t4_row(cat, remedied, EFFECTIVE).total_cost_ranked > rec.best.total_cost_ranked
    assert find_remedies(rec, cat, JOB, model_factory=_factory, price_option=priced_as_rows(JOB, rec.ranking_currency)) == ()
