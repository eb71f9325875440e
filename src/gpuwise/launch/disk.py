"""The disk a launched job needs on each node (a server's: each replica): the system and packages, the model's
weights, and the guard's checkpoints (training), so that a SkyPilot task asks for it (``resources.disk_size``)
instead of SkyPilot's default, which a large model's checkpoints outgrow: one checkpoint of a 70B full fine-tune
(float32 weights and Adam's two states) is 0.85 TB, and the guard keeps three and writes a fourth before it prunes.
A job that freezes a base (``--finetune lora``, ``qlora``, ``freeze``) checkpoints its trained parameters only, with
their optimizer state: the guard does not save frozen parameters that never changed (docs/guard.md, "What is
saved"), so an 8B LoRA's checkpoint is its adapters' ~0.5 GB with AdamW's state, not the base's 16 GB; the base is
counted once, as the model's weights. Not under FSDP or DeepSpeed (any ZeRO stage), whose checkpoints hold every
weight: there each checkpoint is counted whole.

The model is counted as the larger of the weights the job holds and the checkpoint it downloads: a QLoRA base
holds its block weights in nf4 (8B: 5.9 GB) but downloads the 16-bit checkpoint they are quantized from as they
load (16 GB; 70B: 141 GB).

The dataset is not counted: gpuwise knows how many samples the job reads, not their bytes on disk (a server
reads none, and its note does not mention one).

The note is worded by the kind of provider (``DiskNeed.note``'s ``rented_at``): a SkyPilot task's disk holds the
system too, and the task asks for ``disk_size``; a machine rented by hand from a provider SkyPilot does not know
comes with its own disks, and the note says what the job's files need and where they go (``DATA_DISKS``: AutoDL's
data disk), not a ``disk_size`` no one asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.workload.storage import optimizer_state_bytes, trainable_bytes

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


@dataclass(frozen=True)
class DataDisk:
    """A provider's disk for a job's files (``path``; ``included_bytes`` come with the machine, more at a price),
    beside a system disk of ``system_bytes`` that holds the image and packages and is too small for a model."""

    path: str
    included_bytes: int
    system_bytes: int


# Providers SkyPilot does not know whose machines come with a data disk (autodl.com docs: a 30 GB system disk and a
# 50 GB data disk at /root/autodl-tmp, expandable for a fee)
DATA_DISKS = {"autodl": DataDisk("/root/autodl-tmp", 50 * GB, 30 * GB)}


def checkpoint_optimizer_bytes(workload, trained_params: int) -> int:
    """The optimizer state one checkpoint of ``workload`` holds for its ``trained_params``: each state at the
    trained weights' dtype (``optimizer_state_bytes`` of ``trainable_bytes``: float32 under AMP), as an unsharded job
    holds it between steps. Not the estimate's optimizer bytes at its peak, which add the optimizer step's
    temporaries and so vary with the GPU and the batch."""
    return int(trained_params * optimizer_state_bytes(workload.optimizer, trainable_bytes(workload.precision)))


def checkpoint_weights_bytes(workload, weights_bytes: int, trained_params: int, *, sharded: bool = False) -> int:
    """The weights one guard checkpoint of ``workload`` holds: all of the model's ``weights_bytes`` where it trains
    every parameter (``finetune`` "full") or saves in a sharded job (``sharded``: FSDP's DCP checkpoints and
    DeepSpeed's hold the frozen parameters too: docs/guard.md); where it freezes a base (lora, qlora, freeze) its ``trained_params`` only,
    at the trained weights' dtype (``trainable_bytes``: float32 under AMP), as the guard saves no unchanged frozen
    parameter. A frozen model's buffers, which the guard saves too, are left out: a decoder LLM's are not saved at
    all (rotary frequencies are non-persistent) and a vision backbone's BatchNorm statistics are a few MB."""
    if workload.finetune == "full" or sharded:
        return int(weights_bytes)
    return int(trained_params * trainable_bytes(workload.precision))


def checkpoint_bytes_per_param(dtype: str | None) -> int:
    """Bytes a parameter of a checkpoint stored in ``dtype`` (a config's ``torch_dtype``, ``torch.`` prefix or not)."""
    return CHECKPOINT_DTYPE_BYTES.get(str(dtype or "").removeprefix("torch."), UNNAMED_CHECKPOINT_BYTES)


@dataclass(frozen=True)
class DiskNeed:
    """Bytes on one node's disk: ``model_bytes`` (the model's weights: the checkpoint as downloaded, or as the job
    holds them where that is more) and ``checkpoint_bytes`` (one checkpoint: the weights it saves and the optimizer
    state; 0 for serving), beside ``SYSTEM_BYTES``. ``frozen_base``: a checkpoint leaves out a frozen base."""

    model_bytes: int
    checkpoint_bytes: int = 0
    frozen_base: bool = False

    @classmethod
    def of(cls, weights_bytes: int, optimizer_bytes: int, *, training: bool, downloaded_bytes: int = 0,
           saved_weights_bytes: int | None = None) -> "DiskNeed":
        """The need of a job whose whole model (one GPU's worth, unsharded) holds ``weights_bytes`` of weights
        and ``optimizer_bytes`` of optimizer state. A checkpoint holds the optimizer state and the weights it saves,
        ``saved_weights_bytes`` (``checkpoint_weights_bytes``: the trained ones where a base is frozen; None: all).
        ``downloaded_bytes``: the checkpoint it downloads (0: not known), more than it holds where the weights are
        quantized as they load; it is on disk once, whatever the checkpoints hold."""
        saved = weights_bytes if saved_weights_bytes is None else saved_weights_bytes
        return cls(int(max(weights_bytes, downloaded_bytes)), int(saved + optimizer_bytes) if training else 0,
                   frozen_base=training and saved < weights_bytes)

    @property
    def job_bytes(self) -> int:
        """The job's own files: the model and the checkpoints on disk at once, without the system."""
        return self.model_bytes + CHECKPOINTS_ON_DISK * self.checkpoint_bytes

    @property
    def job_disk_gb(self) -> int:
        """The job's own files (``job_bytes``) in whole GB, rounded up: the disk they need beside the system, on any
        provider (``--json``'s ``launch.job_disk_gb``; the size a data disk is grown to where it holds less)."""
        return math.ceil(self.job_bytes / GB)

    @property
    def total_bytes(self) -> int:
        return SYSTEM_BYTES + self.job_bytes

    @property
    def disk_size_gb(self) -> int:
        """The disk to ask for, in GB: the need rounded up to ``DISK_STEP_GB``, and never below SkyPilot's
        default (what the task would get without asking)."""
        need_gb = math.ceil(self.total_bytes / GB / DISK_STEP_GB) * DISK_STEP_GB
        return max(SKYPILOT_DEFAULT_DISK_GB, need_gb)

    def note(self, *, machine: str, reads_dataset: bool = True, rented_at: str | None = None) -> str:
        """The size in words, with what it is made of, for the launch's header and ``launch.notes``; ``machine``:
        what one of the launch's machines is called (``plan.machine_word``: a node, a server's replica);
        ``reads_dataset``: the job reads a dataset, which the size leaves out and says so (a server reads none);
        ``rented_at``: a provider SkyPilot does not know, whose machine is rented by hand: the job's files and where
        they go (``_placement``), not a SkyPilot task's disk (None: a SkyPilot provider's words)."""
        parts = [f"{_size(self.model_bytes)} of model weights"]
        if self.checkpoint_bytes:
            what = ("trained weights and their optimizer state, without the frozen base" if self.frozen_base
                    else "weights and optimizer state")
            parts.append(f"{CHECKPOINTS_ON_DISK} checkpoints of {_size(self.checkpoint_bytes)} of {what} "
                         f"(the guard keeps 3 and writes the next before it prunes)")
        left_out = ["not the dataset"] if reads_dataset else []
        if self.checkpoint_bytes:
            left_out.append("less where the checkpoint directory is on other storage (a bucket, a shared file system)")
        if rented_at is not None:
            return "; ".join([f"each {machine} needs ~{_size(self.job_bytes)} of disk for the job's files, beside "
                              f"the system and packages: {', '.join(parts)}", *left_out, self._placement(rented_at)])
        parts.insert(0, f"~{_size(SYSTEM_BYTES)} for the system and packages")
        return "; ".join([f"each {machine} needs ~{_size(self.total_bytes)} of disk: {', '.join(parts)}", *left_out,
                          f"a SkyPilot task asks for disk_size {self.disk_size_gb} GB"])

    def _placement(self, provider: str) -> str:
        """Where the job's files go on a machine of ``provider`` rented by hand: its data disk (``DATA_DISKS``),
        grown where the job needs more than it comes with; a disk with that much free where gpuwise knows none."""
        disk = DATA_DISKS.get(provider)
        if disk is None:
            return (f"rent the {provider} machine with that much disk free beside its system, and keep "
                    f"{self._written_dirs()} there")
        said = (f"on {provider}, keep {self._written_dirs()} on the data disk, {disk.path} "
                f"({_size(disk.included_bytes)} included), not on the {_size(disk.system_bytes)} system disk, which "
                f"holds the image and packages")
        if self.job_bytes > disk.included_bytes:
            said += f"; expand the data disk (for a fee) to at least {self.job_disk_gb} GB"
        return said

    def _written_dirs(self) -> str:
        """The directories the job writes its files to, in words: the model's download cache, and the checkpoint
        directory where it checkpoints (training); a server or an inference job writes none."""
        cache = "the model's download cache (HF_HOME, TORCH_HOME)"
        return f"the checkpoint directory and {cache}" if self.checkpoint_bytes else cache


def _size(n_bytes: int) -> str:
    """Disk in SkyPilot's units (GB, 10**9 bytes; MB below one GB), not memory's GiB."""
    if n_bytes < GB:
        return f"{n_bytes / MB:,.0f} MB"
    return f"{n_bytes / GB:,.1f} GB" if n_bytes < 10 * GB else f"{n_bytes / GB:,.0f} GB"
