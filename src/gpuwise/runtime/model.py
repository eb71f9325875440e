"""The result of a time prediction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gpuwise.errors import GpuwiseError

# "launch": eager PyTorch's issue time paces the step; "host": a calibrated host term (your runs' data loading,
# Python between steps: gpuwise.calibrate) does
BOUNDS = ("compute", "memory", "launch", "communication", "input", "host")
# How a table or sentence names a bound: "memory" alone reads as out of memory where it means DRAM
# bandwidth (the JSON keeps the BOUNDS names)
_BOUND_WORDS = {"memory": "bandwidth"}
# How a table names ``StepTime.sharding_overhead_s`` (gpuwise.runtime.comm.ExposedParts): a floor, not the links
SHARDING_OVERHEAD_PART = "sharding overhead (speed-up <= N)"


def bound_word(bound: str | None) -> str:
    """The bound as people read it: 'bandwidth' for a memory-bandwidth-bound step, else its name."""
    return _BOUND_WORDS.get(bound or "", bound or "")


class Note(str):
    """A warning in words that code can recognise by its ``kind``, not by its wording (it is a ``str``:
    printed, joined and written to JSON as the words). ``DECODING_CORES``: real JPEGs would need more
    CPU cores than a rented GPU comes with. ``BATCH_SPLIT``: the micro-batch asked for does not fit, the
    option runs a smaller one with accumulation (recommend's batch column says it). ``PRECISION_FALLBACK``:
    the option runs at the fp16 twin of a default bf16 (recommend says it above its table)."""

    DECODING_CORES = "decoding-cores"
    BATCH_SPLIT = "batch-split"
    PRECISION_FALLBACK = "precision-fallback"
    KINDS = (DECODING_CORES, BATCH_SPLIT, PRECISION_FALLBACK)

    kind: str

    def __new__(cls, kind: str, text: str) -> "Note":
        if kind not in cls.KINDS:
            raise ValueError(f"unknown note kind {kind!r}")
        note = super().__new__(cls, text)
        note.kind = kind
        return note

    def __reduce__(self):
        return (Note, (self.kind, str(self)))


def is_note(value, kind: str) -> bool:
    """Whether ``value`` (a warning) is a :class:`Note` of ``kind``."""
    return isinstance(value, Note) and value.kind == kind


class RuntimeError_(GpuwiseError):
    """Named with a trailing underscore so it never shadows Python's built-in RuntimeError."""


@dataclass(frozen=True)
class StepPace:
    """What sets a step's bound and its pace warnings (``runtime.predict.step_pace``, the one home of the rule),
    kept on the ``StepTime`` so that a calibrated step (``gpuwise.calibrate.apply``) derives them from its own
    figures by the same rule. Times are one GPU's, per optimizer step."""

    gpus_s: float                         # compute + communication + sharding overhead: the step without an input wait
    communication_s: float
    host_s: float                         # the host's side: issue time (and a calibrated host term)
    device_s: float                       # GPU busy time, launch waits excluded
    kernels: int                          # kernels the launch warning counts
    compiled: bool
    device_bound: str                     # "compute" or "memory": what the step's kernels lean on
    host_term_s: float = 0.0              # of host_s, a calibrated host term (not issue time): gpuwise.calibrate
    data_s: float | None = None           # the loader's time per step (--input-rate); None: synthetic data
    input_words: str = ""                 # the loader, as the data-bound warning names it
    samples_per_step: float = 0.0         # one GPU's samples per optimizer step
    image_side_px: int | None = None      # a vision training job on synthetic data: the decoding warning's side
    frames_per_sample: int = 1            # frames the decoding warning counts per sample (a video clip's)


@dataclass(frozen=True)
class StepTime:
    """Predicted time of one optimizer step (all micro-batches of it) on ``count`` GPUs of one kind."""

    gpu: str                              # canonical catalog id
    count: int
    step_time_s: float
    samples_per_s: float                  # all GPUs together
    by_class_s: Mapping[str, float]       # operator class -> seconds per step (one GPU)
    bound: str                            # one of BOUNDS: what dominates the step
    compute_s: float = 0.0
    communication_s: float = 0.0          # the links' estimate: collectives not hidden behind compute
    # data parallelism's weak-scaling floor beyond the links (runtime.comm.ExposedParts): step_time_s =
    # compute_s + communication_s + sharding_overhead_s (+ an input wait)
    sharding_overhead_s: float = 0.0
    warnings: tuple[str, ...] = ()
    # one forward+backward of the micro-batch (one GPU); a traced decoder's generation: its prefill (the prompts'
    # forward)
    micro_step_s: float = 0.0
    optimizer_s: float = 0.0              # the optimizer update, once per step
    # CUDA kernels issued per step (one GPU), as the launch warning counts them; a traced decoder's generation: its
    # prefill's (runtime.llm.generation_time); 0 where nothing was traced (the closed form)
    kernel_launches: int = 0
    stack: str = ""                       # the software stack the prediction assumes
    host_s: float = 0.0                   # eager host time to issue the step's kernels (one GPU)
    device_s: float = 0.0                 # GPU busy time of the step (one GPU), launch waits excluded
    regime: str = ""                      # runtime.accuracy.REGIMES: whose held-out error applies
    pace: StepPace | None = None          # what set ``bound`` and the pace warnings; None: a model that keeps none

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "count": self.count,
            "step_time_s": self.step_time_s,
            "samples_per_s": self.samples_per_s,
            "by_class_s": dict(self.by_class_s),
            "bound": self.bound,
            "compute_s": self.compute_s,
            "communication_s": self.communication_s,
            "sharding_overhead_s": self.sharding_overhead_s,
            "warnings": list(self.warnings),
            "micro_step_s": self.micro_step_s,
            "optimizer_s": self.optimizer_s,
            "kernel_launches": self.kernel_launches,
            "stack": self.stack,
            "host_s": self.host_s,
            "device_s": self.device_s,
            "regime": self.regime,
        }
