"""recommend quotes several machines where the provider rents them as one cluster, priced and launched as such.

A new user's trial: `recommend … --max-gpus 16` was refused ("recommend quotes 1, 2, 4, 8 GPUs (one node), at most
8"), a catalog offer of `count = 16` was "nothing to launch", and the one way to several nodes, a catalog's
`gpus_per_node = 4` on the shipped A100 80GB, priced AWS's 8-GPU p4de instance while the launch asked for
`A100-80GB:4` × 2 nodes, an instance AWS does not have, with no word said.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch import launch_best
from gpuwise.plan import JobSize, PlanError, model_for, recommend
from gpuwise.plan.accuracy import likely_job_time_range_s
from gpuwise.plan.offers import candidate_offers, cheapest_offer
from gpuwise.workload import Workload
from tests.launch.conftest import sky  # noqa: F401 (a fixture: SkyPilot's own parser)
from tests.plan.test_recommend import ScriptedModel

recommend_mod = importlib.import_module("gpuwise.plan.recommend")   # the package exports a function of that name

COMMAND = "python train.py --checkpoint-dir ckpt"
JOB = JobSize(steps=1000)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def traced():
    # a large batch a GPU (a step not paced by the host): its multi-GPU step is a data-parallel regime
    return model_for(Workload(model="torchvision:resnet50", batch_size=128))


@pytest.fixture(scope="module")
def aws_h100(catalog, traced):
    return recommend(traced, catalog, job=JOB, provider="aws", gpu_ids=["h100-sxm"], max_gpus=16, effective_batch=2048)


def _scripted():
    return ScriptedModel(Workload("scripted", batch_size=8, precision="fp32"))


def _catalog_file(tmp_path, text):
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return load_catalog(path, user_file=False)


def _task(sky, tmp_path, text):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return sky.Task.from_yaml(str(path))


def test_max_gpus_16_at_a_provider_that_rents_clusters_quotes_16_gpus_as_two_machines_priced_as_two(
        catalog, traced, aws_h100):
    by_count = {o.count: o for o in aws_h100.options}
    assert sorted(by_count) == [8, 16]            # AWS sells H100s 8 to an instance (p5.48xlarge)
    eight, sixteen = by_count[8], by_count[16]
    assert (sixteen.nodes, sixteen.gpus_per_node, eight.nodes) == (2, 8, 1)
    p5 = cheapest_offer(candidate_offers(catalog, provider="aws"), catalog.gpu("h100-sxm"), 8, "USD")
    assert sixteen.price_per_hour == pytest.approx(2 * p5.price_per_hour)
    assert "2 instances of 8 GPUs" in sixteen.offer_source
    # timed over AWS's network between the two machines, the regime of a step over several nodes: no likely range
    direct = traced.estimate(catalog.gpu("h100-sxm"), count=16, batch_size=sixteen.batch_size,
                             grad_accum_steps=sixteen.grad_accum_steps, provider="aws")
    assert sixteen.step_time_s == pytest.approx(direct.time.step_time_s, rel=1e-12)
    assert sixteen.regime == "multi-node" and likely_job_time_range_s(sixteen, aws_h100.method) is None
    assert any(w.startswith("16 GPUs: 2 nodes of 8") for w in sixteen.warnings), sixteen.warnings
    assert (sixteen.to_dict()["nodes"], sixteen.to_dict()["gpus_per_node"]) == (2, 8)


def test_a_16_gpu_option_launches_as_two_nodes_of_eight(sky, aws_h100, catalog, tmp_path):
    sixteen = next(o for o in aws_h100.options if o.count == 16)
    launch = launch_best(replace(aws_h100, best=sixteen), catalog, "skypilot", COMMAND)
    assert (launch["count"], launch["nodes"]) == (16, 2)
    task = _task(sky, tmp_path, launch["text"])
    (res,) = task.resources
    assert task.num_nodes == 2 and res.accelerators == {"H100": 8}


def test_max_gpus_16_at_providers_without_clusters_says_so_in_one_line(catalog):
    for provider, gpu in (("lambda", "h100-sxm"), ("autodl", "h800")):
        rec = recommend(_scripted(), catalog, job=JOB, provider=provider, gpu_ids=[gpu], max_gpus=16,
                        effective_batch=64)
        assert rec.options and max(o.count for o in rec.options) == 8
        said = [n for n in rec.notes if "no cluster of several machines" in n]
        assert len(said) == 1 and provider in said[0] and "\n" not in said[0], rec.notes
    # a marketplace that rents GPUs one by one is not priced at 16 × its single price either (16 are 2 machines)
    assert cheapest_offer(candidate_offers(catalog, provider="autodl"), catalog.gpu("h800"), 16, "CNY") is None


def test_default_max_gpus_says_nothing_of_clusters(catalog):
    rec = recommend(_scripted(), catalog, job=JOB, provider="lambda", gpu_ids=["h100-sxm"], effective_batch=64)
    assert not [n for n in rec.notes if "cluster" in n] and max(o.count for o in rec.options) == 8


A100_IN_FOURS = '[[gpu]]\nid = "a100-80gb-sxm4"\nbased_on = "a100-80gb-sxm4"\ngpus_per_node = 4\n'
OWN_FOUR_AT_AWS = ('\n[[offer]]\nprovider = "aws"\ngpu = "a100-80gb-sxm4"\ncount = 4\nprice_per_hour = 10.0\n'
                   'currency = "USD"\nsource = "my quote"\nchecked = "2026-12-01"\n')


def test_machines_of_four_are_not_priced_as_a_clouds_eight_gpu_instance(tmp_path):
    cat = _catalog_file(tmp_path, A100_IN_FOURS)
    rec = recommend(_scripted(), cat, job=JOB, provider="aws", gpu_ids=["a100-80gb-sxm4"], effective_batch=64)
    assert not rec.options and rec.best is None
    assert "aws's 8x a100-80gb-sxm4 is one machine of 8" in rec.nothing_reason and "\n" not in rec.nothing_reason


def test_machines_of_four_are_priced_as_that_many_machines_of_four_and_launched_so(sky, tmp_path):
    cat = _catalog_file(tmp_path, A100_IN_FOURS + OWN_FOUR_AT_AWS)
    # a real model's name: the launch sizes each node's disk from the model itself (launch.disk_need)
    real = ScriptedModel(Workload("torchvision:resnet18", batch_size=8, precision="fp32"))
    rec = recommend(real, cat, job=JOB, provider="aws", gpu_ids=["a100-80gb-sxm4"], effective_batch=64)
    eight = next(o for o in rec.options if o.count == 8)
    assert eight.price_per_hour == pytest.approx(2 * 10.0) and (eight.nodes, eight.gpus_per_node) == (2, 4)
    said = [n for n in rec.notes if "is one machine of 8" in n]
    assert len(said) == 1      # AWS's own 8-GPU instance is left out, and said
    launch = launch_best(replace(rec, best=eight), cat, "skypilot", COMMAND)
    task = _task(sky, tmp_path, launch["text"])
    (res,) = task.resources
    assert task.num_nodes == 2 and res.accelerators == {"A100-80GB": 4}     # the machines priced


LAB_16 = ('[[gpu]]\nid = "h100-lab"\nbased_on = "h100-sxm"\n\n[[offer]]\nprovider = "lab"\ngpu = "h100-lab"\n'
          'count = 16\nprice_per_hour = 60.0\ncurrency = "USD"\nsource = "lab"\nchecked = "2026-12-01"\n')


def test_a_price_of_yours_for_16_gpus_is_quoted_with_max_gpus_16(tmp_path):
    cat = _catalog_file(tmp_path, LAB_16)
    rec = recommend(_scripted(), cat, job=JOB, gpu_ids=["h100-lab"], max_gpus=16, effective_batch=64)
    (sixteen,) = rec.options
    assert (sixteen.count, sixteen.nodes, sixteen.price_per_hour, sixteen.own_price) == (16, 2, 60.0, True)
    below = recommend(_scripted(), cat, job=JOB, gpu_ids=["h100-lab"], effective_batch=64)
    assert not below.options and "raise --max-gpus to 16" in below.nothing_reason


def test_hf_generate_layer_split_is_not_quoted_over_two_machines(catalog):
    w = Workload(model="hf:Qwen/Qwen2.5-7B", precision="bf16", mode="infer", seq_len=512, batch_size=1,
                 max_new_tokens=16)
    rec = recommend(model_for(w), catalog, job=JobSize(samples=100), provider="aws", gpu_ids=["h100-sxm"], max_gpus=16)
    sixteen = next(o for o in rec.options if o.count == 16)
    assert sixteen.exclusion.kind == "count" and "splits the layers over the GPUs of one machine" in sixteen.excluded_because


def test_a_vllm_replica_is_not_quoted_over_two_machines(catalog):
    # review: a 16-GPU vLLM option printed `vllm serve ... --tensor-parallel-size 16` "on 16x h100-sxm", a server
    # that cannot start over two machines (vLLM needs pipeline parallel over a Ray cluster there)
    w = Workload(model="hf:meta-llama/Meta-Llama-3-8B", precision="bf16", mode="infer", seq_len=512, batch_size=1,
                 max_new_tokens=16, engine="vllm")     # 32 heads: 16-way tensor parallel is no refusal of its own
    rec = recommend(model_for(w), catalog, job=JobSize(samples=100), provider="aws", gpu_ids=["h100-sxm"], max_gpus=16)
    sixteen = next(o for o in rec.options if o.count == 16)
    assert sixteen.exclusion.kind == "count" and "Ray cluster" in sixteen.excluded_because
    assert all(o.count <= 8 for o in rec.options if o.fits and o.exclusion is None)


def test_recommend_never_quotes_several_mig_slices_as_one_job(tmp_path):
    # review: a catalog offer of 2 slices was quoted "BEST a100-80gb-sxm4-mig-3g.40gb x2" (cannot_run was asked
    # about the model's one-GPU workload, not the option's count)
    from gpuwise.catalog import load_catalog

    path = tmp_path / "mig.toml"
    path.write_text('[[offer]]\nprovider = "lab"\ngpu = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"\ncount = 2\n'
                    'price_per_hour = 1.0\ncurrency = "CNY"\nsource = "our charge-back"\nchecked = "2026-12-01"\n')
    cat = load_catalog(path, user_file=False)
    rec = recommend(_scripted(), cat, job=JOB, gpu_ids=["a100-80gb-sxm4-mig-3g.40gb"], effective_batch=64)
    two = [o for o in rec.options if o.count == 2]
    assert two and all(o.exclusion is not None and "MIG slice" in o.excluded_because for o in two)


def test_counts_beyond_a_machine_are_doublings_up_to_max_gpus_and_the_largest_is_bounded():
    counts = recommend_mod.quoted_counts
    assert counts(8) == (1, 2, 4, 8) and counts(3) == (1, 2) and counts(40) == (1, 2, 4, 8, 16, 32)
    with pytest.raises(PlanError, match="--max-gpus 2048"):
        recommend(_scripted(), load_catalog(user_file=False), job=JOB, max_gpus=2048)


def test_cli_max_gpus_16_is_no_longer_refused(cli_json):
    out = cli_json(["recommend", "torchvision:resnet50", "--batch-size", "128", "--steps", "100", "--provider", "aws",
                    "--gpus", "h100-sxm", "--max-gpus", "16", "--effective-batch", "2048", "--no-remedies", "--json"])
    sixteen = next(o for o in out["options"] if o["count"] == 16)
    assert (sixteen["nodes"], sixteen["regime"], sixteen["likely_time_range_s"]) == (2, "multi-node", None)
