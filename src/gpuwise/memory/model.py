"""The result of a memory estimate. Byte counts are for one GPU."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.errors import GpuwiseError


class MemoryError_(GpuwiseError):
    """Named with a trailing underscore so it never shadows Python's built-in MemoryError."""


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory of one step on one GPU.

    ``peak_allocated_bytes`` ≙ ``torch.cuda.max_memory_allocated()``,
    ``peak_reserved_bytes`` ≙ ``torch.cuda.max_memory_reserved()``,
    ``total_bytes`` ≙ what nvidia-smi shows for the process: reserved + CUDA context (+ library
    workspaces that live outside the caching allocator); ``total_upper_bytes`` its upper side, with
    ``uncertainty`` naming what is guessed and how much each part may add.
    The breakdown (weights + gradients + optimizer + activations + workspace + other) sums to
    ``peak_allocated_bytes`` at the moment of the peak.
    """

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    cuda_context_bytes: int
    total_bytes: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    workspace_bytes: int = 0
    other_bytes: int = 0
    top_modules: tuple[tuple[str, int], ...] = ()        # (module, activation bytes at the peak)
    timeline: tuple[tuple[int, int, int], ...] = ()      # (seq, allocated, reserved), downsampled
    notes: tuple[str, ...] = ()
    # (what is guessed, bytes it may add on the high side): memory/uncertainty.py
    uncertainty: tuple[tuple[str, int], ...] = ()
    # what ``workspace_bytes`` holds at the peak, in words (the closed form's may be an optimizer step's temporaries)
    workspace_label: str = "workspace"

    @property
    def uncertainty_bytes(self) -> int:
        return sum(b for _, b in self.uncertainty)

    @property
    def total_upper_bytes(self) -> int:
        """The upper side of ``total_bytes``: what a fit check should use."""
        return self.total_bytes + self.uncertainty_bytes

    def to_dict(self) -> dict:
        return {
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "cuda_context_bytes": self.cuda_context_bytes,
            "total_bytes": self.total_bytes,
            "total_upper_bytes": self.total_upper_bytes,
            "uncertainty_bytes": dict(self.uncertainty),
            "weights_bytes": self.weights_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "workspace_bytes": self.workspace_bytes,
            "workspace_label": self.workspace_label,
            "other_bytes": self.other_bytes,
            "top_modules": [{"module": m, "bytes": b} for m, b in self.top_modules],
            "notes": list(self.notes),
        }
