"""Where every multi-GPU option was left out because the effective batch does not split, a priced remedy says so.

A new user's trial: `recommend hf:Qwen/Qwen2.5-14B --precision bf16 --seq-len 2048 --batch-size 1 --grad-checkpointing
--sharding zero3 --steps 1000 --provider autodl` said "nothing meets the request … (the multi-GPU options need an
effective batch they can split: --effective-batch N …)" and then offered only changes of the training (adamw-8bit,
LoRA, QLoRA): the same full fine-tune over several GPUs, which `--effective-batch N` prices, had no figures.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, model_for, recommend
from gpuwise.plan.remedies import changes_method, shard_over_gpus_remedy
from gpuwise.workload import Workload

JOB = JobSize(steps=1000)
QWEN_14B = Workload("hf:Qwen/Qwen2.5-14B", precision="bf16", seq_len=2048, batch_size=1, grad_checkpointing=True,
                    sharding="zero3")
FIELDS = ("gpu", "count", "provider", "spot", "batch_size", "grad_accum_steps", "effective_batch_size",
          "peak_total_bytes", "step_time_s", "steps", "total_time_s", "total_cost_ranked")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _recommend(catalog, workload: Workload, **kwargs):
    return recommend(model_for(workload), catalog, job=JOB, provider="autodl", remedies=True, **kwargs)


def _split_remedy(rec) -> dict:
    (remedy,) = [r for r in rec.remedies if r["change"].startswith("--effective-batch ")]
    return remedy


def _row(rec, remedy: dict) -> dict:
    """The option of ``rec`` on the remedy's GPUs and offer, as --json lists it."""
    (row,) = [o.to_dict() for o in rec.options if (o.gpu, o.count, o.provider, o.spot) ==
              (remedy["gpu"], remedy["count"], remedy["provider"], remedy["spot"])]
    return row


def test_a_job_whose_batch_splits_over_no_count_is_offered_the_batch_that_does_priced_as_that_recommendation(catalog):
    rec = _recommend(catalog, QWEN_14B)
    assert rec.best is None and "effective batch they can split" in rec.nothing_meets
    remedy = _split_remedy(rec)
    batch = int(remedy["change"].split()[1])
    assert remedy["change"] == f"--effective-batch {batch}" and remedy["count"] > 1
    assert remedy["effective_batch_size"] == batch and batch % remedy["count"] == 0
    # the same recommendation with that option: its best is the remedy, figure for figure
    again = _recommend(catalog, QWEN_14B, effective_batch=batch)
    assert again.best is not None and (again.best.gpu, again.best.count) == (remedy["gpu"], remedy["count"])
    row = _row(again, remedy)
    assert row["fits"] and {k: row[k] for k in FIELDS} == {k: remedy[k] for k in FIELDS}
    # the smallest batch a fitting option splits: the next multiple of its count, and no fewer GPUs fit
    own = QWEN_14B.effective_batch_size
    assert batch == -(-own // remedy["count"]) * remedy["count"]
    for fewer in sorted({o.count for o in rec.options if 1 < o.count < remedy["count"]}):
        smaller = _recommend(catalog, QWEN_14B, effective_batch=-(-own // fewer) * fewer)
        assert not any(o.fits for o in smaller.options if o.count == fewer)
    assert remedy["batch_note"].startswith(
        f"effective batch {batch} samples per optimizer step instead of {QWEN_14B.effective_batch_size}")
    # where a count splits the batch the table prices it: no such remedy
    assert not [r for r in again.remedies if r["change"].startswith("--effective-batch ")]


def test_the_batch_remedy_is_ranked_with_the_others_the_same_training_first_cheapest_first(catalog):
    rec = _recommend(catalog, QWEN_14B)
    assert _split_remedy(rec) in rec.remedies
    ranks = [("--finetune" in r["change"] or "--quant" in r["change"], r["total_cost_ranked"]) for r in rec.remedies]
    assert ranks == sorted(ranks) and len(ranks) > 1
    assert all("batch_note" in r for r in rec.remedies)
    assert all(r["batch_note"] is None for r in rec.remedies if r is not _split_remedy(rec))


def test_a_job_not_yet_sharded_is_offered_the_batch_that_splits_with_zero3_where_it_needs_both(catalog):
    unsharded = QWEN_14B.with_(sharding="ddp")
    rec = _recommend(catalog, unsharded)
    remedy = _split_remedy(rec)
    shard = shard_over_gpus_remedy(unsharded)
    batch = remedy["effective_batch_size"]
    assert remedy["change"] == f"--effective-batch {batch} {shard.change}" and not changes_method(shard)
    again = _recommend(catalog, shard.apply(unsharded), effective_batch=batch)
    row = _row(again, remedy)
    assert row["fits"] and {k: row[k] for k in FIELDS} == {k: remedy[k] for k in FIELDS}
