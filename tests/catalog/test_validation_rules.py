"""The sanity rules catch the mistakes datasheets invite (sparse rates, unit mix-ups, missing precisions)."""

from __future__ import annotations

from dataclasses import replace

from gpuwise.catalog import builtin_catalog, resolve_gpu
from gpuwise.catalog.validate import gpu_problems, offer_problems

CATALOG = builtin_catalog()
A100 = resolve_gpu(CATALOG, "a100-40gb")
V100 = resolve_gpu(CATALOG, "v100-16gb-sxm2")


def _keys(gpu) -> set[str]:
    return {key for key, _ in gpu_problems(gpu)}


def _with_rates(gpu, **rates):
    return replace(gpu, peak_tflops={**gpu.peak_tflops, **rates})


def test_sparse_headline_copied_as_dense_is_refused():
    # NVIDIA prints A100 bf16 as 624 (2:4 sparse); 108 SMs at ~1.41 GHz cannot issue that dense.
    problems = gpu_problems(_with_rates(A100, fp16=624, bf16=624, int8=1248))
    assert ("peak_tflops.fp16" in {k for k, _ in problems})
    assert any("sparse" in what for _, what in problems)


def test_rates_must_rise_as_precision_falls():
    assert "peak_tflops.bf16" in _keys(_with_rates(resolve_gpu(CATALOG, "h100-sxm"), bf16=2500.0))
    assert "peak_tflops.tf32" in _keys(_with_rates(A100, tf32=400.0))
    assert "peak_tflops.fp32" in _keys(_with_rates(A100, fp32=200.0))


def test_architecture_without_bf16_tf32_or_fp8_may_not_claim_it():
    assert "peak_tflops.bf16" in _keys(_with_rates(V100, bf16=125.0))
    assert "peak_tflops.tf32" in _keys(_with_rates(V100, tf32=60.0))
    assert "peak_tflops.fp8" in _keys(_with_rates(A100, fp8=600.0))


def test_unit_mix_ups_are_refused():
    assert "memory_bytes" in _keys(replace(A100, memory_bytes=40))  # GB typed for bytes
    assert "l2_bytes" in _keys(replace(A100, l2_bytes=40 * 2**30))  # GiB for MiB
    assert "nvml_memory_bytes" in _keys(replace(A100, nvml_memory_bytes=40 * 10**6))  # MB for bytes
    assert "memory_bandwidth_gbs" in _keys(replace(A100, memory_bandwidth_gbs=1.555))  # TB/s for GB/s
    assert "peak_tflops.fp32" in _keys(_with_rates(A100, fp32=19500.0))  # GFLOPS for TFLOPS


def test_missing_or_nonsense_fields_are_refused():
    assert "memory_bytes" in _keys(replace(A100, memory_bytes=0))
    assert "sm_count" in _keys(replace(A100, sm_count=-1))
    assert "arch" in _keys(replace(A100, arch="ampere2"))
    assert "compute_capability" in _keys(replace(A100, compute_capability="8.1"))
    assert "source" in _keys(replace(A100, source=" "))
    assert "pcie_gen" in _keys(replace(A100, pcie_gen=7))
    assert "peak_tflops.fp32" in _keys(_with_rates(A100, fp32=None))
    assert "peak_tflops" in _keys(_with_rates(A100, fp4=10.0))


def test_offer_rules():
    offer = next(o for o in CATALOG.offers if o.provider == "autodl")
    assert offer_problems(offer) == []
    assert offer_problems(replace(offer, price_per_hour=-1.0))[0][0] == "price_per_hour"
    assert offer_problems(replace(offer, count=0))[0][0] == "count"
    assert offer_problems(replace(offer, currency="yuan"))[0][0] == "currency"
    assert offer_problems(replace(offer, checked="last week"))[0][0] == "checked"
