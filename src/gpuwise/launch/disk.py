"""The disk a launched job needs on each node (a server's: each replica): the system and packages, the model's
weights, and the guard's checkpoints (training), so that a SkyPilot task asks for it (``resources.disk_size``)
instead of SkyPilot's default, which a large model's checkpoints outgrow: one checkpoint of a 70B full fine-tune
(float32 weights and Adam's two states) is 0.85 TB, and the guard keeps three and writes a fourth before it prunes.

The model is counted as the larger of the weights the job holds and the checkpoint it downloads: a QLoRA base
holds its block weights in nf4 (8B: 5.9 GB) but downloads the 16-bit checkpoint they are quantized from as they
load (16 GB; 70B: 141 GB).

The dataset is not counted: gpuwise knows how many samples the job reads, not their bytes on disk (a server
reads none, and its note does not mention one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GB = 10**9                       # SkyPilot's disk_size is in GB
MB = 10**6                       # a small model's weights are said in MB (ResNet-18: 47 MB, not 0.0 GB)
SKYPILOT_DEFAULT_DISK_GB = 256   # sky/resources.py DEFAULT_DISK_SIZE_GB (SkyPilot 0.14): never asked below it
SYSTEM_BYTES = 100 * GB          # the image, CUDA, torch and the job's packages, pip's and HF's caches
# checkpoints on disk at once: the guard's default keep (3, gpuwise.guard.checkpoint.CheckpointStore) plus the
# one being written, which lands before the oldest is pruned
CHECKPOINTS_ON_DISK = 4
DISK_STEP_GB = 50                # disk_size is rounded up to a multiple of this
# bytes a parameter of a checkpoint stored in a config's torch_dtype; one that names none is taken as 16-bit, the
# dtype a decoder LLM's default precision assumes (gpuwise.workload.precision.default_precision)
CHECKPOINT_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
UNNAMED_CHECKPOINT_BYTES = 2


def checkpoint_bytes_per_param(dtype: str | None) -> int:
    """Bytes a parameter of a checkpoint stored in ``dtype`` (a config's ``torch_dtype``, ``torch.`` prefix or not)."""
    return CHECKPOINT_DTYPE_BYTES.get(str(dtype or "").removeprefix("torch."), UNNAMED_CHECKPOINT_BYTES)


@dataclass(frozen=True)
class DiskNeed:
    """Bytes on one node's disk: ``model_bytes`` (the model's weights: the checkpoint as downloaded, or as the job
    holds them where that is more) and ``checkpoint_bytes`` (one checkpoint: weights and optimizer state; 0 for
    serving), beside ``SYSTEM_BYTES``."""

    model_bytes: int
    checkpoint_bytes: int = 0

    @classmethod
    def of(cls, weights_bytes: int, optimizer_bytes: int, *, training: bool, downloaded_bytes: int = 0) -> "DiskNeed":
        """The need of a job whose whole model (one GPU's worth, unsharded) holds ``weights_bytes`` of weights
        and ``optimizer_bytes`` of optimizer state: a checkpoint holds both. ``downloaded_bytes``: the checkpoint
        it downloads (0: not known), more than it holds where the weights are quantized as they load."""
        return cls(int(max(weights_bytes, downloaded_bytes)), int(weights_bytes + optimizer_bytes) if training else 0)

    @property
    def total_bytes(self) -> int:
        return SYSTEM_BYTES + self.model_bytes + CHECKPOINTS_ON_DISK * self.checkpoint_bytes

    @property
    def disk_size_gb(self) -> int:
        """The disk to ask for, in GB: the need rounded up to ``DISK_STEP_GB``, and never below SkyPilot's
        default (what the task would get without asking)."""
        need_gb = math.ceil(self.total_bytes / GB / DISK_STEP_GB) * DISK_STEP_GB
        return max(SKYPILOT_DEFAULT_DISK_GB, need_gb)

    def note(self, *, machine: str, reads_dataset: bool = True) -> str:
        """The size in words, with what it is made of, for the launch's header and ``launch.notes``; ``machine``:
        what one of the launch's machines is called (``plan.machine_word``: a node, a server's replica);
        ``reads_dataset``: the job reads a dataset, which the size leaves out and says so (a server reads none)."""
        parts = [f"~{_size(SYSTEM_BYTES)} for the system and packages", f"{_size(self.model_bytes)} of model weights"]
        if self.checkpoint_bytes:
            parts.append(f"{CHECKPOINTS_ON_DISK} checkpoints of {_size(self.checkpoint_bytes)} of weights and "
                         f"optimizer state (the guard keeps 3 and writes the next before it prunes)")
        left_out = ["not the dataset"] if reads_dataset else []
        if self.checkpoint_bytes:
            left_out.append("less where the checkpoint directory is on other storage (a bucket, a shared file system)")
        return "; ".join([f"each {machine} needs ~{_size(self.total_bytes)} of disk: {', '.join(parts)}", *left_out,
                          f"a SkyPilot task asks for disk_size {self.disk_size_gb} GB"])


def _size(n_bytes: int) -> str:
    """Disk in SkyPilot's units (GB, 10**9 bytes; MB below one GB), not memory's GiB."""
    if n_bytes < GB:
        return f"{n_bytes / MB:,.0f} MB"
    return f"{n_bytes / GB:,.1f} GB" if n_bytes < 10 * GB else f"{n_bytes / GB:,.0f} GB"
