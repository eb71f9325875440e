"""From a new user's trial of the library API: what the CLI refuses or resolves, the library did not.

``recommend(gpu_ids=...)`` took only canonical ids (``["T4"]`` had "no offers"; an unknown id no CatalogError; a
string its letters), ``Estimate.fits`` was True for a job the GPU cannot run, ``JobSize(steps=2.5)`` priced 2.5
steps, and the tour named the wrong criterion for advise's forecast."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuwise.catalog import CatalogError, load_catalog, resolve_gpu
from gpuwise.plan import JobSize, PlanError, model_for, recommend
from gpuwise.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def small_model():
    return model_for(Workload("torchvision:resnet18", image_size=64, batch_size=8, precision="amp-fp16"))


# -- recommend(gpu_ids=...): the catalog's one resolver, as --gpus -----------------------------------------
@pytest.mark.parametrize("name", ["T4", "Tesla T4", "tesla_t4", "t4"])
def test_gpu_ids_take_any_name_the_catalog_resolves(catalog, small_model, name):
    rec = recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=[name], max_gpus=1)
    assert rec.nothing_meets is None
    assert {o.gpu for o in rec.options} == {"t4"} and rec.best.gpu == "t4"


def test_gpu_ids_of_one_gpu_named_twice_quote_it_once(catalog, small_model):
    once = recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=["t4"], max_gpus=1)
    twice = recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=["T4", "Tesla T4"], max_gpus=1)
    assert [o.to_dict() for o in twice.options] == [o.to_dict() for o in once.options]


def test_an_unknown_gpu_id_is_a_catalog_error_with_suggestions(catalog, small_model):
    with pytest.raises(CatalogError, match=r"unknown GPU 't5' \(did you mean: t4"):
        recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=["t5"])


def test_a_family_name_is_ambiguous_not_no_offers(catalog, small_model):
    with pytest.raises(CatalogError, match="ambiguous"):
        recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=["a100"])


def test_a_bare_number_is_said_to_be_a_count(catalog, small_model):
    with pytest.raises(CatalogError, match="--max-gpus 4 sets how many"):
        recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=["4"])


@pytest.mark.parametrize("ids, said", [
    ("t4", r"gpu_ids takes a list of GPU names, not the string 't4': gpu_ids=\['t4'\]"),
    ("t4, a10", r"gpu_ids=\['t4', 'a10'\]"),
    ([], "gpu_ids names no GPU"),
    ([resolve_gpu(load_catalog(user_file=False), "t4")], "gpu_ids takes GPU names"),
], ids=["string", "comma-string", "empty", "a-GPU"])
def test_gpu_ids_that_are_no_list_of_names_are_refused_in_one_line(catalog, small_model, ids, said):
    with pytest.raises(PlanError, match=said) as e:
        recommend(small_model, catalog, job=JobSize(steps=10), gpu_ids=ids)
    assert "\n" not in str(e.value)


# -- Estimate.runs: False where the job cannot run on the GPU ---------------------------------------------
def test_an_estimate_on_a_gpu_that_cannot_run_the_job_does_not_run(catalog):
    model = model_for(Workload("torchvision:resnet18", precision="amp-bf16", batch_size=8))
    v100, a100 = resolve_gpu(catalog, "v100-32gb-sxm2"), resolve_gpu(catalog, "a100-40gb-sxm4")
    est = model.estimate(v100)
    assert est.cannot_run and "bf16" in est.cannot_run
    assert est.fits is True and est.runs is False and est.to_dict()["runs"] is False   # fits: memory only
    assert est.to_dict()["cannot_run"] == est.cannot_run
    runs = model.estimate(a100)
    assert runs.cannot_run is None and runs.runs is True and runs.to_dict()["cannot_run"] is None


def test_a_default_bf16_runs_at_fp16_on_a_gpu_without_it_and_fits():
    v100 = resolve_gpu(load_catalog(user_file=False), "v100-32gb-sxm2")
    job = Workload("torchvision:resnet18", batch_size=8, precision="amp-bf16", precision_default=True)
    est = model_for(job).estimate(v100)
    assert est.workload.precision == "amp-fp16" and est.cannot_run is None and est.runs is True


# -- JobSize: what the CLI refuses ------------------------------------------------------------------------
@pytest.mark.parametrize("size, said", [
    (dict(steps=2.5), "--steps must be a whole number, got 2.5"),
    (dict(steps=10.0), "--steps must be a whole number, got 10.0"),
    (dict(steps=True), "--steps must be a whole number, got True"),
    (dict(steps="10"), "--steps must be a whole number, got '10'"),
    (dict(samples=1000.5), "--samples must be a whole number, got 1000.5"),
    (dict(samples=1000, epochs="2"), "--epochs must be a number, got '2'"),
    (dict(samples=1000, epochs=float("inf")), "--epochs must be positive, got inf"),
    (dict(steps=0), "--steps must be positive, got 0"),
])
def test_a_job_size_the_cli_refuses_is_a_plan_error(size, said):
    with pytest.raises(PlanError, match=f"^{re.escape(said)}$"):
        JobSize(**size)


def test_a_whole_job_size_and_a_fraction_of_an_epoch_are_fine():
    assert JobSize(steps=10).optimizer_steps(32) == 10
    assert JobSize(samples=1000, epochs=0.5).optimizer_steps(100) == 5


# -- the tour's words for advise's forecast: the code's (advise/fit.py) ----------------------------------
def test_the_tour_names_the_criterion_advise_weighs_its_forecast_by():
    from gpuwise.advise import fit

    assert "weighed by BIC" in fit.__doc__
    tour = (ROOT / "docs" / "tour.md").read_text()
    section = tour.split("## `gpuwise advise`", 1)[1].split("\n## ", 1)[0]
    assert "AIC" not in section and "weighed by BIC" in " ".join(section.split())
