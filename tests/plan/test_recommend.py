"""Ranking, exclusions, constraints, multi-GPU options, auto batch and currencies of `plan.recommend`.

The workload model here is scripted (memory affine in batch, time from the GPU's fp16 peak) so that
each test knows its answer; the end-to-end path with a real trace is in test_cli_recommend.py.
"""


import re

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.model import Catalog, Offer
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan import Constraints, JobSize, PlanError, recommend
from gpuwise.plan.profile import Estimate, largest_fitting_batch
from gpuwise.plan.spot import SpotRisk
from gpuwise.runtime.model import StepTime
from gpuwise.workload import Workload

GB = 10**9


class ScriptedModel:
    """Memory = fixed + per_sample × batch (+ accumulating_bytes while accumulating: the gradients kept
    between micro-batches); step time = work / fp16 peak, split over GPUs."""

    method = "scripted"
    frames_per_sample = 1       # images (WorkloadModel.frames_per_sample)

    def __init__(self, workload, fixed_bytes=4 * GB, per_sample_bytes=0.5 * GB, work=2000.0, accumulating_bytes=0):
        self.workload = workload
        self.fixed_bytes, self.per_sample_bytes, self.work = fixed_bytes, per_sample_bytes, work
        self.accumulating_bytes = accumulating_bytes
        self.calls = []

    def count_refusal(self, count):
        return None

    def estimate(self, gpu, *, count=1, batch_size=None, with_time=True, grad_accum_steps=None, provider=None):
        b = batch_size or self.workload.batch_size
        accum = grad_accum_steps or self.workload.grad_accum_steps
        self.calls.append((gpu.id, count, b))
        fixed = self.fixed_bytes / 2 if self.workload.grad_checkpointing else self.fixed_bytes
        total = int(fixed + self.per_sample_bytes * b + (self.accumulating_bytes if accum > 1 else 0))
        mem = MemoryEstimate(total - 500_000_000, total - 500_000_000, 500_000_000, total, 1, 1, 1,
                             total - 500_000_003)
        step_s = self.work * b * accum / (gpu.peak("fp16") * 1e3) + 0.01 * count
        time = StepTime(gpu.id, count, step_s, b * accum * count / step_s, {"matmul": step_s}, "compute")
        return Estimate(self.workload.with_(batch_size=b, num_gpus=count), gpu, count, mem,
                        time if with_time else None)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def small_catalog(catalog, ids, offers):
    gpus = tuple(g for g in catalog.gpus if g.id in ids)
    assert {g.id for g in gpus} == set(ids), "a GPU id the test names is not in the catalog"
    return Catalog(gpus=gpus, offers=tuple(offers))


def offer(gpu_id, price, currency="CNY", count=1, provider="autodl", spot=False):
    return Offer(provider, gpu_id, count, price, currency, spot, "test", "2026-11-20")


def test_cheapest_fitting_option_is_best_and_oom_is_explained(catalog):
    cat = small_catalog(catalog, {"t4", "rtx-4090", "a100-40gb-sxm4"},
                        [offer("t4", 1.0), offer("rtx-4090", 2.0), offer("a100-40gb-sxm4", 15.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=16 * GB)  # 32 GB at batch 32
    rec = recommend(model, cat, job=JobSize(samples=100_000), max_gpus=1)
    t4 = next(o for o in rec.options if o.gpu == "t4")
    assert not t4.fits          # 16 GB before the first sample: no micro-batch fits a T4
    # the fit line's words: the estimate's total to its upper side (it said "needs up to" the upper side alone), then
    # the usable memory as every fit line says it (memory.uncertainty.usable_words; was "… usable with 5% kept free")
    assert re.match(r"OOM at batch 1: needs \d+\.\d GiB–15\.4 GiB, 14\.2 GiB usable with 5% of its 15\.0 GiB kept free",
                    t4.excluded_because), t4.excluded_because
    assert rec.best.gpu == "rtx-4090"
    assert rec.fastest.gpu in {"rtx-4090", "a100-40gb-sxm4"}
    a100 = next(o for o in rec.options if o.gpu == "a100-40gb-sxm4")
    assert a100.total_cost > rec.best.total_cost


def test_a_micro_batch_that_does_not_fit_is_split_into_accumulation_steps(catalog):
    # before: "OOM at batch 32" on the T4, though 16 x 2 trains the same model there (and it is cheapest)
    cat = small_catalog(catalog, {"t4", "rtx-4090"}, [offer("t4", 1.0), offer("rtx-4090", 2.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32), per_sample_bytes=0.5 * GB)  # 20 GB at 32
    rec = recommend(model, cat, job=JobSize(samples=100_000), max_gpus=1)
    t4 = next(o for o in rec.options if o.gpu == "t4")
    assert t4.fits and (t4.batch_size, t4.grad_accum_steps) == (16, 2)
    assert t4.warnings[0] == "micro-batch 32 does not fit: 16 × 2 accumulation steps instead (the same effective batch)"
    assert t4.eligible
    rtx = next(o for o in rec.options if o.gpu == "rtx-4090")
    assert (rtx.batch_size, rtx.grad_accum_steps) == (32, 1) and not rtx.warnings   # fits as asked


def test_a_micro_batch_that_does_not_divide_a_gpus_share_is_said_where_it_changes(catalog):
    # a new user's trial: -b 32 --effective-batch 100 ran 25 x 4 with no word of why (32 fits; it does not divide)
    cat = small_catalog(catalog, {"rtx-4090"}, [offer("rtx-4090", 2.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32), per_sample_bytes=0.1 * GB)
    rec = recommend(model, cat, job=JobSize(samples=100_000), max_gpus=2, effective_batch=100)
    one, two = (next(o for o in rec.options if o.count == n) for n in (1, 2))
    assert (one.batch_size, one.grad_accum_steps) == (25, 4)
    assert one.warnings[0] == ("micro-batch 32 does not divide the 100 samples a GPU takes a step: 25 × 4 "
                               "accumulation steps instead (the same effective batch)")
    assert (two.batch_size, two.grad_accum_steps) == (25, 2)      # 50 a GPU: 25 divides it
    assert two.warnings[0].startswith("micro-batch 32 does not divide the 50 samples")
    # neither 32 (does not divide 100) nor 25 (too big here) runs: both said, in one note
    tight = ScriptedModel(Workload("scripted", batch_size=32), per_sample_bytes=0.9 * GB)   # 26.5 GB at 25
    (squeezed,) = recommend(tight, cat, job=JobSize(samples=100_000), max_gpus=1, effective_batch=100).options
    assert squeezed.batch_size < 25 and squeezed.warnings[0].startswith(
        "micro-batch 32 does not divide the 100 samples a GPU takes a step, and 25 does not fit: ")
    exact = recommend(model, cat, job=JobSize(samples=100_000), max_gpus=1, effective_batch=96)
    assert (exact.options[0].batch_size, exact.options[0].grad_accum_steps) == (32, 3) and not exact.options[0].warnings


def test_deadline_excludes_slow_options_with_the_miss_in_words(catalog):
    cat = small_catalog(catalog, {"t4", "h100-sxm"}, [offer("t4", 1.0), offer("h100-sxm", 20.0)])
    model = ScriptedModel(Workload("scripted", batch_size=8))
    slow = recommend(model, cat, job=JobSize(samples=10_000_000), max_gpus=1)
    t4_time = next(o for o in slow.options if o.gpu == "t4").total_time_s
    h100_time = next(o for o in slow.options if o.gpu == "h100-sxm").total_time_s
    deadline = (t4_time + h100_time) / 2
    rec = recommend(model, cat, job=JobSize(samples=10_000_000), max_gpus=1, constraints=Constraints(deadline_s=deadline))
    t4 = next(o for o in rec.options if o.gpu == "t4")
    assert t4.fits and t4.excluded_because.startswith("misses the deadline by")
    assert rec.best.gpu == "h100-sxm"


def test_budget_excludes_expensive_options_and_nothing_meets_lists_closest(catalog):
    cat = small_catalog(catalog, {"t4", "h100-sxm"}, [offer("t4", 1.0), offer("h100-sxm", 20.0)])
    model = ScriptedModel(Workload("scripted", batch_size=8))
    rec = recommend(model, cat, job=JobSize(samples=1_000_000), max_gpus=1, constraints=Constraints(budget=1e-9))
    assert rec.best is None
    assert rec.nothing_meets.startswith("nothing meets the budget")
    assert rec.closest and all(o.excluded_because.startswith("over budget by") for o in rec.closest)


def test_multi_gpu_options_keep_the_effective_batch_and_price_by_count(catalog):
    cat = small_catalog(catalog, {"rtx-4090"}, [offer("rtx-4090", 2.0), offer("rtx-4090", 7.5, count=4)])
    model = ScriptedModel(Workload("scripted", batch_size=32))
    rec = recommend(model, cat, job=JobSize(steps=1000), max_gpus=4, effective_batch=32)
    by_count = {o.count: o for o in rec.options}
    assert set(by_count) == {1, 2, 4}
    for o in by_count.values():
        assert o.batch_size * o.grad_accum_steps * o.count == 32
    assert by_count[4].price_per_hour == 7.5          # an exact offer for 4
    assert by_count[2].price_per_hour == 4.0          # single-GPU price × 2
    assert by_count[4].step_time_s < by_count[1].step_time_s


def test_by_default_every_count_keeps_the_users_effective_batch(catalog):
    # the defect: --help promised the same effective batch on every option, but 8 GPUs trained at 8 × 32
    cat = small_catalog(catalog, {"rtx-4090"}, [offer("rtx-4090", 2.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32, grad_accum_steps=8))
    rec = recommend(model, cat, job=JobSize(samples=64_000), max_gpus=8)
    assert {o.effective_batch_size for o in rec.options} == {256}
    for o in rec.options:
        assert o.batch_size * o.grad_accum_steps * o.count == 256
    assert any("effective batch 256" in n for n in rec.notes)


def test_per_gpu_batch_runs_the_users_micro_batch_on_every_count_from_one_estimate(catalog):
    cat = small_catalog(catalog, {"rtx-4090"}, [offer("rtx-4090", 2.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32))
    rec = recommend(model, cat, job=JobSize(samples=64_000), max_gpus=8, per_gpu_batch=True)
    assert {b for _, _, b in model.calls} == {32}
    for o in rec.options:
        assert o.batch_size == 32 and o.effective_batch_size == 32 * o.count
    by_count = {o.count: o for o in rec.options}
    # the same samples in fewer, larger steps
    assert by_count[8].total_time_s < by_count[1].total_time_s


def test_auto_batch_takes_the_largest_divisor_that_fits_and_accumulates_the_rest(catalog):
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 1.0)])
    model = ScriptedModel(Workload("scripted", batch_size=256), fixed_bytes=4 * GB, per_sample_bytes=0.5 * GB)
    rec = recommend(model, cat, job=JobSize(steps=10), max_gpus=1, auto_batch=True, effective_batch=256)
    (t4,) = rec.options
    assert t4.fits
    assert t4.batch_size * t4.grad_accum_steps == 256
    assert t4.peak_total_bytes <= 0.95 * 15360 * 2**20
    # the next power of two would not fit
    assert 4 * GB + 0.5 * GB * (2 * t4.batch_size) > 0.95 * 15360 * 2**20


def test_auto_batch_decides_the_fit_at_the_accumulation_the_option_runs(catalog):
    # the defect (a new user's trial): the search ran at one micro-batch per step, the option at 16 x 2,
    # whose kept gradients did not fit: "OOM at batch 16 ... nothing fits", though 8 x 4 fits the T4
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 1.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=4 * GB, per_sample_bytes=0.5 * GB,
                          accumulating_bytes=4 * GB)   # 16 x 2: 16 GB; 8 x 4: 12 GB; 14.3 GiB usable
    rec = recommend(model, cat, job=JobSize(steps=10), max_gpus=1, auto_batch=True, effective_batch=32)
    (t4,) = rec.options
    assert t4.fits and (t4.batch_size, t4.grad_accum_steps) == (8, 4), t4.excluded_because
    assert rec.best is t4 and rec.nothing_meets is None


def test_auto_batch_steps_down_to_one_and_rejects_only_where_batch_one_does_not_fit(catalog):
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 1.0)])
    usable = 0.95 * 15360 * 2**20
    # batch 1 at its accumulation (32 steps) just fits; batch 2 does not
    fixed = int(usable - 0.5 * GB - 2 * GB) - 1
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=fixed, accumulating_bytes=2 * GB)
    (t4,) = recommend(model, cat, job=JobSize(steps=10), max_gpus=1, auto_batch=True, effective_batch=32).options
    assert t4.fits and (t4.batch_size, t4.grad_accum_steps) == (1, 32)
    # 1 x 32 does not fit (it would one micro-batch per step): the option is out, said at batch 1
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=fixed + GB // 100, accumulating_bytes=2 * GB)
    (t4,) = recommend(model, cat, job=JobSize(steps=10), max_gpus=1, auto_batch=True, effective_batch=32).options
    assert not t4.fits and t4.excluded_because.startswith("OOM at batch 1:"), t4.excluded_because


def test_a_split_micro_batch_is_chosen_at_the_accumulation_it_runs(catalog):
    # the same rule where --batch-size N does not fit: 32 -> 8 x 4, not 16 x 2 (which does not fit either)
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 1.0)])
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=4 * GB, per_sample_bytes=0.5 * GB,
                          accumulating_bytes=4 * GB)
    (t4,) = recommend(model, cat, job=JobSize(steps=10), max_gpus=1).options
    assert t4.fits and (t4.batch_size, t4.grad_accum_steps) == (8, 4), t4.excluded_because
    assert t4.warnings[0] == "micro-batch 32 does not fit: 8 × 4 accumulation steps instead (the same effective batch)"


def test_largest_fitting_batch_is_zero_when_batch_one_does_not_fit(catalog):
    t4 = next(g for g in catalog.gpus if g.id == "t4")
    model = ScriptedModel(Workload("scripted"), fixed_bytes=30 * GB)
    assert largest_fitting_batch(model, t4) == 0


class SawtoothModel(ScriptedModel):
    """Memory that steps back between neighbouring batches, as the caching allocator's rounding makes a
    traced estimate do (ViT-B/16 on an RTX 4090: batch 310 needs less than 306-309): a trend of 64 MiB a
    sample with a sawtooth of up to 400 MiB around it."""

    SAW_MIB = (0, 120, 240, 360, -40, 80, 200)

    def estimate(self, gpu, *, count=1, batch_size=None, with_time=True, grad_accum_steps=None, provider=None):
        b = batch_size or self.workload.batch_size
        self.calls.append((gpu.id, count, b))
        total = (6360 + 64 * b + self.SAW_MIB[b % 7]) * 2**20
        mem = MemoryEstimate(total, total, 0, total, 1, 1, 1, total - 3)
        return Estimate(self.workload.with_(batch_size=b), gpu, count, mem, None)


def test_the_largest_batch_is_one_with_every_batch_up_to_it_fitting(catalog):
    # before: 138, a boundary (138 fits, 139 does not) the search took for the answer, above 136 and 137,
    # which do not fit (memory is not monotone in the batch): the answer was safe alone, not as "the
    # largest batch that fits" reads (a run's last, smaller batch of an epoch at 137 would not fit)
    t4 = next(g for g in catalog.gpus if g.id == "t4")
    model = SawtoothModel(Workload("scripted", batch_size=32))
    best = largest_fitting_batch(model, t4, headroom_fraction=0.0, powers_of_two=False)
    total = lambda b: model.estimate(t4, batch_size=b).memory.total_upper_bytes  # noqa: E731
    searched = len({b for _, _, b in model.calls})
    assert all(total(b) <= t4.visible_memory_bytes for b in range(1, best + 1))
    assert total(best + 1) > t4.visible_memory_bytes and best == 135
    assert searched <= 15        # a handful of evaluations (a trace each on a traced model), not one per batch


def test_bf16_on_a_gpu_without_it_is_excluded_with_the_reason(catalog):
    cat = small_catalog(catalog, {"t4", "l4"}, [offer("t4", 1.0), offer("l4", 1.5)])
    model = ScriptedModel(Workload("scripted", batch_size=8, precision="amp-bf16"))
    rec = recommend(model, cat, job=JobSize(steps=100), max_gpus=1)
    t4 = next(o for o in rec.options if o.gpu == "t4")
    assert t4.excluded_because.startswith("no bf16 on this GPU")
    assert rec.best.gpu == "l4"


def test_mixed_currencies_rank_in_one_currency_and_keep_each_offers_own(catalog):
    cat = small_catalog(catalog, {"rtx-4090", "l4"}, [offer("rtx-4090", 2.0, "CNY"), offer("l4", 0.8, "USD", provider="gcp")])
    model = ScriptedModel(Workload("scripted", batch_size=8))
    rec = recommend(model, cat, job=JobSize(steps=1000), max_gpus=1, currency="CNY")
    l4 = next(o for o in rec.options if o.gpu == "l4")
    assert l4.currency == "USD" and rec.ranking_currency == "CNY"
    assert l4.total_cost_ranked == pytest.approx(l4.total_cost * 7.2)
    assert rec.to_dict()["exchange_rates"]["units_of_ranking_currency_per_unit"]["USD"] == 7.2


def test_unknown_provider_is_bad_input_with_suggestions(catalog):
    model = ScriptedModel(Workload("scripted"))
    with pytest.raises(PlanError, match="did you mean: autodl"):
        recommend(model, catalog, job=JobSize(steps=10), provider="autodll")


def test_no_offers_for_the_chosen_gpus_is_an_answer_not_an_error(catalog):
    model = ScriptedModel(Workload("scripted"))
    rec = recommend(model, catalog, job=JobSize(steps=10), provider="aws", gpu_ids=["rtx-4090d"])
    assert rec.best is None and rec.options == ()
    assert "no offers from provider 'aws'" in rec.nothing_meets


def test_job_size_needs_samples_or_steps_but_not_both():
    with pytest.raises(PlanError):
        JobSize()
    with pytest.raises(PlanError):
        JobSize(samples=10, steps=10)
    assert JobSize(samples=1000, epochs=3).optimizer_steps(32) == 96      # 3 epochs of ceil(1000 / 32) = 32 steps


def test_every_epoch_ends_with_its_own_short_batch():
    # a new user's trial: 10 epochs of 100 samples at batch 64 were priced as ceil(1000 / 64) = 16 steps; a data
    # loader keeping its last batch (drop_last=False, PyTorch's default) runs 2 a pass, 20 in all
    assert JobSize(samples=100, epochs=10).optimizer_steps(64) == 20
    assert JobSize(samples=100, epochs=10).steps_per_epoch(64) == 2
    assert JobSize(samples=100, epochs=2.5).optimizer_steps(64) == 2 * 2 + 1     # half a pass: 50 samples, 1 step
    assert JobSize(samples=1280, epochs=4).optimizer_steps(64) == 80             # batches that divide: as before
    assert JobSize(steps=7).steps_per_epoch(64) is None


def _scripted_factory(**kw):
    return lambda w: ScriptedModel(w, **kw)


def priced_as_rows(job, rank_in, constraints=Constraints(), *, auto_batch=False, spot_risk=SpotRisk()):
    """find_remedies' ``price_option``: a row priced by recommend's own rule for its table's rows, as
    ``recommend(..., remedies=True)`` passes it."""
    from gpuwise.plan.recommend import _evaluate

    return lambda model, gpu, offer, count, effective: _evaluate(
        model, gpu, offer, count, job, constraints, effective, auto_batch, rank_in, spot_risk)


def test_remedies_name_the_change_that_fits_a_cheaper_gpu_and_cost_less_than_the_best(catalog):
    from gpuwise.plan.remedies import find_remedies

    cat = small_catalog(catalog, {"t4", "a100-40gb-sxm4"}, [offer("t4", 1.0), offer("a100-40gb-sxm4", 15.0)])
    w = Workload("scripted", batch_size=16, precision="amp-fp16", optimizer="sgd")
    # 16 GB before the first sample: not on a T4 at any micro-batch; checkpointing halves it
    sizes = dict(fixed_bytes=16 * GB, per_sample_bytes=0.2 * GB)
    rec = recommend(ScriptedModel(w, **sizes), cat, job=JobSize(steps=1000), max_gpus=1)
    assert rec.best.gpu == "a100-40gb-sxm4"
    remedies = find_remedies(rec, cat, JobSize(steps=1000), model_factory=_scripted_factory(**sizes),
                             price_option=priced_as_rows(JobSize(steps=1000), rec.ranking_currency))
    assert [r["change"] for r in remedies] == ["--grad-checkpointing"]
    (r,) = remedies
    assert r["gpu"] == "t4" and r["fits"] and r["peak_total_bytes"] <= 0.95 * r["gpu_memory_bytes"]
    assert r["total_cost_ranked"] < rec.best.total_cost_ranked


def test_remedies_that_miss_the_deadline_are_not_offered(catalog):
    # the defect: "nothing meets 10 min" was answered with a remedy that took 52 h
    from gpuwise.plan.remedies import find_remedies

    cat = small_catalog(catalog, {"t4", "a100-40gb-sxm4"}, [offer("t4", 1.0), offer("a100-40gb-sxm4", 15.0)])
    w = Workload("scripted", batch_size=16, precision="amp-fp16", optimizer="sgd")
    sizes = dict(fixed_bytes=16 * GB, per_sample_bytes=0.2 * GB)
    free = recommend(ScriptedModel(w, **sizes), cat, job=JobSize(steps=1000), max_gpus=1)
    a100_time = free.best.total_time_s
    tight = Constraints(deadline_s=a100_time * 1.01)   # the A100 makes it; a T4 (4× slower here) does not
    rec = recommend(ScriptedModel(w, **sizes), cat, job=JobSize(steps=1000), max_gpus=1, constraints=tight)
    assert rec.best.gpu == "a100-40gb-sxm4"
    loose = find_remedies(rec, cat, JobSize(steps=1000), model_factory=_scripted_factory(**sizes),
                          price_option=priced_as_rows(JobSize(steps=1000), rec.ranking_currency))
    assert loose, "without the deadline the T4 remedy exists"
    assert find_remedies(rec, cat, JobSize(steps=1000), tight, model_factory=_scripted_factory(**sizes),
                         price_option=priced_as_rows(JobSize(steps=1000), rec.ranking_currency, tight)) == ()


def test_mixed_currencies_rank_in_cny_unless_told_otherwise(catalog):
    cat = small_catalog(catalog, {"rtx-4090", "l4"}, [offer("rtx-4090", 2.0, "CNY"), offer("l4", 0.8, "USD", provider="gcp")])
    rec = recommend(ScriptedModel(Workload("scripted", batch_size=8)), cat, job=JobSize(steps=10), max_gpus=1)
    assert rec.ranking_currency == "CNY"
    usd_only = small_catalog(catalog, {"l4"}, [offer("l4", 0.8, "USD", provider="gcp")])
    rec = recommend(ScriptedModel(Workload("scripted", batch_size=8)), usd_only, job=JobSize(steps=10), max_gpus=1)
    assert rec.ranking_currency == "USD"


def test_spot_says_what_it_changed_or_why_it_changed_nothing(catalog):
    """Was (issue 27): --spot changed nothing in the top 15 and did not say why."""
    model = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=2 * GB)
    job = JobSize(samples=100_000)
    none_there = small_catalog(catalog, {"t4", "rtx-4090"}, [offer("t4", 1.0), offer("rtx-4090", 2.0)])
    notes = recommend(model, none_there, job=job, max_gpus=1, spot=True).notes
    assert any(n.startswith("--spot: no spot offers") for n in notes)
    pricier = small_catalog(catalog, {"t4", "rtx-4090"},
                            [offer("t4", 1.0), offer("rtx-4090", 9.0, provider="cloud", spot=True)])
    rec = recommend(model, pricier, job=job, max_gpus=1, spot=True)
    said = next(n for n in rec.notes if n.startswith("--spot:"))
    assert not rec.best.spot and "1× rtx-4090 from cloud" in said and "more than the best on-demand" in said
    cheaper = small_catalog(catalog, {"t4", "rtx-4090"},
                            [offer("t4", 5.0), offer("rtx-4090", 0.5, provider="cloud", spot=True)])
    rec = recommend(model, cheaper, job=job, max_gpus=1, spot=True)
    assert rec.best.spot and "--spot: the best option is a spot offer (1× rtx-4090 from cloud)" in rec.notes
    assert not any(n.startswith("--spot") for n in recommend(model, cheaper, job=job, max_gpus=1).notes)


class InputLimitedModel(ScriptedModel):
    """A GPU that would run faster than the input rate waits on it (the runtime's 'input' bound)."""

    def estimate(self, gpu, **kw):
        est = super().estimate(gpu, **kw)
        rate = self.workload.input_rate
        if est.time is None or not rate or est.time.samples_per_s <= rate * est.count:
            return est
        samples = est.time.samples_per_s * est.time.step_time_s
        step_s = samples / (rate * est.count)
        time = StepTime(gpu.id, est.count, step_s, samples / step_s, {"matmul": step_s}, "input")
        return Estimate(est.workload, gpu, est.count, est.memory, time)


def test_an_input_rate_says_how_many_options_wait_on_it_even_when_none_do(catalog):
    """Was (issue 27): ImageNet ResNet-50 with --cpu-workers 8 changed nothing and said nothing."""
    cat = small_catalog(catalog, {"t4", "rtx-4090"}, [offer("t4", 1.0), offer("rtx-4090", 2.0)])
    job = JobSize(samples=100_000)
    slow_input = InputLimitedModel(Workload("scripted", batch_size=32, input_rate=10.0), fixed_bytes=2 * GB)
    said = next(n for n in recommend(slow_input, cat, job=job, max_gpus=1).notes if "input" in n)
    assert "delivers 10 samples/s per GPU" in said and "2 of the 2 options that fit wait on it" in said
    fast_input = InputLimitedModel(Workload("scripted", batch_size=32, input_rate=1e9), fixed_bytes=2 * GB)
    said = next(n for n in recommend(fast_input, cat, job=job, max_gpus=1).notes if "input pipeline" in n)
    assert "none of the 2 options that fit waits on it" in said
    synthetic = ScriptedModel(Workload("scripted", batch_size=32), fixed_bytes=2 * GB)
    assert not any("input pipeline" in n for n in recommend(synthetic, cat, job=job, max_gpus=1).notes)


# --- typed exclusions (issue 23 item 4): code reads the kind, people read the words ------------------

def test_each_exclusion_has_a_kind_that_code_reads(catalog):
    from gpuwise.plan import reasons

    cat = small_catalog(catalog, {"t4", "rtx-4090", "h100-sxm"},
                        [offer("t4", 1.0), offer("rtx-4090", 2.0), offer("h100-sxm", 20.0),
                         offer("rtx-4090", 8.0, count=4)])
    bf16 = ScriptedModel(Workload("scripted", batch_size=6, precision="amp-bf16"), fixed_bytes=30 * GB,
                         per_sample_bytes=0.1 * GB)
    rec = recommend(bf16, cat, job=JobSize(samples=100_000), max_gpus=4, effective_batch=6)
    kinds = {(o.gpu, o.count): o.exclusion.kind for o in rec.options if not o.eligible}
    assert kinds[("t4", 1)] == reasons.CANNOT_RUN          # no bf16 on a Turing card
    assert kinds[("rtx-4090", 1)] == reasons.OOM           # 30.6 GB on a 24 GB card
    assert kinds[("rtx-4090", 4)] == reasons.SPLIT         # 6 does not split over 4
    # the JSON carries the kind beside the words
    row = next(o for o in rec.to_dict()["options"] if o["count"] == 4)
    assert row["excluded_kind"] == "split" and "does not split evenly" in row["excluded_because"]

    model = ScriptedModel(Workload("scripted", batch_size=8))
    late = recommend(model, cat, job=JobSize(samples=10_000_000), max_gpus=1, constraints=Constraints(deadline_s=1.0))
    poor = recommend(model, cat, job=JobSize(samples=1_000_000), max_gpus=1, constraints=Constraints(budget=1e-9))
    assert {o.exclusion.kind for o in late.options if not o.eligible and o.fits} == {reasons.DEADLINE}
    assert {o.exclusion.kind for o in poor.options if not o.eligible and o.fits} == {reasons.BUDGET}


def test_an_exclusion_of_no_known_kind_is_refused():
    from gpuwise.plan.reasons import Exclusion

    with pytest.raises(ValueError, match="unknown exclusion kind"):
        Exclusion("slow", "too slow")
    assert str(Exclusion("oom", "OOM at batch 4")) == "OOM at batch 4"


def test_an_oom_risk_is_its_own_kind():
    """Where the estimate's total fits and only its upper side does not, scripts can tell it from an OOM."""
    from gpuwise.plan import reasons

    risk = reasons.out_of_memory(4, "21.0 GiB–24.5 GiB", "23.2 GiB usable", risk=True)
    sure = reasons.out_of_memory(4, "30.0 GiB–33.1 GiB", "23.2 GiB usable", risk=False)
    assert (risk.kind, sure.kind) == (reasons.OOM_RISK, reasons.OOM)
    assert risk.text.startswith("OOM risk at batch 4") and sure.text.startswith("OOM at batch 4")
