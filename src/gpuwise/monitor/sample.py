"""One GPU at one instant: the value every backend returns and every consumer reads.

Field names and units are the run log's columns (``gpuwise.runlog.GPU_SAMPLE_COLUMNS``), every one of them, so a
replayed log gives the samples that were written; ``None`` means the driver did not report the field (not
supported on this GPU, under MIG, or no permission), never zero.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from gpuwise.catalog.resolve import split_mig_name

MIG_LABEL = re.compile(r"(?P<gpu>\d+)/mig(?P<instance>\d+)")   # GpuSample.label of a MIG instance: "7/mig0"


@dataclass(frozen=True)
class GpuSample:
    t_s: float
    gpu_index: int
    uuid: str | None = None
    name: str | None = None
    utilization_pct: float | None = None     # share of the last sample period in which any kernel ran
    memory_util_pct: float | None = None     # share of time device memory was read or written
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    process_memory_bytes: int | None = None  # the watched processes' memory (see process_match)
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    sm_activity_pct: float | None = None     # GPM (Hopper+): share of SMs busy, averaged over time
    sm_occupancy_pct: float | None = None    # GPM: resident warps / maximum
    lost: int = 0                            # 1: the GPU fell off the bus (NVML GPU_IS_LOST)
    mig_index: int | None = None             # MIG instance on GPU ``gpu_index``; None for a whole GPU
    process_count: int | None = None         # compute processes NVML lists on this GPU
    process_match: str | None = None         # "pid", "all" (pid namespaces differ), None (unknown)
    gpu_instance_id: int | None = None       # a MIG instance's GPU instance ID (nvidia-smi mig -lgi), not its slot
    memory_reserved_bytes: int | None = None  # the driver's reserved memory (NVML memory info v2)

    @property
    def key(self) -> tuple[int, int | None]:
        """Identifies one device across samples: a whole GPU or one MIG instance of it."""
        return (self.gpu_index, self.mig_index)

    @property
    def label(self) -> str:
        """"3" for a whole GPU, "7/mig0" for a MIG instance (``MIG_LABEL`` reads it back)."""
        return f"{self.gpu_index}" if self.mig_index is None else f"{self.gpu_index}/mig{self.mig_index}"

    @property
    def memory_free_bytes(self) -> int | None:
        """NVML's free memory: total less used less the driver's reserved memory where known (v2's ``used``
        excludes it, so it is not free either)."""
        if self.memory_total_bytes is None or self.memory_used_bytes is None:
            return None
        return self.memory_total_bytes - self.memory_used_bytes - (self.memory_reserved_bytes or 0)

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    def with_time(self, t_s: float) -> "GpuSample":
        return replace(self, t_s=t_s)


_FIELD_NAMES = frozenset(f.name for f in fields(GpuSample))


def mig_profile(name: str | None) -> str:
    """The MIG profile at the end of an NVML MIG device name (``NVIDIA A100-SXM4-80GB MIG 1g.10gb``: ``1g.10gb``);
    '' where the name holds none. The catalog's rule (``split_mig_name``), which reads ``--gpu`` names too."""
    return split_mig_name(name or "")[1] or ""


def sample_from_row(row: Mapping[str, Any]) -> GpuSample:
    """A ``GpuSample`` from a run-log row or a JSON object; unknown keys are ignored, missing ones are None."""
    values = {k: v for k, v in row.items() if k in _FIELD_NAMES}
    values.setdefault("t_s", 0.0)
    values.setdefault("gpu_index", 0)
    lost = values.get("lost") or 0
    # 0/1 (or a bool) as the log writes it; anything else stays as given, for sample_problem to name
    values["lost"] = int(lost) if isinstance(lost, (bool, int)) or (isinstance(lost, float) and lost.is_integer()) else lost
    return GpuSample(**values)
