"""The real NvmlBackend over a stand-in pynvml (this machine has no driver) that raises pynvml's errors."""

from __future__ import annotations

import pynvml
import pytest

from gpuwise.monitor import NoDriverError, open_backend
from gpuwise.monitor.nvml import NvmlBackend

GIB = 2**30


def test_without_a_driver_nvml_backend_raises_one_line_no_driver_error():
    # This machine really has no libnvidia-ml: the real pynvml fails in nvmlInit.
    try:
        pynvml.nvmlInit()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError:
        pass
    with pytest.raises(NoDriverError) as info:
        open_backend("nvml")
    assert "\n" not in str(info.value) and "NVML" in str(info.value)


def test_failed_init_becomes_no_driver_error(fake_nvml):
    with pytest.raises(NoDriverError, match="Driver Not Loaded"):
        NvmlBackend(fake_nvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))


def test_every_field_is_read_with_units_converted(fake_nvml, fake_gpu):
    gpu = fake_gpu(procs=[(4_000_001, 3 * GIB), (4_000_002, 2 * GIB)])
    backend = NvmlBackend(fake_nvml([gpu]))
    (s,) = backend.sample()
    assert (s.utilization_pct, s.memory_util_pct) == (37.0, 12.0)
    assert (s.memory_used_bytes, s.memory_total_bytes) == (12 * GIB, 40 * GIB)
    assert s.power_w == 180.0 and s.temperature_c == 55.0
    assert (s.sm_clock_mhz, s.mem_clock_mhz) == (1410.0, 1215.0)
    assert s.pcie_tx_bytes_per_s == 2048 * 1024
    assert s.process_memory_bytes == 5 * GIB and s.process_count == 2 and s.process_match == "all"
    assert s.lost == 0 and s.mig_index is None
    assert backend.driver_version() == "550.54.15"


def test_unsupported_fields_become_none_and_the_rest_is_still_read(fake_nvml, fake_gpu):
    gpu = fake_gpu(util=None, power_mw=None, temperature_c=None, clocks_mhz=None, pcie_kib_per_s=None, procs=None)
    (s,) = NvmlBackend(fake_nvml([gpu])).sample()
    assert s.utilization_pct is None and s.power_w is None and s.temperature_c is None
    assert s.sm_clock_mhz is None and s.pcie_rx_bytes_per_s is None
    assert s.process_memory_bytes is None and s.process_count is None
    assert s.memory_used_bytes == 12 * GIB  # memory still read


def test_memory_falls_back_to_the_v1_call_when_the_driver_lacks_v2(fake_nvml, fake_gpu):
    nv = fake_nvml([fake_gpu(memory_v2=False)])
    backend = NvmlBackend(nv)
    backend.sample()
    backend.sample()
    assert nv.calls.count("memory_v2") == 1  # tried once, then remembered
    assert nv.calls.count("memory") == 2


def test_a_gpu_that_falls_off_the_bus_is_marked_lost_and_the_others_go_on(fake_nvml, fake_gpu):
    gpus = [fake_gpu(uuid="GPU-a"), fake_gpu(uuid="GPU-b", util=(80, 40))]
    nv = fake_nvml(gpus)
    backend = NvmlBackend(nv)
    assert [s.lost for s in backend.sample()] == [0, 0]
    gpus[0].lost = True
    calls_before = len(nv.calls)
    first, second = backend.sample()
    assert first.lost == 1 and first.uuid == "GPU-a" and first.memory_used_bytes is None
    assert second.lost == 0 and second.utilization_pct == 80.0
    calls_lost_sample = len(nv.calls) - calls_before
    # From then on the lost GPU is not asked again (each NVML call on it would fail or hang).
    calls_before = len(nv.calls)
    first, _ = backend.sample()
    assert first.lost == 1 and len(nv.calls) - calls_before < calls_lost_sample


def test_mig_instances_are_their_own_devices_with_busy_share_from_gpm(fake_nvml, fake_gpu):
    gpm = {pynvml.NVML_GPM_METRIC_SM_UTIL: 41.0, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 22.0,
           pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: 63.0}
    slices = [
        fake_gpu(name="NVIDIA H100 80GB HBM3 MIG 3g.40gb", uuid="MIG-1", util=None, total_bytes=40 * GIB,
                 used_bytes=9 * GIB, gpu_instance_id=1, gpm=gpm, power_mw=None, procs=[(4_000_003, 8 * GIB)]),
        fake_gpu(name="NVIDIA H100 80GB HBM3 MIG 3g.40gb", uuid="MIG-2", util=None, total_bytes=40 * GIB,
                 used_bytes=0, gpu_instance_id=2, gpm={}, power_mw=None, procs=[]),
    ]
    parent = fake_gpu(name="NVIDIA H100 80GB HBM3", util=None, total_bytes=80 * GIB, mig=slices, gpm=gpm)
    backend = NvmlBackend(fake_nvml([parent]), slow_period_s=0.0)
    backend.sample()  # GPM rates need two samples
    whole, mig0, mig1 = backend.sample()
    assert whole.mig_index is None and mig0.mig_index == 0 and mig1.mig_index == 1
    assert mig0.label == "0/mig0" and mig0.memory_total_bytes == 40 * GIB
    assert mig0.utilization_pct == 63.0 and mig0.sm_activity_pct == 41.0 and mig0.sm_occupancy_pct == 22.0
    assert mig1.utilization_pct is None and mig1.sm_activity_pct is None  # GPM without these metrics
    assert mig0.power_w == 180.0  # the board's power, read from the parent
    assert mig0.process_memory_bytes == 8 * GIB and mig1.process_memory_bytes is None


def test_process_memory_counts_only_the_watched_pids_when_they_are_visible(fake_nvml, fake_gpu):
    import os

    me = os.getpid()
    gpu = fake_gpu(procs=[(me, 3 * GIB), (1, 5 * GIB)])  # pid 1 exists here but is not ours
    (s,) = NvmlBackend(fake_nvml([gpu])).sample(watch_pids={me})
    assert s.process_memory_bytes == 3 * GIB and s.process_match == "pid"


def test_close_shuts_nvml_down(fake_nvml, fake_gpu):
    nv = fake_nvml([fake_gpu()])
    NvmlBackend(nv).close()
    assert nv.shutdown
