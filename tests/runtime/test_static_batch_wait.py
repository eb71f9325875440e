"""HF generate at a request rate (static batches, gpuwise.runtime.serving_load): the queueing formula against a
discrete-event simulation of the server it describes, on the real curves (gpuwise.plan.llm.serving_curve) of
Qwen2.5-7B, 1,024 prompt + 256 new tokens. When a batch ends the server takes up to B waiting requests; with
none waiting it starts on the next arrival; a batch of b takes T(b) from its prefill to its last token."""

import numpy as np
import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import kv_bytes_per_element, serving_curve
from gpuwise.runtime.serving_load import ServingCurve, capacity_per_s, load_point
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

MODEL = "hf:Qwen/Qwen2.5-7B"
REQUESTS = 40_000


def _static_curve(gpu: str, batch: int) -> ServingCurve:
    w = Workload(MODEL, mode="infer", seq_len=1024, max_new_tokens=256, batch_size=batch, engine="hf",
                 precision="bf16")
    return serving_curve(load_arch(MODEL), w, resolve_gpu(load_catalog(user_file=False), gpu),
                         kv_bytes_per_element=kv_bytes_per_element(w, "auto"))


def _simulate(curve: ServingCurve, rate_per_s: float, seed: int = 0) -> tuple[float, float]:
    """Mean time to first token and busy share of the static-batch server, the first tenth dropped (warm-up)."""
    arrivals_s = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate_per_s, REQUESTS))
    clock_s, first, ttft_s, busy_s, start_s = 0.0, 0, [], 0.0, None
    warm = REQUESTS // 10
    while first < REQUESTS:
        clock_s = max(clock_s, arrivals_s[first])
        last = min(int(np.searchsorted(arrivals_s, clock_s, side="right")), first + curve.max_batch)
        batch = last - first
        if first >= warm:
            start_s = clock_s if start_s is None else start_s
            busy_s += curve.batch_time_at(batch)
        ttft_s.extend(clock_s + curve.first_token_at(batch) - arrivals_s[first:last])
        clock_s += curve.batch_time_at(batch)
        first = last
    return float(np.mean(ttft_s[warm:])), busy_s / (clock_s - start_s)


@pytest.mark.parametrize("gpu,batch", [("h100-sxm", 32), ("l40s", 8)])
@pytest.mark.parametrize("share_of_capacity", [0.02, 0.2, 0.5, 0.8])
def test_time_to_first_token_under_static_batches_matches_a_simulation_of_them(gpu, batch, share_of_capacity):
    curve = _static_curve(gpu, batch)
    rate = capacity_per_s(curve) * share_of_capacity
    point = load_point(curve, rate)
    simulated_ttft_s, simulated_busy = _simulate(curve, rate)
    assert point.ttft_s == pytest.approx(simulated_ttft_s, rel=0.15)
    assert point.utilisation == pytest.approx(simulated_busy, rel=0.05)


def test_a_request_under_static_batches_waits_about_one_batch_not_a_queue_of_them():
    """Below saturation every waiting request joins the next batch: the wait is at most the rest of one batch
    and its prefill, however many requests a batch holds."""
    curve = _static_curve("h100-sxm", 32)
    point = load_point(curve, capacity_per_s(curve) / 2)
    batch_s = curve.batch_time_at(point.decode_batch)
    assert curve.first_token_at(point.decode_batch) < point.ttft_s < batch_s + curve.first_token_at(point.decode_batch)


def test_a_replica_holding_one_sequence_waits_as_an_md1_queue():
    """B = 1: one request after another, each taking T; Pollaczek-Khinchine with a fixed service time."""
    one = ServingCurve(engine="hf", new_tokens=100, batches=(1,), first_token_s=(0.1,), decode_step_s=(0.01,),
                       max_batch=1)
    service_s, rate = one.batch_time_at(1), 0.6
    busy = rate * service_s
    point = load_point(one, rate)
    assert point.ttft_s == pytest.approx(0.1 + busy * service_s / (2 * (1 - busy)))
    assert point.ttft_s == pytest.approx(_simulate(one, rate)[0], rel=0.05)
