"""gpuwise.guard: keep long training jobs alive on cheap, unreliable GPUs.

Atomic verified checkpoints with resume (:class:`CheckpointStore`), a data loader that resumes mid-epoch
(:class:`ResumableDataLoader`), preemption handling (:class:`PreemptionHandler`, exit code 75), OOM
recovery by micro-batching the same batch (:mod:`gpuwise.guard.oom`), freest-GPU selection
(:mod:`gpuwise.guard.devices`), and :class:`Guard`, which puts them around a plain PyTorch loop.
"""

from gpuwise.guard import messages as _messages
from gpuwise.guard.async_save import AsyncSaver, HostStaging, snapshot_to_cpu
from gpuwise.guard.checkpoint import Checkpoint, CheckpointStore, Manifest, Skipped
from gpuwise.guard.errors import GuardError
from gpuwise.guard.gradnoise import GradNoiseSample
from gpuwise.guard.guard import Guard
from gpuwise.guard.oom import inject_oom_above, split_batch
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.guard.sampler import ResumableDataLoader, ResumableSampler

__all__ = [
    "AsyncSaver", "Checkpoint", "HostStaging", "CheckpointStore", "EXIT_RESTART", "GradNoiseSample", "Guard", "GuardError",
    "Manifest", "PreemptionHandler", "ResumableDataLoader", "ResumableSampler", "Skipped", "inject_oom_above",
    "snapshot_to_cpu", "split_batch",
]

_messages.install()  # ``gpuwise.guard: …`` on stderr where the program configured no logging
