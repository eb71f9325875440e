"""The devices of a log a job could see: its CUDA_VISIBLE_DEVICES (a gpuwise run log records it) read as CUDA reads
it (``gpuwise.visible_devices``), against the devices the log sampled. NVML lists every GPU of the node, whatever
the job may use; on a shared node the others are another job's, neither this one's nor idle.

The report's policy: an entry naming no device of the log ends the list, as CUDA ignores it and those after it; a
GPU brings its MIG instances.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwise.visible_devices import VisibleEntry, parse_visible_devices, uuid_named
from gpuwise.report.sample_table import DeviceColumns
from gpuwise.report.sources import RUN_LOG_SOURCE, UsageLog
from gpuwise.runlog import read_visible_devices


def cuda_visible_labels(value: str, devices: Sequence[DeviceColumns]) -> frozenset[str]:
    """The labels of the devices CUDA_VISIBLE_DEVICES=``value`` shows a job, as CUDA reads it: comma-separated GPU
    indices (NVML's, which CUDA's match unless CUDA_DEVICE_ORDER=FASTEST_FIRST ranks unlike GPUs apart), GPU and MIG
    UUIDs, each possibly cut to a prefix naming one device; a GPU brings its MIG instances. The first entry that
    names no device of ``devices`` ends the list, as CUDA ignores it and those after it."""
    labels: set[str] = set()
    for entry in parse_visible_devices(value):
        named = _devices_named(entry, devices)
        if not named:
            break
        labels |= named
    return frozenset(labels)


def _devices_named(entry: VisibleEntry, devices: Sequence[DeviceColumns]) -> frozenset[str]:
    """The labels of the devices one CUDA_VISIBLE_DEVICES entry names ("3", "GPU-8932f937…", "MIG-…"; the older
    "MIG-GPU-<uuid>/<gi>/<ci>": its GPU's instances, as the log does not say which is which); none when it names no
    device, or several UUIDs."""
    if entry.index is not None:
        gpu_index = entry.index
    else:
        uuid = uuid_named(entry.uuid_prefix or "", [d.uuid for d in devices])
        device = next((d for d in devices if uuid is not None and d.uuid == uuid), None)
        if device is None:
            return frozenset()
        if device.mig_index is not None:
            return frozenset({device.label})
        gpu_index = device.gpu_index
    return frozenset(d.label for d in devices if d.gpu_index == gpu_index)


def job_visible_labels(log: UsageLog, devices: Sequence[DeviceColumns]) -> frozenset[str] | None:
    """The labels of the devices of ``devices`` the job of a gpuwise run log could see (its ``cuda_visible_devices``:
    every one when CUDA_VISIBLE_DEVICES was unset); None where the log does not record it (other logs, older run
    logs) or the variable names none of them (another machine's UUIDs, an empty value)."""
    recorded, value = read_visible_devices(log.meta) if log.source == RUN_LOG_SOURCE else (False, None)
    if not recorded:
        return None
    labels = frozenset(d.label for d in devices) if value is None else cuda_visible_labels(value, devices)
    return labels or None
