"""gpuwise.llm: decoder LLM jobs (fine-tuning full/freeze/LoRA/QLoRA, ZeRO/FSDP, serving with a KV cache).

    from gpuwise.llm import is_llm, estimate_llm
    est = estimate_llm(workload, gpu)      # .memory (per GPU), .time, .inference

``gpuwise.llm.peft.apply_finetune(module, workload)`` turns a real (meta/fake) module into its
frozen / LoRA / quantized form for the tracer.
"""

from gpuwise.llm.arch import DecoderArch, LinearSpec, ParamCounts, arch_from_config
from gpuwise.llm.config import LlmError, load_config, shipped_llm_names
from gpuwise.llm.estimate import (
    InferenceEstimate, LlmEstimate, estimate_llm, is_llm, load_arch, max_micro_batch,
)

__all__ = [
    "DecoderArch", "InferenceEstimate", "LinearSpec", "LlmError", "LlmEstimate", "ParamCounts",
    "arch_from_config", "estimate_llm", "is_llm", "load_arch", "load_config", "max_micro_batch",
    "shipped_llm_names",
]
