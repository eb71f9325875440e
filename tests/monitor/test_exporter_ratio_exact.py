"""The exporter turns percentages into DCGM's 0..1 ratios by dividing by 100: a GPM SM activity of 70 % is
exported as 0.7 (trial: ``DCGM_FI_PROF_SM_ACTIVE ... 0.7000000000000001``, from 70 × 0.01), as dcgm-exporter
and a dashboard's threshold of 0.7 expect."""

from __future__ import annotations

import urllib.request

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor.exporter import serve

GIB = 2**30
ARTIFACT_PCTS = (35, 41, 57, 69, 70, 82, 94)    # p × 0.01 != p / 100 in binary floating point


def _frames(pct: float) -> list[list[dict]]:
    gpu = {"gpu_index": 0, "uuid": "GPU-h100", "name": "NVIDIA H100 80GB HBM3", "utilization_pct": pct,
           "memory_used_bytes": 10 * GIB, "memory_total_bytes": 80 * GIB,
           "sm_activity_pct": pct, "sm_occupancy_pct": pct}
    mig = {"gpu_index": 0, "mig_index": 0, "gpu_instance_id": 3, "uuid": "MIG-h100",
           "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb", "utilization_pct": pct,
           "memory_used_bytes": 5 * GIB, "memory_total_bytes": 40 * GIB}
    return [[gpu, mig]]


def _scrape_values(pct: float) -> dict[str, list[str]]:
    sampler = Sampler(ReplayBackend(_frames(pct)))
    sampler.sample_once()
    server, _ = serve(sampler, port=0, bind="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=60) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0]
            values.setdefault(name, []).append(line.rsplit(" ", 1)[1])
    return values


def test_gpm_and_mig_busy_ratios_are_the_percentage_over_100_exactly():
    for pct in ARTIFACT_PCTS:
        values = _scrape_values(pct)
        expected = [repr(pct / 100)]
        for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
            assert values[name] == expected, (name, pct, values[name])
        assert values["DCGM_FI_DEV_GPU_UTIL"] == [repr(float(pct))]
