"""LLM serving at a request rate (gpuwise.runtime.serving_load): invariants of the queueing, not figures.
The curves are the real ones (gpuwise.plan.llm.serving_curve) of Qwen2.5-7B, 1,024 prompt + 256 new tokens."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import kv_bytes_per_element, serving_curve
from gpuwise.runtime.model import RuntimeError_
from gpuwise.runtime.serving_load import ServingCurve, capacity_per_s, load_point, serving_load
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

MODEL = "hf:Qwen/Qwen2.5-7B"


def _curve(engine: str, gpu: str = "h100-sxm", batch: int = 32, count: int = 1) -> ServingCurve:
    w = Workload(MODEL, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=batch, engine=engine,
                 precision="bf16", num_gpus=count)
    return serving_curve(load_arch(MODEL), w, resolve_gpu(load_catalog(user_file=False), gpu),
                         kv_bytes_per_element=kv_bytes_per_element(w, "auto"))


@pytest.fixture(scope="module", params=["vllm", "hf"])
def curve(request):
    return _curve(request.param)


def _rates(curve, points=12):
    top = capacity_per_s(curve)
    return [top * (k + 0.5) / points for k in range(points)]


def test_utilisation_rises_and_the_latencies_never_fall_as_the_rate_rises(curve):
    points = [load_point(curve, r) for r in _rates(curve)]
    assert all(p.carried for p in points)
    for low, high in zip(points, points[1:]):
        assert high.utilisation > low.utilisation
        assert high.ttft_s >= low.ttft_s * (1 - 1e-9)
        assert high.tpot_s >= low.tpot_s * (1 - 1e-9)
        assert high.concurrency > low.concurrency
        assert high.decode_batch >= low.decode_batch
    assert all(0 < p.utilisation < 1 for p in points)


def test_at_a_vanishing_rate_a_request_sees_its_own_prefill_and_the_batch_1_decode_step(curve):
    idle = load_point(curve, 1e-6)
    assert idle.ttft_s == pytest.approx(curve.first_token_at(1), rel=1e-3)
    assert idle.tpot_s == pytest.approx(curve.decode_at(1), rel=1e-3)
    assert idle.decode_batch == pytest.approx(1.0, abs=1e-3)
    assert idle.utilisation < 1e-3 and idle.concurrency < 1e-3


def test_littles_law_holds_for_the_requests_in_flight(curve):
    rate = capacity_per_s(curve) / 2
    p = load_point(curve, rate)
    assert p.concurrency == pytest.approx(rate * (p.ttft_s + curve.new_tokens * p.tpot_s))


def test_past_its_capacity_one_deployment_does_not_carry_the_rate_and_replicas_step_up(curve):
    top = capacity_per_s(curve)
    assert not load_point(curve, top * 1.01).carried
    assert serving_load(curve, top * 0.5).replicas == 1
    assert serving_load(curve, top * 1.5).replicas == 2
    assert serving_load(curve, top * 7.5).replicas == 8
    counts = [serving_load(curve, top * k / 4).replicas for k in range(1, 40)]
    assert counts == sorted(counts)                     # never fewer replicas for more load
    many = serving_load(curve, top * 7.5)
    assert many.concurrency == pytest.approx(8 * many.per_replica.concurrency)


def test_latency_targets_add_replicas_until_a_request_sees_them_where_they_can_be_met(curve):
    rate = capacity_per_s(curve) * 0.9
    loaded = serving_load(curve, rate)
    target = (loaded.ttft_s + curve.first_token_at(1)) / 2      # between the idle and the loaded figure
    held = serving_load(curve, rate, max_ttft_s=target)
    assert held.replicas > loaded.replicas == held.replicas_to_carry
    assert held.ttft_s <= target
    assert load_point(curve, rate / (held.replicas - 1)).ttft_s > target    # the fewest that meet it
    # a target below what even an idle replica sees: no replica count helps, the fewest that carry are kept
    hopeless = serving_load(curve, rate, max_tpot_s=curve.decode_at(1) / 2)
    assert hopeless.replicas == loaded.replicas and hopeless.tpot_s > curve.decode_at(1) / 2


def test_continuous_batching_carries_more_than_static_batches_on_the_same_gpu():
    for gpu in ("h100-sxm", "a100-80gb-sxm4", "rtx-4090"):
        vllm, hf = _curve("vllm", gpu), _curve("hf", gpu)
        assert capacity_per_s(vllm) > capacity_per_s(hf)
        rate = capacity_per_s(hf) / 2        # a rate both carry: vLLM's first token comes far sooner
        assert load_point(vllm, rate).ttft_s < load_point(hf, rate).ttft_s


def test_tensor_parallelism_raises_what_one_replica_carries():
    assert capacity_per_s(_curve("vllm", count=2)) > capacity_per_s(_curve("vllm", count=1))


def test_a_static_batch_is_the_batch_size_asked_or_the_largest_that_fits():
    assert _curve("hf", batch=8).max_batch == 8
    small = _curve("hf", "rtx-4090", batch=4096)
    assert 1 <= small.max_batch < 4096 and "largest static batch" in small.batch_limit


def test_a_replica_holding_one_sequence_serves_one_request_after_another():
    one = ServingCurve(engine="vllm", new_tokens=100, batches=(1,), first_token_s=(0.1,), decode_step_s=(0.01,),
                       max_batch=1)
    assert capacity_per_s(one) == pytest.approx(1 / (0.1 + 100 * 0.01))
    p = load_point(one, 0.5)
    assert p.carried and p.utilisation == pytest.approx(0.5 * 1.1) and p.tpot_s == 0.01


@pytest.mark.parametrize("bad", [dict(batches=(2, 4)), dict(batches=(1, 3)), dict(engine="tgi"),
                                 dict(first_token_s=(0.1,))])
def test_a_malformed_curve_is_refused(bad):
    args = dict(engine="vllm", new_tokens=10, batches=(1, 4), first_token_s=(0.1, 0.1), decode_step_s=(0.01, 0.02),
                max_batch=4)
    with pytest.raises(RuntimeError_):
        ServingCurve(**{**args, **bad})
    with pytest.raises(RuntimeError_):
        load_point(ServingCurve(**args), 0.0)
