"""What runs a serving job: a server (vLLM's ``vllm serve``), not torchrun. ``--emit`` launches training jobs
under torchrun; for a server it is refused, naming the ``vllm serve`` line to run on each replica instead.

vLLM reads a quantized checkpoint's own ``quantization_config``; a 16-bit checkpoint is quantized as it loads
only where ``--quantization`` says how (``VLLM_QUANTIZATION``, from vLLM 0.10's
``model_executor/layers/quantization``): bitsandbytes' in-flight quantization is 4-bit only
(``model_loader/bitsandbytes_loader.py``: LLM.int8() weights load from a checkpoint stored in 8 bits), and
``fp8`` quantizes the weights per tensor (``Fp8Config`` on a checkpoint not serialized in FP8).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpuwise.launch.plan import LaunchError
from gpuwise.workload.checkpoint import stored_quant
from gpuwise.workload.precision import parse as parse_precision

# --quant -> vLLM's --quantization for a 16-bit checkpoint; None: vLLM cannot quantize it so as it loads
VLLM_QUANTIZATION: dict[str, str | None] = {"nf4": "bitsandbytes", "fp8": "fp8", "int8": None}


def is_server(workload) -> bool:
    """A job that runs as a server, not under torchrun: vLLM, or any engine at a request rate."""
    return not workload.is_training and (workload.engine == "vllm" or workload.request_rate_per_s is not None)


def vllm_quantization_flags(workload) -> list[str]:
    """The ``--quantization`` flag ``vllm serve`` needs to run ``workload.quant`` weights: none where the
    checkpoint stores them so (vLLM reads its quantization_config); LaunchError where vLLM cannot quantize the
    16-bit checkpoint so (int8), saying what to serve instead."""
    quant = workload.quant
    if quant == "none" or stored_quant(workload.model) == quant:
        return []
    method = VLLM_QUANTIZATION[quant]
    if method is None:
        raise LaunchError(f"vLLM cannot serve --quant {quant} from {_served_id(workload)}'s 16-bit checkpoint (its "
                          "bitsandbytes quantization on load is 4-bit only): serve a checkpoint stored in 8 bits, or "
                          "--quant nf4 (--quantization bitsandbytes) or --quant fp8 (--quantization fp8)")
    return [f"--quantization {method}"]


def vllm_memory_flags(workload) -> list[str]:
    """The ``vllm serve`` flags of the KV cache's dtype and vLLM's share of the GPU where the job sets them (the
    ones its memory was estimated with); vLLM spells bf16 ``bfloat16``."""
    flags = []
    if workload.kv_cache_dtype != "auto":
        flags.append(f"--kv-cache-dtype {VLLM_SPELLING.get(workload.kv_cache_dtype, workload.kv_cache_dtype)}")
    if workload.gpu_memory_utilization is not None:
        flags.append(f"--gpu-memory-utilization {workload.gpu_memory_utilization:g}")
    return flags


VLLM_SPELLING = {"bf16": "bfloat16"}


def vllm_dtype_flags(workload, served_precision: str) -> list[str]:
    """The ``--dtype`` flag of ``vllm serve`` where its default (``auto``: the checkpoint's own 16-bit type) is
    not the precision the plan was priced at on the option's GPU (``served_precision``): one the user named, or a
    default bf16's fp16 twin on a GPU without bf16, where vLLM refuses a bf16 checkpoint unless told
    ``--dtype float16``. vLLM takes torch's dtype names (``float16``, ``bfloat16``, ``float32``)."""
    if workload.precision_default and served_precision == workload.precision:
        return []
    return [f"--dtype {parse_precision(served_precision).compute_dtype}"]


def server_emit_refusal(rec, emit: str) -> str:
    """The one line that refuses ``--emit`` for a server (``is_server``) and names what to run instead: the
    ``vllm serve`` line of the recommendation's best option, on each of its replicas."""
    w, b = rec.workload, rec.best
    head = f"--emit {emit} starts jobs under torchrun, not a server"
    if b is None:
        return f"{head}; and no option meets the request (run without --emit to see why)"
    if w.engine == "vllm":
        try:
            quantization = vllm_quantization_flags(w)
        except LaunchError as e:
            return f"{head}; and {e}"
        # the precision the best option is priced at: a default bf16 is its fp16 twin on a GPU without bf16
        served_precision = rec.fallback_precision.get(b.gpu, w.precision)
        # --max-model-len: vLLM refuses to start where the model's whole context does not fit its KV cache
        flags = ([f"--tensor-parallel-size {b.count}"] if b.count > 1 else []) + [
            f"--max-model-len {w.tokens_per_sequence + w.max_new_tokens}"] + vllm_dtype_flags(w, served_precision) + (
            quantization + vllm_memory_flags(w))
        run = f"`vllm serve {shlex.quote(_served_id(w))} {' '.join(flags)}`"
    else:
        run = "your server"
    where = f"{b.count}× {b.gpu} from {b.provider}"
    replicas = b.replicas or 1
    spread = (f"on each of {replicas} replicas ({where} each) behind a load balancer" if replicas > 1 else
              f"on {where}")
    return f"{head}: run {run} {spread}"


def _served_id(workload) -> str:
    """What ``vllm serve`` takes for the model: a Hub id as given; for a local config (``hf:awq/config.json``)
    the directory that holds it (``awq``): vLLM loads a model directory or a Hub id, not a config file."""
    name = workload.model.removeprefix("hf:")
    return str(Path(name).parent) if name.endswith(".json") else name
