"""A MIG instance's busy share (NVML has none per instance; GPM's GRAPHICS_UTIL gives it on Hopper) is exported
as dcgm-exporter exports it per instance, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a ratio 0..1), never as
``DCGM_FI_DEV_GPU_UTIL``, which both exporters give for whole GPUs only (trial 4: the instance's share came out
as ``DCGM_FI_DEV_GPU_UTIL``, so a dashboard averaging it by ``gpu`` mixed instances and the whole GPU)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor.exporter import SamplerCollector

GIB = 2**30


def _h100_with_one_mig_instance() -> list[dict]:
    return [
        {"gpu_index": 0, "uuid": "GPU-h100", "name": "NVIDIA H100 80GB HBM3", "memory_used_bytes": 10 * GIB,
         "memory_total_bytes": 80 * GIB, "power_w": 300.0},
        {"gpu_index": 0, "mig_index": 0, "gpu_instance_id": 3, "uuid": "MIG-1g", "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
         "utilization_pct": 40.0, "memory_used_bytes": 4 * GIB, "memory_total_bytes": 10 * GIB},
        {"gpu_index": 1, "uuid": "GPU-other", "name": "NVIDIA H100 80GB HBM3", "utilization_pct": 75.0,
         "memory_used_bytes": 1 * GIB, "memory_total_bytes": 80 * GIB},
    ]


def _scraped() -> dict[str, list]:
    sampler = Sampler(ReplayBackend([_h100_with_one_mig_instance()]))
    sampler.sample_once()
    registry = CollectorRegistry()
    registry.register(SamplerCollector(sampler, hostname="node"))
    text = generate_latest(registry).decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_a_mig_instance_busy_share_is_gr_engine_active_as_a_ratio_not_gpu_util():
    metrics = _scraped()
    gpu_util = {(s.labels["gpu"], s.labels["GPU_I_ID"]): s.value for s in metrics["DCGM_FI_DEV_GPU_UTIL"]}
    engine = {(s.labels["gpu"], s.labels["GPU_I_ID"]): s.value for s in metrics["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]}
    assert gpu_util == {("1", ""): 75.0}           # whole GPUs only, in %
    assert engine == {("0", "3"): 0.4}              # the instance, as a ratio, with its GPU instance ID
