"""The software stack a time prediction assumes, taken from the workload (never a constant).

Each field has a default that says what it assumes (DESIGN.md, "The software stack assumed by
predictions"): eager PyTorch 2.x with cuDNN, channels-first tensors, SDPA attention, the foreach
optimizer, synthetic data. ``describe()`` is the ``StepTime.stack`` string users see.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.runtime.input_pipeline import workers_rate
from gpuwise.workload.specs import image_side


@dataclass(frozen=True)
class Stack:
    training: bool = True
    channels_last: bool = False
    attention: str = "sdpa"           # "sdpa" | "flash2" (fused kernels) | "eager" (scores materialised)
    compile: bool = False             # torch.compile (default mode): fused elementwise chains, no dispatcher
    optimizer_impl: str = "foreach"
    input_rate: float | None = None   # samples/s the input pipeline delivers; None: synthetic data
    cpu_workers: int | None = None    # where the rate comes from JPEG-decoding workers (None: given or none)
    frames_per_sample: int = 1        # JPEGs decoded per sample: a video clip's frames (Trace.frames_per_sample)

    @classmethod
    def from_workload(cls, wl, frames_per_sample: int = 1) -> "Stack":
        """The stack of job ``wl``; ``frames_per_sample``: the frames of one sample as traced (a video model's clip,
        ``Trace.frames_per_sample``), which ``--cpu-workers`` decode each as one JPEG."""
        rate, workers = getattr(wl, "input_rate", None), getattr(wl, "cpu_workers", None)
        side = image_side(wl) if rate is None and workers else None
        if side is not None:    # else said to be inert (Workload.inert_settings)
            rate = workers_rate(workers, side, wl.is_training, frames_per_sample)
        return cls(
            training=wl.is_training, channels_last=bool(getattr(wl, "channels_last", False)),
            attention=getattr(wl, "attention", "sdpa"), compile=bool(getattr(wl, "compile", False)),
            optimizer_impl=getattr(wl, "optimizer_impl", "foreach"), input_rate=rate,
            cpu_workers=workers if rate is not None and getattr(wl, "input_rate", None) is None else None,
            frames_per_sample=frames_per_sample,
        )

    def describe(self) -> str:
        parts = ["PyTorch 2.x " + ("torch.compile" if self.compile else "eager"), "cuDNN",
                 "channels-last" if self.channels_last else "channels-first (NCHW)",
                 {"eager": "eager attention (scores materialised)", "flash2": "FlashAttention-2"}.get(
                     self.attention, "SDPA attention"),
                 f"{self.optimizer_impl} optimizer" if self.training else "inference",
                 self.describe_input()]
        return ", ".join(parts)


    def describe_input(self) -> str:
        if not self.input_rate:
            return "synthetic data (no input pipeline)"
        plural = "s" if self.cpu_workers != 1 else ""
        frames = f", {self.frames_per_sample} frames a clip" if self.frames_per_sample > 1 else ""
        workers = f" ({self.cpu_workers} CPU worker{plural} decoding JPEGs{frames})" if self.cpu_workers else ""
        return f"input pipeline{workers} delivers {self.input_rate:,.0f} samples/s"


DEFAULT_STACK = Stack()


def assumed_stack(wl, *, closed_form_llm: bool = False) -> str:
    """The software the times are for, as estimate's and recommend's footers say it. ``closed_form_llm``:
    the job is timed by the decoder-LLM closed form, which lists eager kernels (no torch.compile fusion)."""
    if not wl.is_training and getattr(wl, "engine", "hf") == "vllm":
        if getattr(wl, "quant", "none") == "int8":    # vLLM's _verify_bnb_config: enforce_eager (runtime.quant_linears)
            return "vLLM (eager: no CUDA graphs for bitsandbytes 8-bit; continuous batching)"
        return "vLLM (CUDA graphs, continuous batching)"
    if getattr(wl, "compile", False) and closed_form_llm:
        return "PyTorch 2.x eager mode with cuDNN (--compile is not modelled for decoder LLMs: eager kernels)"
    return "PyTorch 2.x " + ("torch.compile" if getattr(wl, "compile", False) else "eager mode") + " with cuDNN"
