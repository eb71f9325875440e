"""Per-GPU memory of an LLM training step or inference request, in closed form.

Everything here is per GPU at the step's peak. The breakdown (weights + gradients + optimizer +
activations + workspace + other) sums to ``peak_allocated_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.catalog.topology import Topology, topology_for
from gpuwise.memory.llm_activations import (LossStack, Trainability, decode_logits_bytes, prefill_bytes,
                                              train_activations)
from gpuwise.workload.decoder import DecoderArch, engine_caches_mla_latent, matches_target
from gpuwise.workload.model import WorkloadError
from gpuwise.workload.parallelism import (effective_sharding, effective_sharding_note, layer_split_share,
                                         layer_split_weight_bytes, params_offloaded, serving_split_words,
                                         splits_layers)
from gpuwise.workload.storage import (
    ZERO_OFFLOAD_ELEMENT_BYTES, compute_bytes, frozen_bytes, is_paged, offloaded_element_bytes, optimizer_state_bytes, optimizer_temp_bytes,
    quant_bytes_per_param, trainable_bytes,
)
from gpuwise.memory.cuda import CudaStack, embedding_backward_scratch_bytes
from gpuwise.memory.model import MemoryEstimate
from gpuwise.memory.parallel import data_parallel_memory, ring_of
from gpuwise.memory.uncertainty import closed_form_uncertainty
from gpuwise.workload import Workload
from gpuwise.workload.checkpoint import QuantScheme, served_scheme, stored_quant

MIB = 1 << 20
# Caching-allocator overhead: persistent tensors (weights, states) are allocated once and only lose
# the 2 MiB rounding; activations churn through blocks of many sizes, and the allocator keeps the
# freed ones cached. Assumed 1% and 15%: estimates without a source (docs/memory.md); the upper side
# (memory/uncertainty.py) allows 10% more of the churning part. To be calibrated on benchmarks/measured/.
STATIC_RESERVE = 0.01
DYNAMIC_RESERVE = 0.15
SHARDED = ("zero1", "zero2", "zero3", "fsdp")
GIB = 1 << 30
ZERO3_GRADIENT_BYTES = 4.0   # per trained parameter, before sharding: DeepSpeed ZeRO-3's 18 - 2 - 12 (below)
VLLM_MAX_NUM_SEQS = 256                 # vLLM's default max_num_seqs below its large-GPU tier (vllm_batch_defaults)


@dataclass(frozen=True)
class VllmBatchDefaults:
    max_num_batched_tokens: int          # tokens one scheduler iteration (and the profiling forward) runs
    max_num_seqs: int                    # sequences one iteration runs


def vllm_batch_defaults(gpu) -> VllmBatchDefaults:
    """``vllm serve``'s defaults on ``gpu``, as vLLM 0.34 picks them (``EngineArgs.get_batch_defaults``,
    OPENAI_API_SERVER): 16384 tokens and 1024 sequences from 160 GiB of GPU memory; 8192 and 1024 from 70 GiB
    but on an A100 (vLLM's own device-name check: larger batches lowered an A100's throughput, its PR #17885);
    2048 and 256 below."""
    memory, name = gpu.visible_memory_bytes, f"{gpu.id} {gpu.name}".lower()
    if memory >= 160 * GIB:
        return VllmBatchDefaults(16384, 1024)
    if memory >= 70 * GIB and "a100" not in name:
        return VllmBatchDefaults(8192, 1024)
    return VllmBatchDefaults(2048, VLLM_MAX_NUM_SEQS)


def prefill_forward_tokens(w: Workload, gpu, prompt_tokens: int) -> int:
    """Tokens one prefill forward runs: HF generate's whole prompts; vLLM's chunked prefill at most its scheduler's
    budget, max_num_batched_tokens (``vllm_batch_defaults``; the same forward its memory profiling runs), so a prompt
    longer than that is prefilled in chunks. Without a GPU, vLLM's budget is unknown: the whole prompt."""
    if w.engine != "vllm" or gpu is None:
        return prompt_tokens
    return min(prompt_tokens, vllm_batch_defaults(gpu).max_num_batched_tokens)


def cublas_workspace_bytes(gpu, handles: int) -> int:
    """torch's cuBLAS workspace per (handle, stream), from the one CUDA table (gpuwise.memory.cuda). A
    training step uses two handles (forward thread, autograd thread), inference one."""
    return handles * CudaStack.for_gpu(gpu).cublas_workspace_bytes


def context_bytes(gpu) -> int:
    """CUDA context + the lazily loaded cuBLAS kernels (LLM steps are matmuls: no cuDNN)."""
    return CudaStack.for_gpu(gpu).context_bytes(uses_cublas=True, uses_cudnn=False)


@dataclass(frozen=True)
class ParamSplit:
    total: int
    trainable: int
    quantized: int          # frozen block-linear weights stored quantized
    frozen_plain: int       # other frozen weights, stored at frozen_bytes(precision)
    trainable_linear: int   # trained parameters that are matmul weights (autocast copies them)


def param_split(arch: DecoderArch, w: Workload) -> ParamSplit:
    pc = arch.param_counts()
    block_linear = arch.linear_params()
    if w.finetune == "full" and w.is_training:
        if w.quant != "none":
            raise WorkloadError(f"--finetune full cannot train {w.quant}-quantized weights; use --finetune lora or qlora")
        return ParamSplit(pc.total, pc.total, 0, 0, block_linear + arch.vocab_size * arch.hidden_size)
    if not w.is_training:
        trainable, trainable_linear = 0, 0
    elif w.finetune == "freeze":
        # freeze = train only the LM head (the tied embedding when tied) and the final norm
        head = arch.vocab_size * arch.hidden_size
        final_norm = arch.hidden_size * (2 if arch.layernorm else 1)
        trainable, trainable_linear = head + final_norm, head
    else:
        trainable = arch.lora_params(w.lora_rank, w.lora_targets)
        trainable_linear = trainable
    quantized = block_linear if w.quant != "none" else 0
    base_trained = trainable if w.finetune == "freeze" and w.is_training else 0
    frozen_plain = pc.total - quantized - base_trained
    return ParamSplit(pc.total, trainable, quantized, frozen_plain, trainable_linear)


def quantized_weight_bytes(arch: DecoderArch, quant: str, double_quant: bool, scheme: QuantScheme | None = None,
                           kept_bytes: float = 2.0) -> float:
    """The block linears' storage with ``quant`` weights: the share a checkpoint keeps unquantized (``scheme``'s
    ignore list) at ``kept_bytes`` a weight, biases in 16-bit."""
    scheme = scheme or QuantScheme(quant)
    total = 0.0
    for lin in arch.linears:
        n = lin.copies_per_layer * lin.layers
        kept = scheme.kept_share(lin)
        per = quant_bytes_per_param(quant, double_quant=double_quant, in_features=lin.in_features,
                                    group_size=scheme.group_size, zero_point=scheme.zero_point)
        total += n * lin.in_features * lin.out_features * ((1 - kept) * per + kept * kept_bytes)
        total += n * lin.out_features * lin.bias * 2
    return total


def quantized_layers_save_input(quant: str, bitsandbytes_before_0_43: bool = False) -> bool:
    """Whether bitsandbytes' quantized linear keeps its input for backward when the input needs a gradient.
    8-bit (MatMul8bitLt) does: ``ctx.tensors = (CAt, subA, A)``. 4-bit (MatMul4Bit) did up to 0.41/0.42,
    ``ctx.tensors = (A, B)``, and keeps only the quantized weight since 0.43 (``(None, B)``: the input
    gradient needs B only; read in the 0.41.3, 0.43.3, 0.45.0, 0.46.0 and 0.50.2 wheels' autograd/_functions.py)."""
    return quant == "int8" or (quant != "none" and bitsandbytes_before_0_43)


def trainability(arch: DecoderArch, w: Workload, *, bitsandbytes_before_0_43: bool = False) -> Trainability:
    if w.finetune == "full":
        return Trainability(True, True, lambda lin: True, True)
    if w.finetune == "freeze":
        return Trainability(False, False, lambda lin: False, True)
    targets = w.lora_targets
    adapted = lambda lin: matches_target(lin, targets)  # noqa: E731
    dropout = w.lora_dropout > 0
    if quantized_layers_save_input(w.quant, bitsandbytes_before_0_43):
        # the quantized layer keeps its input whenever the input needs a gradient, adapter or not
        return Trainability(True, False, lambda lin: True, False, adapted, dropout)
    # a frozen linear keeps nothing; its adapter keeps x (no dropout) or dropout(x) (counted apart)
    return Trainability(True, False, (lambda lin: False) if dropout else adapted, False, adapted, dropout)


def _finish(parts: dict[str, float], static: float, gpu, notes: list[str],
            workspace_label: str = "workspace", outside_allocator_bytes: int = 0) -> MemoryEstimate:
    """The estimate of ``parts`` (the breakdown at the peak, summing to the peak allocated). ``outside_allocator_bytes``:
    what the process holds beside PyTorch's caching allocator (NCCL's buffers), in ``total_bytes`` only."""
    ints = {k: int(round(v)) for k, v in parts.items()}
    allocated = sum(ints.values())
    dynamic = allocated - static
    reserved = int(static * (1 + STATIC_RESERVE) + max(dynamic, 0) * (1 + DYNAMIC_RESERVE))
    reserved = max(allocated, -(-reserved // (2 * MIB)) * 2 * MIB)
    ctx = context_bytes(gpu)
    spread = closed_form_uncertainty(context_bytes=ctx, allocated_bytes=allocated, weights_bytes=ints["weights"],
                                     dynamic_bytes=int(dynamic))
    return MemoryEstimate(
        peak_allocated_bytes=allocated, peak_reserved_bytes=reserved, cuda_context_bytes=ctx,
        total_bytes=reserved + ctx + outside_allocator_bytes, weights_bytes=ints["weights"],
        gradients_bytes=ints["gradients"],
        optimizer_bytes=ints["optimizer"], activations_bytes=ints["activations"],
        workspace_bytes=ints["workspace"], other_bytes=ints["other"], notes=tuple(notes), uncertainty=spread,
        workspace_label=workspace_label,
    )


@dataclass(frozen=True)
class TrainMemory:
    memory: MemoryEstimate
    split: ParamSplit
    cpu_offload_bytes: int = 0      # optimizer state / gradients / parameters held in CPU RAM
    spillable_bytes: int = 0        # paged optimizer state that may move to CPU under pressure
    grad_sync_bytes: int = 0        # bytes of gradients each GPU contributes to the reduction
    param_gather_bytes: int = 0     # bytes of parameters all-gathered per forward (ZeRO-3/FSDP)
    offloaded_weights_bytes: int = 0    # parameters --offload keeps in host RAM, all GPUs' (host_weights_bytes)
    notes: tuple[str, ...] = field(default=())


def train_memory(arch: DecoderArch, w: Workload, gpu=None, *, double_quant: bool = True,
                 expert_pairs_per_token: float | None = None, topology: Topology | None = None,
                 bitsandbytes_before_0_43: bool = False) -> TrainMemory:
    """Per-GPU peak of one training step (steady state: optimizer state already exists).
    ``topology``: how the GPUs are linked, which sets NCCL's buffers (None: ``topology_for(gpu)``).
    ``bitsandbytes_before_0_43``: a stack whose 4-bit layers keep their input (``quantized_layers_save_input``)."""
    notes: list[str] = []
    split = param_split(arch, w)
    n, shard = w.num_gpus, effective_sharding(w)     # offload's sharding: one note says which it is treated as
    if (treated := effective_sharding_note(w)) is not None:
        notes.append(treated)
    cb, tb = compute_bytes(w.precision), trainable_bytes(w.precision)
    mixed = tb == 4 and cb == 2
    t = split.trainable
    frozen = split.frozen_plain * frozen_bytes(w.precision)
    if split.quantized:
        frozen += quantized_weight_bytes(arch, w.quant, double_quant)
    if shard in SHARDED and mixed:
        # DeepSpeed/FSDP mixed precision: 16-bit working weights and gradients, float32 master
        # weights counted with the optimizer (2 + 2 + 12 bytes per parameter for Adam). DeepSpeed ZeRO-3
        # keeps 4 bytes of gradients per parameter shard (its 16-bit gradient partitions, allocated once
        # as grad_partitions_flat_buffer, and the float32 gradients of the optimizer's partition): its own
        # estimator, estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py), counts
        # 18 bytes per parameter over the GPUs (2 + 4 + 12) plus 4 bytes per parameter of the largest layer.
        trained_w, grads = 2.0 * t, (ZERO3_GRADIENT_BYTES if shard == "zero3" else 2.0) * t
        opt = t * (4.0 + optimizer_state_bytes(w.optimizer, 4))
    else:
        trained_w, grads = float(tb * t), float(tb * t)
        opt = t * optimizer_state_bytes(w.optimizer, tb)
    opt_temp = t * optimizer_temp_bytes(w.optimizer, tb) if shard == "ddp" else 0.0
    autocast_copies = 2.0 * split.trainable_linear if mixed and shard == "ddp" else 0.0
    weights = trained_w + frozen
    full_weights = weights
    # data parallelism: the one model of what it adds and shards, as for traced jobs (memory.parallel)
    link, multi_node = ring_of(topology or (topology_for(gpu) if gpu is not None else None), n)
    parallel = data_parallel_memory(
        sharding=shard, count=n, weights_bytes=int(weights), gradients_bytes=int(grads), optimizer_bytes=int(opt),
        layers=arch.num_layers, link_kind=link, multi_node=multi_node, bytes_per_element=2 if (mixed or cb == 2) else 4,
        offload_params=params_offloaded(w, shard),
    )
    weights += parallel.weights_saving_bytes
    grads += parallel.gradients_saving_bytes
    opt += parallel.optimizer_saving_bytes
    # NCCL allocates its buffers outside PyTorch's caching allocator: nvidia-smi's total, not the allocator's peak
    # (memory.parallel, as the traced path adds them in with_data_parallel)
    buckets = float(parallel.bucket_bytes)
    gathered = float(parallel.gather_buffer_bytes)
    notes.extend(parallel.notes)
    cpu = offloaded_host_bytes(w, shard, t, full_weights, frozen)
    if w.offload in ("optimizer", "params"):
        opt, grads = 0.0, 0.0
    if params_offloaded(w, shard):
        weights = 0.0
    if cpu:
        notes.append(offload_note(w, shard, cpu))
    if (load := offload_load_host_bytes(w, shard, split.total)) > cpu:
        notes.append(offload_load_note(w, load))
    if params_offloaded(w, shard):
        notes.append("parameters offloaded: each GPU holds only the gathered working blocks")
    seq = w.tokens_per_sequence
    act = train_activations(arch, trainability(arch, w, bitsandbytes_before_0_43=bitsandbytes_before_0_43),
                            w.batch_size * seq, cb, w.grad_checkpointing,
                            expert_pairs_per_token, LossStack(seq, w.attention, w.logits))
    if w.attention == "eager":
        notes.append(f"eager attention keeps heads × seq² float32 scores per layer ({arch.num_heads} × {seq}²)")
    loss_bytes = 12.0 * arch.vocab_size * w.batch_size * seq
    logits_note = (f"the float32 logits of the loss (vocabulary {arch.vocab_size}) take {loss_bytes / 2**30:.1f} GiB "
                   "of the activations; a chunked or fused cross-entropy (--logits chunked|fused) avoids most of it"
                   if w.logits == "fp32" and loss_bytes > 0.3 * act.peak_bytes and loss_bytes > 2**30 else None)
    # the gradients live through forward with accumulation, and under DeepSpeed ZeRO-3 always (its gradient
    # partitions are one buffer for the whole run); FSDP and DDP free them at zero_grad(set_to_none=True)
    grads_in_forward = grads if (w.grad_accum_steps > 1 or (shard == "zero3" and mixed)) else 0.0
    fwd_total = weights + opt + grads_in_forward + buckets + autocast_copies + gathered + act.peak_bytes
    # the last moment of backward, every gradient present: a trained embedding's CUDA backward holds its partial
    # sums (memory.cuda, the traced path's rule); the optimizer step's temporaries come after it, in the same place
    emb_scratch = float(embedding_backward_scratch_bytes(w.batch_size * seq, arch.vocab_size, arch.hidden_size,
                                                          "float32" if tb == 4 else "bfloat16")
                        if w.finetune == "full" and w.is_training else 0)
    after_backward = max(opt_temp, emb_scratch)
    opt_total = weights + opt + grads + buckets + after_backward
    cublas = cublas_workspace_bytes(gpu, 2)
    fwd_total += cublas
    opt_total += cublas
    if fwd_total >= opt_total:
        parts = {"weights": weights, "gradients": grads_in_forward, "optimizer": opt,
                 "activations": act.peak_bytes, "workspace": gathered + cublas,
                 "other": buckets + autocast_copies}
        workspace_label = "gathered weights + cuBLAS workspace" if gathered > cublas else "workspace"
        if logits_note:     # only where the activations make the peak (at the optimizer step they are 0)
            notes.append(logits_note)
        if autocast_copies:
            notes.append("autocast keeps 16-bit copies of the trained weights from forward until backward uses them")
    else:
        parts = {"weights": weights, "gradients": grads, "optimizer": opt, "activations": 0.0,
                 "workspace": after_backward + cublas, "other": buckets}
        # not cuBLAS's workspace where most of it is: the step's temporaries (torch's foreach Adam(W) holds
        # sqrt(exp_avg_sq) for every parameter at once) or the embedding gradient's partial sums
        workspace_label = ("workspace" if after_backward <= cublas else
                           "embedding backward scratch + cuBLAS" if emb_scratch > opt_temp else
                           f"{w.optimizer_impl} {w.optimizer} step temporaries + cuBLAS")
        if emb_scratch > opt_temp:
            notes.append(f"peak at the end of backward: the embedding gradient's partial sums "
                         f"({emb_scratch / 2**20:.0f} MiB) beside every gradient and the optimizer state")
        else:
            notes.append("peak is at the optimizer step (gradients and optimizer state all present)")
    static = parts["weights"] + parts["gradients"] + parts["optimizer"] + buckets
    spill = opt if is_paged(w.optimizer) else 0.0
    if spill:
        notes.append(f"paged optimizer: up to {spill / 2**30:.2f} GiB of state can move to CPU RAM when the GPU is full")
    est = _finish(parts, static, gpu, notes, workspace_label, outside_allocator_bytes=parallel.nccl_buffer_bytes)
    sync = t * (2 if (mixed or cb == 2) else 4)
    gather = full_weights if shard in ("zero3", "fsdp") else 0.0
    host_weights = host_weights_bytes(w, shard, t, full_weights, frozen)
    return TrainMemory(memory=est, split=split, cpu_offload_bytes=int(cpu), spillable_bytes=int(spill),
                       grad_sync_bytes=int(sync), param_gather_bytes=int(gather),
                       offloaded_weights_bytes=int(host_weights), notes=tuple(notes))


def host_weights_bytes(w: Workload, sharding: str, trained_params: int, weights_bytes: float,
                       frozen_weights_bytes: float) -> float:
    """The parameters ``--offload`` keeps in host RAM, all GPUs' together (0 where they stay on the GPUs,
    ``params_offloaded``): each pass copies a GPU's shard of them in over PCIe to be gathered. FSDP's CPUOffload
    keeps the sharded trained parameters in their own dtype (``offloaded_element_bytes``: the float32 masters under
    AMP) and the frozen weights as loaded; DeepSpeed's ``offload_param`` the 16-bit working weights
    (``weights_bytes``, as one GPU would hold them unsharded)."""
    if not params_offloaded(w, sharding):
        return 0.0
    if sharding == "fsdp":
        return trained_params * offloaded_element_bytes(w.precision, sharding) + frozen_weights_bytes
    return weights_bytes


def offloaded_host_bytes(w: Workload, sharding: str, trained_params: int, weights_bytes: float,
                         frozen_weights_bytes: float) -> float:
    """Host RAM ``--offload`` takes, all GPUs together (their partitions add up to one copy, whatever the count).
    ``sharding``: the one it runs under (``effective_sharding``); ``weights_bytes``: the working weights one GPU
    would hold unsharded, ``frozen_weights_bytes`` the frozen part of them.

    DeepSpeed ZeRO-Offload keeps its partitions in float32 whatever the training precision: the master weights
    (stage_1_and_2's single_partition_of_fp32_groups, stage3's fp32_partitioned_groups_flat), their float32
    gradients and the states its CPU kernels update; ``--offload params`` adds the working 16-bit weights: 16
    bytes a parameter for Adam, 18 with the parameters, once training runs. That is the steady state, not the load:
    DeepSpeed's estimators (estimate_zero2_model_states_mem_needs, and ZeRO-3's without zero_init) take
    ``max(4 x GPUs, 16 or 18)`` bytes a parameter before their 1.5 buffer factor, the larger term being every rank
    loading its own float32 copy of the model before it is partitioned (32 bytes a parameter on 8 GPUs); a model
    loaded in its 16-bit dtype, or under zero.Init, does not. The load's peak is not counted here.
    FSDP has one offload, CPUOffload(offload_params=True), whichever ``--offload`` said (``launch.sharding``): the
    sharded parameters themselves (float32 under AMP: they are the masters) and the frozen weights, the gradients in
    the parameters' dtype and torch's optimizer states like them."""
    if w.offload not in ("optimizer", "params"):
        return 0.0
    element_bytes = offloaded_element_bytes(w.precision, sharding)
    host_weights = host_weights_bytes(w, sharding, trained_params, weights_bytes, frozen_weights_bytes)
    if sharding == "fsdp":      # the parameters are the masters: their gradients and states beside them
        return trained_params * (element_bytes + optimizer_state_bytes(w.optimizer, element_bytes)) + host_weights
    cpu = trained_params * (2 * element_bytes + optimizer_state_bytes(w.optimizer, element_bytes))
    return cpu + host_weights


def offload_note(w: Workload, sharding: str, cpu_bytes: float) -> str:
    """What ``--offload`` puts in CPU RAM under ``sharding`` (``effective_sharding``), with the amount
    (``TrainMemory.cpu_offload_bytes``: all GPUs' together, what the host RAM of their machines must hold beside
    the job's own). FSDP's CPUOffload keeps the sharded parameters, their gradients and torch's optimizer state
    (``offloaded_host_bytes``)."""
    if sharding == "fsdp":
        what = ("the sharded weights (the masters under AMP), their gradients and the optimizer state, in the "
                "weights' dtype")
    else:
        what = "optimizer state, float32 master weights and float32 gradient partitions"
        if params_offloaded(w, sharding):
            what += " and the weights"
    over = f" of the {w.num_gpus} GPUs' machines" if w.num_gpus > 1 else ""
    return f"offload: {what} live in CPU RAM: {cpu_bytes / 2**30:.1f} GiB of host RAM{over} (cpu_offload_bytes)"


def offload_load_host_bytes(w: Workload, sharding: str, total_params: int) -> float:
    """Host RAM a DeepSpeed ``--offload`` job may take while it loads, all GPUs' together: every rank building its
    own float32 copy of the model before it is partitioned (``ZERO_OFFLOAD_ELEMENT_BYTES`` a parameter a GPU, the
    ``4 x GPUs`` term of DeepSpeed's estimate_zero2_model_states_mem_needs). A model loaded in 16-bit or under
    zero.Init takes less; FSDP (its own loading) and a job without offload: 0."""
    if w.offload not in ("optimizer", "params") or sharding == "fsdp":
        return 0.0
    return float(ZERO_OFFLOAD_ELEMENT_BYTES * total_params * w.num_gpus)


def offload_load_note(w: Workload, load_bytes: float) -> str:
    """The load's host RAM (``offload_load_host_bytes``) where it exceeds the steady state's."""
    over = f" of the {w.num_gpus} GPUs' machines" if w.num_gpus > 1 else ""
    return (f"offload: while loading, each rank may hold its own float32 copy of the model before DeepSpeed "
            f"partitions it: up to {load_bytes / 2**30:.1f} GiB of host RAM{over}, more than in training (load in "
            "16-bit or under deepspeed.zero.Init to avoid it)")


def inference_weight_bytes(arch: DecoderArch, w: Workload, *, double_quant: bool = True) -> float:
    """The served weights: the block linears in ``w.quant`` as the checkpoint stores them (``served_scheme``: its
    group size, zero points, the modules it keeps 16-bit), the rest in the compute dtype; an LM head the
    checkpoint quantizes (GPTQ's and AWQ's ``lm_head``) in ``w.quant`` too."""
    pc = arch.param_counts()
    fb = frozen_bytes(w.precision)
    if w.quant == "none":
        return pc.total * fb
    scheme = served_scheme(w.model, w.quant)
    total = (pc.total - arch.linear_params()) * fb + quantized_weight_bytes(arch, w.quant, double_quant, scheme, fb)
    if scheme.lm_head and pc.lm_head:
        per = quant_bytes_per_param(w.quant, double_quant=double_quant, in_features=arch.hidden_size,
                                    group_size=scheme.group_size, zero_point=scheme.zero_point)
        total -= pc.lm_head * (fb - per)
    return total


def quantize_on_load_bytes(arch: DecoderArch, w: Workload, *, double_quant: bool = True) -> float:
    """Transient of loading a quantized model: one vocabulary × hidden matrix in 16-bit beside its
    quantized copy, (2 + q) bytes an element, on top of the loaded weights.

    Read off LitGPT's nf4 generation rows (bitsandbytes 0.41, Lightning's quantize-on-load), where
    it is the whole gap between weights + KV cache and the measured peak (within 0.2 GB on all
    four models, 1.3B–70B); no constant was fitted, but the mechanism is our reading, unverified.
    None for a checkpoint that stores its weights so quantized (``workload.checkpoint``)."""
    if w.quant == "none" or stored_quant(w.model) == w.quant:
        return 0.0      # a checkpoint stored quantized (its quantization_config) is loaded as it is
    q = quant_bytes_per_param(w.quant, double_quant=double_quant, in_features=arch.hidden_size)
    return arch.vocab_size * arch.hidden_size * (2.0 + q)


@dataclass(frozen=True)
class InferMemory:
    memory: MemoryEstimate
    weights_bytes: float
    kv_cache_bytes: float
    prefill_bytes: float


def mla_cache_note(arch: DecoderArch, engine: str, latent: bool) -> str:
    """What an MLA model's KV cache holds a layer, in the words of the engine that keeps it."""
    rope, latent_width = arch.qk_rope_head_dim, arch.kv_lora_rank + arch.qk_rope_head_dim
    if latent:
        who = "vLLM" if engine == "vllm" else "transformers ≥ 5.15"
        return (f"MLA KV cache: the {latent_width}-wide latent a layer (kv_lora_rank {arch.kv_lora_rank} + rope "
                f"{rope}), as {who} keeps it")
    return (f"MLA KV cache: HF generate (transformers < 5.15) keeps every head's decompressed K and V, "
            f"{arch.num_heads} × ({arch.qk_nope_head_dim} + {rope} + {arch.v_head_dim}) a layer, not the "
            f"{latent_width}-wide latent vLLM keeps")


def infer_memory(arch: DecoderArch, w: Workload, gpu=None, *, prompt_tokens: int, new_tokens: int, batch: int,
                 kv_bytes_per_element: float, double_quant: bool = True, load_transient: bool = True) -> InferMemory:
    """Per-GPU peak of serving ``batch`` requests of ``prompt_tokens`` + ``new_tokens`` tokens.
    With several GPUs a serving engine (vLLM) splits the model by tensor parallelism: weights and KV heads
    divide by N (KV heads are replicated when there are fewer of them than GPUs); HF generate splits it by
    layers (``workload.parallelism.splits_layers``): the GPU with the most layers holds their share of the layer
    weights and of the KV cache, and the larger of the model's ends (embedding; final norm and LM head:
    ``layer_split_weight_bytes``), and the GPU that runs a layer holds its whole prefill activations. MLA's
    cache is what the engine keeps (``decoder.mla_caches_latent``): the latent (vLLM) or, in HF generate before
    transformers 5.15, every head's decompressed K and V.

    HF generate (``w.engine`` "hf") prefills the whole batch in one forward, and its KV cache grows through
    the caching allocator. vLLM prefills a prompt at a time (its scheduler's token budget; chunked prefill)
    into one KV pool allocated once, so the pool has no allocator reserve: static, as the weights.
    ``load_transient`` False: the peak after loading (what vLLM's memory profiling sees), without the transient
    of quantizing while loading (``quantize_on_load_bytes``)."""
    n = w.num_gpus
    latent = engine_caches_mla_latent(w.engine)
    by_layers = splits_layers(w)
    total_weights = inference_weight_bytes(arch, w, double_quant=double_quant)
    # a layer split: the GPU with the most layers holds that share of the layer weights and of the KV cache
    weights = layer_split_weight_bytes(arch, w, total_weights) if by_layers else total_weights / n
    kv_share = layer_split_share(arch, n) if by_layers else arch.kv_cache_share(n, mla_latent=latent)
    kv_total = arch.kv_cache_bytes(prompt_tokens + new_tokens, batch, kv_bytes_per_element,
                                   mla_latent=latent) * kv_share
    kv_prompt = arch.kv_cache_bytes(prompt_tokens, batch, kv_bytes_per_element, mla_latent=latent) * kv_share
    paged = w.engine == "vllm"
    prefilled = 1 if paged else batch       # prompts in one prefill forward
    prefill = prefill_bytes(arch, prefill_forward_tokens(w, gpu, prompt_tokens * prefilled), prefilled,
                            compute_bytes(w.precision)) / (1 if by_layers else n)
    decode = decode_logits_bytes(arch, batch)   # last-position logits and their float32 copy
    notes = []
    if n > 1:
        notes.append(f"{n} GPUs: {serving_split_words(w)}")
    if arch.is_mla:
        notes.append(mla_cache_note(arch, w.engine, latent))
    cublas = cublas_workspace_bytes(gpu, 1)
    load = (quantize_on_load_bytes(arch, w, double_quant=double_quant) / (1 if by_layers else n)  # one matrix
            if load_transient else 0.0)
    if load >= max(prefill + kv_prompt, decode + kv_total):
        parts = {"weights": weights, "gradients": 0, "optimizer": 0, "activations": 0.0,
                 "workspace": load, "other": 0.0}
        notes.append("peak while loading: a vocabulary-sized matrix in 16-bit beside its quantized copy")
    elif prefill + kv_prompt >= decode + kv_total:
        parts = {"weights": weights, "gradients": 0, "optimizer": 0, "activations": prefill,
                 "workspace": cublas, "other": kv_prompt}
    else:
        parts = {"weights": weights, "gradients": 0, "optimizer": 0, "activations": decode,
                 "workspace": cublas, "other": kv_total}
    notes.append("other_bytes is the KV cache at the peak")
    est = _finish(parts, weights + (parts["other"] if paged else 0.0), gpu, notes)
    return InferMemory(memory=est, weights_bytes=weights, kv_cache_bytes=kv_total, prefill_bytes=prefill)
