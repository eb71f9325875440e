"""Continuous batching sizes a replica on a quantile of the sequences decoding at once, not their mean (a new
user's trial): Llama-3-8B at 20 requests/s on runpod was quoted as 9 rtx-a5000 replicas at 98% load, each with
room for 41 sequences, a mean of ~40 decoding; under Poisson arrivals that count is Poisson (M/G/infinity), sd
~sqrt(mean), so the cache was full about 40% of the time (vLLM queues and preempts). A load whose mean batch fits
but whose 99th percentile does not is not carried by one replica."""

from __future__ import annotations

import pytest
from scipy.stats import poisson

from gpuwise.runtime.serving_load import (CONCURRENCY_QUANTILE, ServingCurve, capacity_per_s, load_point,
                                          poisson_quantile, serving_load)

N, PREFILL_S = 256, 0.05
LIMIT = 41      # the trial's rtx-a5000: 41 sequences of the mean context in vLLM's KV cache


def _curve(max_batch: int = LIMIT) -> ServingCurve:
    """A replica whose decode step grows with the batch (as a bandwidth-bound GPU's does)."""
    return ServingCurve(engine="vllm", new_tokens=N, batches=(1, max_batch), first_token_s=(PREFILL_S, PREFILL_S),
                        decode_step_s=(0.030, 0.030 + 0.0005 * (max_batch - 1)), max_batch=max_batch)


def test_a_load_whose_mean_batch_fits_but_whose_99th_percentile_does_not_needs_another_replica():
    curve = _curve()
    rate = curve.rate_at_batch(LIMIT - 1)          # a mean of 40 sequences a request decodes beside: fits 41
    others = LIMIT - 2
    assert poisson.cdf(LIMIT - 1, others) < 0.75       # ... but the cache is full over a quarter of the time
    assert not load_point(curve, rate).carried
    assert serving_load(curve, rate).replicas == 2     # was 1, at 98% load


def test_a_carried_load_finds_a_free_slot_99_times_in_100():
    curve = _curve()
    top = capacity_per_s(curve)
    at_capacity = load_point(curve, top * (1 - 1e-9))
    assert at_capacity.carried and not load_point(curve, top * 1.001).carried
    # the sequences beside an arriving request are Poisson(b - 1): it finds one of the B slots free
    assert poisson.cdf(LIMIT - 1, at_capacity.decode_batch - 1) == pytest.approx(CONCURRENCY_QUANTILE, abs=1e-6)
    b = at_capacity.decode_batch
    assert b + 2 * (b - 1) ** 0.5 < LIMIT       # two standard deviations below the hard limit
    for share in (0.2, 0.5, 0.9, 0.999):
        point = load_point(curve, top * share)
        assert point.decode_batch_at_quantile <= LIMIT
        assert point.decode_batch_at_quantile == 1 + poisson.ppf(CONCURRENCY_QUANTILE, point.decode_batch - 1)


def test_the_quantile_is_scipys_poisson_quantile():
    for mean in (0.01, 0.5, 3.0, 27.6, 39.0, 220.0, 1000.0):
        assert poisson_quantile(mean, CONCURRENCY_QUANTILE) == poisson.ppf(CONCURRENCY_QUANTILE, mean)
    assert poisson_quantile(0.0, CONCURRENCY_QUANTILE) == 0


def test_static_batches_are_unchanged_a_full_batch_waits():
    """HF generate's static batch never holds more than B: requests wait for the next batch, nothing is
    preempted, so its capacity is still B a batch."""
    hf = ServingCurve(engine="hf", new_tokens=N, batches=(1, LIMIT), first_token_s=(PREFILL_S, 1.0),
                      decode_step_s=(0.030, 0.050), max_batch=LIMIT)
    assert capacity_per_s(hf) == pytest.approx(LIMIT / hf.batch_time_at(LIMIT))
    assert load_point(hf, capacity_per_s(hf) * 0.5).decode_batch_at_quantile is None


def test_the_output_states_the_assumption(cli_json):
    out = cli_json(["estimate", "hf:meta-llama/Meta-Llama-3-8B", "--mode", "infer", "--seq-len", "1024",
                    "--max-new-tokens", "256", "--request-rate", "20", "--gpu", "rtx-a5000", "--json"])
    load = out["inference"]["at_load"]
    assert load["concurrency_quantile"] == CONCURRENCY_QUANTILE
    assert load["decode_batch_at_quantile"] <= 41 and load["replicas"] >= 10      # was 9 replicas at 98% load
    assert any("99% of the time" in n for n in out["memory"]["notes"])
