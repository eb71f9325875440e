"""What runs a serving job: a server (vLLM's ``vllm serve``), not torchrun. ``--emit skypilot`` gives it as a
SkyServe service (:mod:`gpuwise.launch.skyserve`) that runs the ``vllm serve`` line built here on each replica;
``--emit torchrun``, which starts training jobs, is refused, naming that line (and ``--emit skypilot`` where it gives
the service: ``skyserve_refusal``).

A model given as a local checkpoint (``hf:dir/config.json``) is not on a replica, and ``vllm serve dir`` there takes
``dir`` for a Hub id: the service uploads the folder (``file_mounts``) and serves ``REMOTE_MODEL_DIR`` where it holds
the weights, and is refused where it holds only a config.

vLLM reads a quantized checkpoint's own ``quantization_config``; a 16-bit checkpoint is quantized as it loads
only where ``--quantization`` says how (``VLLM_QUANTIZATION``, from vLLM 0.10's
``model_executor/layers/quantization``): bitsandbytes' in-flight quantization is 4-bit only
(``model_loader/bitsandbytes_loader.py``: LLM.int8() weights load from a checkpoint stored in 8 bits), and
``fp8`` quantizes the weights per tensor (``Fp8Config`` on a checkpoint not serialized in FP8).

vLLM's OpenAI-compatible server (``vllm/entrypoints/openai/api_server.py``) listens on port 8000 unless told
``--port``, and answers ``GET /health`` with 200 once its engine is up (503 while it is not): the readiness probe
a load balancer needs.

Where no service can be emitted, the refusal names what to run by hand (``serving_instructions``): the vLLM series
the plan models (``VLLM_REQUIREMENT``), then the ``vllm serve`` line, listening where the provider's convention
says a server is reached (``SERVICE_PORTS``: AutoDL's custom service on 6006).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpuwise.launch.plan import LaunchError, skypilot_cloud
from gpuwise.workload.checkpoint import VLLM_QUANTIZATION, stored_quant
from gpuwise.workload.model import VLLM_VERSION
from gpuwise.workload.precision import parse as parse_precision
from gpuwise.workload.specs import as_config_file

VLLM_PORT = 8000                   # vllm serve's default --port
VLLM_READINESS_PATH = "/health"    # vLLM's route that answers 200 once the engine serves
REMOTE_MODEL_DIR = "/model"        # where a SkyServe service uploads a local model's folder on each replica
WEIGHT_FILE_PATTERNS = ("*.safetensors", "*.bin")   # the weight files vLLM loads from a model folder
LISTEN_HOST = "0.0.0.0"            # every interface: a load balancer or a provider's proxy reaches the server
# pip's requirement for the vLLM the plan's defaults are modelled on: its release series (bug-fix releases only)
VLLM_REQUIREMENT = f"vllm=={VLLM_VERSION}.*"
# provider -> (port, why): where a provider's convention says a server on its machine is reached from outside.
# AutoDL forwards its "custom service" (自定义服务) link to port 6006 of the instance.
SERVICE_PORTS: dict[str, tuple[int, str]] = {
    "autodl": (6006, "AutoDL's convention: its custom service (自定义服务) exposes port 6006 of the instance"),
}



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


def vllm_serve_line(rec, *, listen: bool = False, port: int = VLLM_PORT, model: str | None = None) -> str:
    """The ``vllm serve`` line of a recommendation's best option (``rec.best``; engine vllm): the model, its tensor
    parallelism over the option's GPUs, the context, dtype, quantization and memory flags it was priced with;
    ``listen``: and the address it listens on (every interface, ``port``), as a load balancer reaches it;
    ``model``: where the server loads the model from (default: the Hub id, or a local checkpoint's folder as given).
    LaunchError where vLLM cannot load the weights so (``vllm_quantization_flags``)."""
    w, b = rec.workload, rec.best
    quantization = vllm_quantization_flags(w)
    # the precision the best option is priced at: a default bf16 is its fp16 twin on a GPU without bf16
    served_precision = rec.fallback_precision.get(b.gpu, w.precision)
    # --max-model-len: vLLM refuses to start where the model's whole context does not fit its KV cache
    flags = ([f"--tensor-parallel-size {b.count}"] if b.count > 1 else []) + [
        f"--max-model-len {w.tokens_per_sequence + w.max_new_tokens}"] + vllm_dtype_flags(w, served_precision) + (
        quantization + vllm_memory_flags(w)) + ([f"--host {LISTEN_HOST} --port {port}"] if listen else [])
    return f"vllm serve {shlex.quote(model or _served_id(w))} {' '.join(flags)}"


def serving_instructions(rec) -> str:
    """What to run for a recommendation's best option, in words: its ``vllm serve`` line (or "your server" for
    another engine) on the option's GPUs, on each of its replicas behind a load balancer, after installing the
    vLLM series the plan models (``VLLM_REQUIREMENT``); where the provider's convention names the port a server is
    reached on (``SERVICE_PORTS``), the line listens there and says why. LaunchError where vLLM cannot load the
    weights so."""
    w, b = rec.workload, rec.best
    where = f"{b.count}× {b.gpu} from {b.provider}"
    replicas = b.replicas or 1
    spread = (f"on each of {replicas} replicas ({where} each) behind a load balancer" if replicas > 1 else
              f"on {where}")
    if w.engine != "vllm":
        return f"run your server {spread}"
    port, why = SERVICE_PORTS.get(b.provider, (None, None))
    line = vllm_serve_line(rec, listen=port is not None, port=port or VLLM_PORT)
    said = (f"run `{line}` {spread}, after `pip install {shlex.quote(VLLM_REQUIREMENT)}` (the vLLM series whose "
            f"defaults the plan models)")
    return f"{said}; {why}" if why else said


def server_emit_refusal(rec, emit: str, why: str | None = None) -> str:
    """The one line that refuses ``--emit`` for a server (``is_server``) and names what to run instead
    (``serving_instructions``). ``why``: why ``emit`` cannot give it (default: torchrun starts training jobs, not a
    server; then ``--emit skypilot`` is named where it gives a SkyServe service: ``skyserve_refusal``)."""
    w, b = rec.workload, rec.best
    head = f"--emit {emit}: {why}" if why else f"--emit {emit} starts jobs under torchrun, not a server"
    if b is None:
        return f"{head}; and no option meets the request (run without --emit to see why)"
    try:
        said = f"{head}: {serving_instructions(rec)}"
    except LaunchError as e:
        return f"{head}; and {e}"
    if why is None and skyserve_refusal(w, b.provider) is None:
        said += "; --emit skypilot gives it as a SkyServe service (sky serve up)"
    return said


def skyserve_refusal(workload, provider: str) -> str | None:
    """Why ``--emit skypilot`` cannot give a server of ``workload`` at ``provider`` as a SkyServe service (None: it
    can): an engine other than vLLM (HF generate has no server to start), a provider SkyPilot does not know
    (``skypilot_cloud``), a local checkpoint without weights (a replica has nothing to load)."""
    if workload.engine != "vllm":
        return ("a SkyServe service runs vLLM's server, and HF generate has none gpuwise can start "
                "(serve with --engine vllm)")
    if skypilot_cloud(provider) is None:
        return f"SkyPilot does not know the provider {provider!r}"
    return missing_weights_refusal(workload)


def missing_weights_refusal(workload) -> str | None:
    """Why a SkyServe service cannot serve a model given as a local checkpoint that holds a config but no weights
    (None: a Hub id, or a folder with weights): a replica has nothing to load, and ``vllm serve`` there would take
    the folder's name for a Hub id."""
    folder = local_model_dir(workload)
    if folder is None or has_weights(folder):
        return None
    return (f"{folder} holds a config but no weights ({', '.join(WEIGHT_FILE_PATTERNS)}), and vLLM on a replica "
            f"would take {_served_id(workload)!r} for a Hub id: serve the model by its Hub id (hf:ORG/NAME), or put "
            f"its weights in the folder, which the service then uploads")


def local_model_dir(workload) -> Path | None:
    """The folder of a model given as a local checkpoint (``hf:dir/config.json``, ``hf:dir``), absolute; None for a
    Hub id, which vLLM downloads."""
    path = as_config_file(Path(workload.model.removeprefix("hf:")).expanduser())
    return path.parent.resolve() if path.suffix == ".json" else None


def has_weights(folder: Path) -> bool:
    """Does a model folder hold weight files vLLM loads (``WEIGHT_FILE_PATTERNS``), not only a config?"""
    return any(next(folder.glob(pattern), None) is not None for pattern in WEIGHT_FILE_PATTERNS)


def _served_id(workload) -> str:
    """What ``vllm serve`` takes for the model: a Hub id as given; for a local config (``hf:awq/config.json``)
    the directory that holds it (``awq``): vLLM loads a model directory or a Hub id, not a config file."""
    name = workload.model.removeprefix("hf:")
    return str(Path(name).parent) if name.endswith(".json") else name
