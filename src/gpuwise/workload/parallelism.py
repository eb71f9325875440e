"""Defaults of the data-parallel implementations a workload's ``sharding`` names, shared by the memory
and the time of data parallelism (``gpuwise.memory.parallel``, ``gpuwise.runtime.comm``), and how serving
GPUs share a model."""

from gpuwise.workload.storage import frozen_bytes

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000   # DeepSpeed zero_optimization.reduce_bucket_size default
PREFETCH_DEPTH = 1                               # FSDP BACKWARD_PRE / FSDP2 / ZeRO-3: one unit ahead


def effective_sharding(workload) -> str:
    """The sharding a training job with CPU offload runs under, whatever ``--sharding`` said: offloading the
    parameters needs parameter partitioning (DeepSpeed ZeRO-3 offload), offloading the optimizer
    ZeRO-Offload's partitioned gradients (at least ZeRO-2); FSDP's CPUOffload stays FSDP. The one home of this
    rule: the memory (``gpuwise.memory.llm.train_memory``), the time (``gpuwise.runtime.llm.train_step_time``)
    and the launch (``gpuwise.launch.sharding.ShardingSetup``) all price this sharding."""
    sharding, offload = workload.sharding, workload.offload
    if offload == "params" and sharding in ("ddp", "zero1", "zero2"):
        return "zero3"
    if offload == "optimizer" and sharding in ("ddp", "zero1"):
        return "zero2"
    return sharding


# DeepSpeed ZeRO-Offload runs the optimizer step on the CPU with its own kernels: a ds-config optimizer named
# Adam/AdamW becomes DeepSpeedCPUAdam, Lion DeepSpeedCPULion (Adagrad DeepSpeedCPUAdagrad: no gpuwise name), and a
# client optimizer of any other class raises ZeRORuntimeException while zero_force_ds_cpu_optimizer is true, its
# default (deepspeed/runtime/engine.py, _configure_optimizer and _configure_basic_optimizer, 0.19).
ZERO_OFFLOAD_CPU_OPTIMIZERS = {"adam": "DeepSpeedCPUAdam", "adamw": "DeepSpeedCPUAdam", "lion": "DeepSpeedCPULion"}


def offload_optimizer_refusal(workload, offload: str | None = None) -> str | None:
    """Why a training job's ``--optimizer`` cannot run under its ``--offload`` (``offload``: under that one
    instead; None: it can). Under DeepSpeed ZeRO-Offload (any sharding but FSDP: ``effective_sharding``) only the
    optimizers DeepSpeed has a CPU kernel for (``ZERO_OFFLOAD_CPU_OPTIMIZERS``); FSDP's CPUOffload steps any torch
    optimizer on the CPU."""
    offload = offload or workload.offload
    if (workload.mode != "train" or offload == "none" or workload.optimizer == "none"
            or workload.sharding == "fsdp" or workload.optimizer in ZERO_OFFLOAD_CPU_OPTIMIZERS):
        return None
    return (f"--offload {offload} runs DeepSpeed ZeRO-Offload's own CPU optimizer (DeepSpeedCPUAdam, "
            f"DeepSpeedCPULion), which has no {workload.optimizer}: use --optimizer adamw, adam or lion, or drop "
            "--offload")


def params_offloaded(w, sharding: str) -> bool:
    """Whether ``--offload`` moves the parameters to the CPU, so that a GPU holds only the units it gathers (and
    their gradients until they are reduce-scattered and copied out), no shard of its own. ``sharding``: the one it
    runs under (``effective_sharding``). DeepSpeed offloads them only for ``--offload params`` (ZeRO-3's
    offload_param); FSDP has one offload, CPUOffload(offload_params=True), whichever ``--offload`` said
    (``launch.sharding``); the memory (``memory.llm``) and the time (``runtime.llm``) both follow it: its FlatParamHandle pins the sharded flat parameter in CPU RAM, copies the shard to the
    GPU only to all-gather it, points the parameter back at the CPU shard on reshard, and copies each
    reduce-scattered gradient shard to a pinned CPU buffer (torch/distributed/fsdp/_flat_param.py
    ``pre_unshard``, ``_use_sharded_flat_param``; _runtime_utils.py ``_offload_grad``)."""
    return w.offload == "params" or (w.offload == "optimizer" and sharding == "fsdp")


def effective_sharding_note(workload) -> str | None:
    """What ``effective_sharding`` changed, in one note (None: the sharding said is the one priced)."""
    sharding = effective_sharding(workload)
    if sharding == workload.sharding:
        return None
    if sharding == "zero3":
        return "--offload params needs parameter partitioning (DeepSpeed ZeRO-3 offload): treated as zero3"
    return f"--offload {workload.offload} uses DeepSpeed ZeRO-Offload, which partitions gradients: treated as zero2"


def splits_layers(workload) -> bool:
    """Serving on several GPUs with HF generate (``--engine hf``): transformers' ``device_map="auto"``
    (accelerate's balanced map) places consecutive decoder layers on each GPU and runs them one GPU after
    another, a pipeline with one batch in it, so no GPU works while another does. Serving engines (vLLM) split
    every layer over the GPUs by tensor parallelism instead. The memory (``gpuwise.memory.llm``) and the
    time (``gpuwise.runtime.llm``) of serving both follow this."""
    return not workload.is_training and workload.engine == "hf" and workload.num_gpus > 1


def layer_split_share(arch, count: int) -> float:
    """A layer split's share of the decoder layers on the GPU that holds the most of them: ceil(L / n) of the L
    layers (accelerate places whole layers). Its KV cache and its layer weights are that share."""
    return -(-arch.num_layers // count) / arch.num_layers


def _layer_split_ends_bytes(arch, workload) -> tuple[float, float]:
    """The weights outside the decoder layers, (first GPU, last GPU): accelerate's ``device_map="auto"`` places
    modules in order, the embedding on the first GPU, the final norm and the LM head on the last (a tied head
    is the embedding's own weight, with it on the first). Never quantized (bitsandbytes keeps the LM head)."""
    element = frozen_bytes(workload.precision)
    counts = arch.param_counts()
    final_norm = 2 * arch.hidden_size if arch.layernorm else arch.hidden_size
    return counts.embedding * element, (counts.lm_head + final_norm) * element


def layer_split_weight_bytes(arch, workload, total_bytes: float) -> float:
    """The weights the fullest GPU of a layer split holds (``splits_layers``; ``total_bytes``: the whole
    model's). Assumed, simply and on the safe side: the GPU with the most layers, ``layer_split_share`` of the
    layer weights, also holds the larger end (the embedding, or the final norm and LM head): an upper estimate,
    as accelerate's balanced map tends to give the GPUs that hold an end fewer layers."""
    first, last = _layer_split_ends_bytes(arch, workload)
    layers = max(total_bytes - first - last, 0.0)
    return layers * layer_split_share(arch, workload.num_gpus) + max(first, last)


def layer_split_total_bytes(arch, workload, gpu_bytes: float) -> float:
    """The whole model's weights from the fullest GPU's (the inverse of ``layer_split_weight_bytes``): a layer
    split is timed as one GPU after another, each token reading all of them."""
    first, last = _layer_split_ends_bytes(arch, workload)
    layers = max(gpu_bytes - max(first, last), 0.0) / layer_split_share(arch, workload.num_gpus)
    return layers + first + last


def serving_split_words(workload) -> str:
    """How ``workload``'s GPUs share the model when it serves, in words."""
    if splits_layers(workload):
        return ('HF generate\'s device_map="auto": the layers split over the GPUs, which run them one after another '
                "(weights and KV cache by layer)")
    return "tensor parallelism (weights and KV heads split across GPUs)"
