"""What a trace records: the operators of one step and the life of every tensor storage.

This is the contract between ``trace`` (which produces it) and ``memory`` / ``runtime`` (which
consume it). Everything is plain data; a Trace can be reused for every GPU and GPU count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload, WorkloadError

PHASES = ("forward", "backward", "optimizer", "other")
# Bytes of one element of each dtype as records name it (``OpRecord.input_dtypes``); 4 for any other.
ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
    "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
}


def dtype_bytes(dtype: str, default: int = 4) -> int:
    """Bytes of one element of ``dtype`` (a name as records write it)."""
    return ITEMSIZE.get(dtype, default)


def tensor_bytes(shape, dtype: str) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``."""
    n = 1
    for d in shape:
        n *= d
    return n * dtype_bytes(dtype)
CATEGORIES = ("weights", "gradients", "optimizer", "activations", "inputs", "workspace", "other")


class TraceError(GpuwiseError):
    pass


class ModelCodeError(TraceError, WorkloadError):
    """The model's own code (torchvision, timm, transformers, the user's file) refused the workload's
    inputs while traced: bad input (a WorkloadError), and a failed trace (a TraceError)."""


@dataclass(frozen=True)
class OpRecord:
    """One aten operator call of the measured step, as CUDA would run it."""

    index: int                                  # position in the measured step
    op: str                                     # "aten.mm.default"
    phase: str                                  # one of PHASES
    module: str                                 # dotted path of the innermost module ("" at top)
    input_shapes: tuple[tuple[int, ...], ...]   # tensor inputs only, in argument order
    input_dtypes: tuple[str, ...]               # "float32", "float16", ...
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    flops: int                                  # from torch's flop formulas (0 where none applies)
    bytes_read: int                             # tensor inputs, as stored
    bytes_written: int                          # tensor outputs
    attrs: Mapping[str, object] = field(default_factory=dict)  # e.g. {"groups": 32, "stride": (2, 2)}
    kernel_count: int = 1                       # launches (a foreach op over N tensors may be several)


@dataclass(frozen=True)
class MemoryEvent:
    """An allocation or free of one storage, in the order the CUDA caching allocator would see it."""

    seq: int              # global order across the traced steps
    kind: str             # "alloc" | "free"
    block_id: int         # same id for an alloc and its free
    size_bytes: int       # as requested (before the allocator's 512-byte rounding)
    category: str         # one of CATEGORIES
    phase: str            # one of PHASES
    module: str = ""      # module that allocated it (for the top-modules breakdown)
    op_index: int = -1    # index into Trace.ops of the op that caused it; -1 for the warm-up step


@dataclass(frozen=True)
class Trace:
    """One (or two, so optimizer state exists) real steps of a model on fake tensors."""

    workload: Workload
    ops: tuple[OpRecord, ...]          # the measured (last) step only
    events: tuple[MemoryEvent, ...]    # every step traced, in order; steady state is the last
    param_count: int
    trainable_param_count: int
    samples_per_step: int              # the micro-batch
    trace_time_s: float = 0.0
    notes: tuple[str, ...] = ()        # what the tracer had to assume or work around
    # operators whose output size depends on values (nonzero, masked_select, boolean indexing), traced with
    # every element selected: the step's memory and time are upper bounds, not estimates
    upper_bound_ops: int = 0
    # nn.LSTM / GRU / RNN modules: traced as cuDNN's fused RNN (trace/rnn.py); no measured run checks its time
    rnn_modules: int = 0
    # reads of a tensor's value by the model's own control flow (an if, a while, a break on a tensor), answered
    # True / 1 on fake data: the step traced is the one those answers take, which real data may not (an early
    # exit, a loop until convergence): memory and time may be far off, lower or higher
    control_flow_reads: int = 0
    # (size, value) where the inputs' size was gpuwise's choice, not the job's: a factory's input guessed from its
    # first layer (images at 224 px: ("image_size", 224); a size the guessed input does not have: None)
    input_sizes: tuple[tuple[str, int | None], ...] = ()
    # decoded frames in one sample: T of a video model's (N, C, T, H, W) clips (a Conv3d's input), 1 for anything else;
    # what the input pipeline decodes per sample (runtime.input_pipeline)
    frames_per_sample: int = 1

    @property
    def flops(self) -> int:
        return sum(op.flops for op in self.ops)

    def sized_job(self, workload: Workload) -> Workload:
        """``workload`` (a job this trace stands for) with the sizes its inputs had written in (``input_sizes``):
        the job recorded is the job traced, as ``Workload.with_factory_sizes`` makes it before tracing."""
        return workload.with_(**dict(self.input_sizes)) if self.input_sizes else workload
