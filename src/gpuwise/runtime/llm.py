"""Time of an LLM training step and of serving a request batch, in closed form.

Training: the GPU time of the kernels one micro-batch runs (``gpuwise.runtime.llm_kernels``: every GEMM,
  attention kernel and memory-bound kernel of the forward, the backward and, with gradient checkpointing,
  the blocks' recomputed forward), listed from the architecture's shapes and timed by the per-kernel laws,
  calibration (``calibration``: the shipped one by default, as the traced path) and kernel latency of
  ``gpuwise.runtime.kernels``, as a traced step is. A micro-batch is never faster than reading its weights
  once per pass. QLoRA/int8 dequantise every quantized weight in each pass (memory-bound); the optimizer
  step moves what its implementation does (``workload.storage.optimizer_step_bytes``: torch's default
  foreach AdamW makes seven passes over the states, the fused kernel one), memory-bound.
  Communication: ``gpuwise.runtime.comm.data_parallel_comm``, the same model traced workloads use, with the
  forward and backward times of those kernels.
Inference: prefill is the forward's kernels over the prompts, timed as above (never faster than reading
  the weights once); decode's arithmetic is its GEMMs at the tiled law, and it reads all weights (for MoE,
  the experts the batch touches) and the KV cache once per generated token: bytes / (bandwidth × 0.80), which is
  what engines with CUDA graphs reach at small batch (``--engine vllm``). HF ``generate`` in eager
  mode (``--engine hf``, the default) also issues every operator of every layer from Python for each
  token: ~42 kernel-launching operators, ~10 views and ~10 module calls per decoder layer (RMSNorm ×2,
  four attention and three MLP projections, rotary embedding, the KV-cache update, SDPA, residuals),
  each at the eager host cost of ``gpuwise.runtime.host`` (measured on the build machine's CPU, CUDA
  launch a prior), plus the generation loop's own per-token work (logits processing, stopping
  criteria: ``HF_GENERATE_STEP_S``, a prior). A token takes the larger of the GPU's and the host's time
  (the smooth maximum the per-operator predictor uses). For Llama-2-7B on an A100 this gives ~50
  tokens/s at batch 1, a third to a half of what a CUDA-graph engine reaches, as HF users report.
Several GPUs: vLLM splits every layer by tensor parallelism, and each layer's two all-reduces carry the
  tokens in flight × hidden size × the activation's bytes (a prompt's tokens in a prefill, one a sequence in a
  decode step: 512 KB for 32 sequences of Llama-3-70B in bf16), at NCCL's latency and the links' bandwidth
  (``gpuwise.runtime.comm.collective_s``). HF ``generate`` (``device_map="auto"``) splits the model by layers
  and runs them one GPU after another (``gpuwise.workload.parallelism.splits_layers``): a token takes one
  GPU's time for all the weights and the whole KV cache, plus a hand-off of the hidden states between
  consecutive GPUs.
Quantized weights (``--quant``, or a checkpoint's own FP8) run through their library's kernels
  (``gpuwise.runtime.quant_linears``: bitsandbytes' gemv_4bit at one row, dequantize_4bit + a 16-bit GEMM
  above it, LLM.int8()'s dozen kernels and two host waits a linear, vLLM's eager mode for 8-bit): their
  traffic at those kernels' rates, their extra kernels and eager calls, their host waits (``paced_s``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog.resolve import is_mig_slice
from gpuwise.catalog.topology import PCIE_X16_GBS, Topology, topology_for
from gpuwise.runtime.accuracy import LLM_REGIME, LLM_TRAIN_REGIME
from gpuwise.runtime.calibration import Calibration, load_calibration
from gpuwise.runtime.comm import collective_s, data_parallel_comm, topology_notes, weak_scaling_parts
from gpuwise.runtime.host import CUDA_LAUNCH_S, PYTHON_FORWARD_DEFAULT_S, VIEW_S, listed_step_host_s
from gpuwise.runtime.llm_kernels import decode_compute_s, prefill, train_passes
from gpuwise.runtime.predict import smooth_max, step_pace
from gpuwise.runtime.quant_linears import (GEMV_4BIT_BW_EFF, QuantLinears, fp8_refusal, fp8_tensor_cores, linear_path,
                                            quant_linears, vllm_cuda_graphs)
from gpuwise.runtime.model import StepPace, StepTime
from gpuwise.runtime.rates import fallback_warning
from gpuwise.workload import Workload
from gpuwise.workload.checkpoint import served_scheme
from gpuwise.workload.decoder import DecoderArch, engine_caches_mla_latent
from gpuwise.workload.parallelism import (ZERO_OFFLOAD_CPU_OPTIMIZERS, effective_sharding, layer_split_total_bytes,
                                          params_offloaded, splits_layers)
from gpuwise.workload.precision import parse
from gpuwise.workload.storage import (compute_bytes, frozen_bytes, offloaded_element_bytes, optimizer_state_bytes,
                                      optimizer_step_bytes, quant_bytes_per_param, trainable_bytes)

MEM_EFF = 0.75                 # streaming kernels (dequantise, optimizer): share of datasheet bandwidth
DECODE_BW_EFF = 0.80
CPU_ADAM_PARAMS_PER_S = 1.0e9  # DeepSpeed CPU-Adam on one server socket (assumed)
# with --offload, the step's own part: the CPU optimizer step and the PCIe copies to and from the host
OFFLOAD_CLASS = "offload"
HOST_COPY_EFF = 0.70           # pinned host <-> GPU copies reach ~70% of the PCIe x16 rate (assumed)
# HF generate, eager: what Python issues per decoder layer per token (counted from transformers' Llama
# layer, sdpa attention), and the generation loop's own work per token (a prior).
HF_KERNEL_OPS_PER_LAYER = 42
HF_VIEWS_PER_LAYER = 10
HF_MODULE_CALLS_PER_LAYER = 10
HF_GENERATE_STEP_S = 1.5e-3
# vLLM's Llama layer in a decode step (vllm/model_executor/models/llama.py): fused add + RMSNorm, QKV GEMM,
# rotary embedding, paged attention, o_proj GEMM, fused add + RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM;
# the tensor-parallel all-reduces are timed apart (tp_comm_s)
VLLM_KERNELS_PER_LAYER = 9
TP_ALL_REDUCES_PER_LAYER = 2   # Megatron-style layer: after attention's o_proj and after the MLP's down_proj
# A host wait for the GPU (LLM.int8()'s outlier test, transformers' FP8Linear): the read-back's launch, and the
# drained GPU idle until the next eager call has issued its kernel (a prior: one eager call and two launches)
SYNC_S = PYTHON_FORWARD_DEFAULT_S + 2 * CUDA_LAUNCH_S


# transformers' sparse MoE block (4.57: qwen3_moe, qwen2_moe, mixtral ``SparseMoeBlock.forward``), eager, per MoE
# layer: the router GEMM, softmax, topk, the top-k renormalisation (sum, div), the cast, zeros, one_hot, sum,
# greater and ``nonzero`` (expert_hit: the host reads it back to loop) in place of the dense MLP's five
# (gate, up, act, mul, down); then per expert hit: ``self.experts[expert_idx]`` (a 0-d GPU tensor as an index:
# ``.item()``, a host wait), ``torch.where(mask)`` (nonzero: another), the mask's and the hidden states' gathers,
# gate, up, act, mul, down, the routing weights' gather, mul and ``index_add_``; squeeze, reshape and ``[None]``
# views; the expert's MLP and its four submodules called.
HF_MOE_OPS_PER_LAYER = 11
HF_DENSE_MLP_OPS = 5
HF_MOE_SYNCS_PER_LAYER = 1
HF_EXPERT_OPS = 11
HF_EXPERT_VIEWS = 3
HF_EXPERT_MODULE_CALLS = 5
HF_EXPERT_SYNCS = 2


@dataclass(frozen=True)
class ExpertLoop:
    """transformers' Python loop over the experts a forward's tokens hit, all MoE layers: what it issues."""

    hits_per_layer: float       # distinct experts hit (``DecoderArch.expert_share``: uniform routing assumed)
    kernels: float              # beyond the dense MLP's
    host_s: float               # eager calls, views and module calls, beyond the dense layer's
    syncs: float                # host waits for the GPU (nonzero, .item())

    def words(self) -> str:
        return (f"HF's loop over experts (transformers' sparse MoE block): ~{self.hits_per_layer:.1f} experts hit a "
                f"layer (uniform routing assumed), each ~{HF_EXPERT_OPS} eager calls and {HF_EXPERT_SYNCS} host waits "
                "for the GPU")


def hf_expert_loop(arch: DecoderArch, rows: float) -> ExpertLoop | None:
    """The expert loop of one eager HF forward over ``rows`` tokens (None without routed experts): the distinct
    experts ``rows`` × top-k picks hit among ``num_experts``, E (1 - (1 - k/E)^rows), under uniform routing."""
    if not arch.is_moe:
        return None
    hits = arch.num_experts * arch.expert_share(rows)
    layers = arch.num_moe_layers
    ops = layers * (HF_MOE_OPS_PER_LAYER - HF_DENSE_MLP_OPS + hits * HF_EXPERT_OPS)
    host_s = (ops * (PYTHON_FORWARD_DEFAULT_S + CUDA_LAUNCH_S)
              + layers * hits * (HF_EXPERT_VIEWS * VIEW_S + HF_EXPERT_MODULE_CALLS * PYTHON_FORWARD_DEFAULT_S))
    return ExpertLoop(hits, ops, host_s, layers * (HF_MOE_SYNCS_PER_LAYER + hits * HF_EXPERT_SYNCS))


def hf_decode_host_s(arch: DecoderArch) -> float:
    """Host time of one eager decode step of HF ``generate`` (all layers, one token for the batch)."""
    per_layer = (HF_KERNEL_OPS_PER_LAYER * (PYTHON_FORWARD_DEFAULT_S + CUDA_LAUNCH_S)
                 + HF_VIEWS_PER_LAYER * VIEW_S + HF_MODULE_CALLS_PER_LAYER * PYTHON_FORWARD_DEFAULT_S)
    return arch.num_layers * per_layer + HF_GENERATE_STEP_S


def vllm_eager_host_s(arch: DecoderArch) -> float:
    """Host time of one decode step of vLLM without CUDA graphs (``enforce_eager``): its fused layer's kernels
    (``VLLM_KERNELS_PER_LAYER``), each an eager call."""
    return arch.num_layers * VLLM_KERNELS_PER_LAYER * (PYTHON_FORWARD_DEFAULT_S + CUDA_LAUNCH_S)


def quant_reads_s(q: QuantLinears, gpu) -> float:
    """GPU time of the quantized linears' weight reads (``gpuwise.runtime.quant_linears``): what GEMMs read at
    the share of the bandwidth a CUDA-graph decode reaches, bitsandbytes' 4-bit GEMV at its own."""
    bw = _bandwidth(gpu)
    return q.matmul_bytes / (bw * DECODE_BW_EFF) + q.gemv_bytes / (bw * GEMV_4BIT_BW_EFF)


def quant_around_s(q: QuantLinears, gpu, cal: Calibration) -> float:
    """GPU time of the kernels around them (absmax, dequantization, activation passes) at a streaming kernel's
    share of the bandwidth, and every extra kernel's gap."""
    return q.stream_bytes / (_bandwidth(gpu) * MEM_EFF) + q.extra_kernels * cal.p("kernel_latency_s")


def quant_host_s(q: QuantLinears | None) -> float:
    """Eager host time of the quantized linears' calls beyond a 16-bit linear's."""
    return q.extra_eager_calls * (PYTHON_FORWARD_DEFAULT_S + CUDA_LAUNCH_S) if q is not None else 0.0


def paced_s(gpu_s: float, host_s: float, syncs: float) -> float:
    """A step from its GPU and host times: the smooth maximum (the host issues ahead of the GPU); where the host
    waits for the GPU ``syncs`` times, it cannot issue past a wait, so each segment between waits is its own
    smooth maximum (segments taken alike: the same) and every wait costs ``SYNC_S``."""
    return smooth_max(gpu_s, host_s) + syncs * SYNC_S


def _warnings(gpu, precision: str) -> list[str]:
    warning = fallback_warning(gpu, precision)
    return [warning] if warning else []


def _pcie_bytes_per_s(gpu) -> float:
    """Host <-> GPU copies (offload): the PCIe generation's x16 rate at what copies reach."""
    return PCIE_X16_GBS.get(int(gpu.pcie_gen or 4), PCIE_X16_GBS[4]) * HOST_COPY_EFF * 1e9


def _bandwidth(gpu) -> float:
    return gpu.memory_bandwidth_gbs * 1e9


def train_step_time(arch: DecoderArch, w: Workload, gpu, mem, *, double_quant: bool = True,
                    topology: Topology | None = None, calibration: Calibration | None = None) -> StepTime:
    """``mem``: the closed-form memory of the step (gpuwise.memory.llm.TrainMemory): split and sync sizes.
    ``topology``: how the GPUs are linked (None: ``topology_for(gpu)``, the GPU's usual machine).
    ``calibration``: the time model's factors (None: the shipped one, as the traced path)."""
    warnings = _warnings(gpu, w.precision)
    cal = calibration or load_calibration()
    n = w.num_gpus
    sharding = effective_sharding(w)     # what offload runs under (ZeRO-2/3), as the memory and the launch price
    kernels = train_passes(arch, w, gpu, cal)
    micro = kernels.total
    t = mem.split.trainable
    blocks_grad = w.finetune != "freeze"
    recompute = w.grad_checkpointing and blocks_grad
    passes = 1 + (1 if blocks_grad else 0) + (1 if recompute else 0)
    bw = _bandwidth(gpu)
    dequant_s = dequant_one_gpu_s = 0.0
    if mem.split.quantized:
        qb = quant_bytes_per_param(w.quant, double_quant=double_quant, in_features=arch.hidden_size)
        shard = n if sharding in ("zero3", "fsdp") and n > 1 else 1
        dequant_one_gpu_s = passes * mem.split.quantized * (qb + 2.0) / (bw * MEM_EFF)
        dequant_s = dequant_one_gpu_s / shard
    # a micro-batch cannot run faster than reading its weights once per pass
    weights_s = passes * mem.memory.weights_bytes / (bw * MEM_EFF)
    micro_compute = micro.total_s
    # eager PyTorch issues the kernels from one host thread: a micro-step takes about the larger of the GPU's
    # and the host's time (the smooth maximum the traced path takes; recomputed blocks are forward calls)
    micro_host_s = listed_step_host_s(kernels.forward.kernels + kernels.recompute.kernels, kernels.backward.kernels)
    micro_device_s = max(micro_compute, weights_s) + dequant_s
    micro_s = smooth_max(micro_device_s, micro_host_s)

    # optimizer step
    tb = trainable_bytes(w.precision)
    sharded = sharding in ("zero1", "zero2", "zero3", "fsdp") and n > 1
    t_local = t / n if sharded else t

    copies = offload_copies(w, sharding, mem)

    def optimizer_s(params: float) -> float:
        if w.optimizer == "none":
            return 0.0
        if w.offload != "none":
            return (cpu_optimizer_s(w.optimizer, params)
                    + params * copies.weights_back_bytes_per_param / _pcie_bytes_per_s(gpu))
        step_bytes = optimizer_step_bytes(w.optimizer, tb, w.optimizer_impl,
                                          grad_scaler=parse(w.precision).needs_grad_scaler)
        return params * step_bytes / (bw * MEM_EFF)

    opt_s = optimizer_s(t_local)
    if w.optimizer != "none" and w.offload != "none":
        warnings.append(cpu_optimizer_warning(w.optimizer, sharding))
    # offloaded parameters (--offload params; any offload under FSDP): the weights cross PCIe from the host in
    # every pass, and every micro-batch's gradients go out to the host (the offload part, not the GPU's)
    def gradients_out_s(params: float) -> float:
        return params * copies.gradients_out_bytes_per_param / _pcie_bytes_per_s(gpu)

    micro_copies_s = passes * copies.weights_in_bytes_per_pass / _pcie_bytes_per_s(gpu) + gradients_out_s(t_local)
    micro_s += micro_copies_s

    # communication: the one data-parallel model (gpuwise.runtime.comm), as for traced models
    comm_exposed = overhead_s = 0.0
    if n > 1:
        comm = data_parallel_comm(
            sharding=sharding, count=n, gpu=gpu, grad_bytes=mem.grad_sync_bytes,
            param_bytes=mem.param_gather_bytes or mem.grad_sync_bytes,
            forward_s=kernels.forward.total_s, backward_s=kernels.backward.total_s + kernels.recompute.total_s,
            layers=arch.num_layers, micro_steps=w.grad_accum_steps, topology=topology,
        )
        accum = w.grad_accum_steps
        one_gpu_s = (accum * (micro_s + dequant_one_gpu_s - dequant_s + gradients_out_s(t) - gradients_out_s(t_local))
                     + optimizer_s(t))
        parts = weak_scaling_parts(comm.exposed_s, accum * micro_s + opt_s, one_gpu_s)
        comm_exposed, overhead_s = parts.communication_s, parts.sharding_overhead_s
        warnings.extend(comm.notes)
    accum = w.grad_accum_steps
    step_s = accum * micro_s + opt_s + comm_exposed + overhead_s
    by_class = {c: accum * s for c, s in micro.by_class_s.items()}
    # offloaded: the CPU's optimizer step and the PCIe copies are their own part, not the GPU's bandwidth
    offload_s = accum * micro_copies_s + opt_s if w.offload != "none" else 0.0
    by_class["memory"] = accum * (dequant_s + max(weights_s - micro_compute, 0.0)) + (0.0 if w.offload != "none"
                                                                                       else opt_s)
    by_class["launch"] = accum * (micro_s - micro_copies_s - micro_device_s)      # the GPU waiting for the host
    if w.offload != "none":
        by_class[OFFLOAD_CLASS] = offload_s
    cpu_s = cpu_optimizer_s(w.optimizer, t_local) if w.offload != "none" else 0.0
    # the host's side against the GPU's, by the traced step's own rule (``predict.step_pace``), so that a
    # calibrated step (gpuwise.calibrate.apply) re-derives its bound and launch warning from its own figures.
    # The GPU's busy time: an offloaded optimizer step is the CPU's work and PCIe copies (the offload part), not it
    gpu_optimizer_s = opt_s if w.offload == "none" else 0.0
    pace = StepPace(gpus_s=step_s, communication_s=comm_exposed, host_s=accum * micro_host_s,
                    device_s=accum * micro_device_s + gpu_optimizer_s, kernels=accum * micro.kernels, compiled=False,
                    device_bound=("memory" if accum * micro.streaming_s + by_class["memory"] > accum * micro.tensor_s
                                  else "compute"))
    pace_bound, _, pace_warnings = step_pace(pace)
    bound = "communication" if comm_exposed > accum * micro_compute else (
        offload_bound(cpu_s=cpu_s, copies_s=offload_s - cpu_s, gpu_s=accum * max(micro_device_s, micro_host_s))
        or pace_bound)
    warnings.extend(pace_warnings)
    if arch.is_moe:
        loop = hf_expert_loop(arch, w.batch_size * w.tokens_per_sequence)
        warnings.append(f"MoE: experts assumed evenly loaded and run as dense GEMMs per expert; {loop.words()}, "
                        "not counted in training: slower at small batch")
    samples = w.batch_size * accum * n
    return StepTime(gpu=gpu.id, count=n, step_time_s=step_s, samples_per_s=samples / step_s,
                    by_class_s=by_class, bound=bound, compute_s=accum * micro_s + opt_s,
                    communication_s=comm_exposed, sharding_overhead_s=overhead_s, warnings=tuple(warnings),
                    micro_step_s=micro_s, optimizer_s=opt_s,
                    kernel_launches=accum * micro.kernels, device_s=pace.device_s,
                    host_s=pace.host_s, regime=train_regime(arch, w, gpu), pace=pace)


@dataclass(frozen=True)
class OffloadCopies:
    """What one GPU copies over PCIe between itself and the host under ``--offload``, in bytes."""

    weights_in_bytes_per_pass: float = 0.0      # offloaded parameters: its shard, copied in to be gathered
    gradients_out_bytes_per_param: float = 0.0  # per trained parameter it updates: its gradient out, each micro-batch
    weights_back_bytes_per_param: float = 0.0   # and its updated working weight, back after the CPU's step


def offload_copies(w: Workload, sharding: str, mem) -> OffloadCopies:
    """The PCIe copies of an offloaded step, per GPU (``sharding``: ``effective_sharding``; ``mem``: the step's
    TrainMemory). The parameters held in host RAM (``mem.offloaded_weights_bytes``: FSDP's float32 masters under AMP)
    come in each pass; the gradient shard goes out in the host copy's dtype (``offloaded_element_bytes``: DeepSpeed
    casts to float32 on the GPU first, FSDP in the parameters' dtype) after every micro-batch's backward, as both
    copy it under accumulation (FSDP's CPUOffload outside ``no_sync``; DeepSpeed's 16-bit partition out and back
    between micro-batches, ``async_accumulate_grad_in_cpu_via_gpu``, and float32 out at the boundary: as many bytes
    for 16-bit weights); DeepSpeed, whose working weights stay on the GPU unless ``--offload params``, copies the
    updated 16-bit partition back once, after the CPU step (FSDP and ZeRO-3's ``offload_param`` update them in host
    RAM)."""
    if w.offload == "none":
        return OffloadCopies()
    back = 0.0 if params_offloaded(w, sharding) else float(compute_bytes(w.precision))
    # --optimizer none: no CPU step for the gradients to go out to
    out = float(offloaded_element_bytes(w.precision, sharding)) if w.optimizer != "none" else 0.0
    return OffloadCopies(weights_in_bytes_per_pass=mem.offloaded_weights_bytes / w.num_gpus,
                         gradients_out_bytes_per_param=out, weights_back_bytes_per_param=back)


def train_regime(arch: DecoderArch, w: Workload, gpu=None) -> str:
    """Whose held-out error a training step's time has (``runtime.accuracy``): every weight of a dense decoder
    trained, no offload, on whole GPUs is what llm-foundry's MPT runs measure (``llm-train``); LoRA, QLoRA, a
    frozen base, offload, MoE and a MIG slice are the closed form's other steps (``llm``), which no public run
    measures."""
    full = (w.finetune == "full" and w.offload == "none" and w.quant == "none" and not arch.is_moe
            and not (gpu is not None and is_mig_slice(gpu)))
    return LLM_TRAIN_REGIME if full else LLM_REGIME


def cpu_step_bytes(optimizer: str) -> float:
    """Bytes the CPU optimizer step of ``--offload`` streams per parameter, in one pass as DeepSpeed's CPU kernels
    run it (csrc/adam/cpu_adam_impl.cpp, csrc/lion/cpu_lion_impl.cpp): the float32 gradient read, the float32
    master read and written, each state (``optimizer_state_bytes``, as CPU RAM holds it) read and written."""
    return 3 * 4.0 + 2 * optimizer_state_bytes(optimizer, 4)


def cpu_optimizer_s(optimizer: str, params: float) -> float:
    """The optimizer step of ``params`` float32 masters on the CPU (``--offload``): DeepSpeed's CPU-Adam at
    ``CPU_ADAM_PARAMS_PER_S``, another optimizer at that rate times its bytes against Adam's (``cpu_step_bytes``:
    the step streams memory), so the state the memory puts in CPU RAM and the time agree."""
    if optimizer == "none":
        return 0.0
    return params * cpu_step_bytes(optimizer) / cpu_step_bytes("adamw") / CPU_ADAM_PARAMS_PER_S


def cpu_optimizer_warning(optimizer: str, sharding: str) -> str:
    """What the CPU optimizer step of ``--offload`` assumes, naming the implementation that runs it."""
    runner = (f"torch's {optimizer} on the CPU (FSDP CPUOffload)" if sharding == "fsdp" else
              ZERO_OFFLOAD_CPU_OPTIMIZERS.get(optimizer, optimizer))
    rate = 1.0 / cpu_optimizer_s(optimizer, 1.0)
    return (f"optimizer step on CPU: assumed {rate:.2g} params/s ({runner}; CPU-Adam's assumed "
            f"{CPU_ADAM_PARAMS_PER_S:.0e}, scaled by the bytes its step moves)")


def offload_bound(*, cpu_s: float, copies_s: float, gpu_s: float) -> str | None:
    """The bound of an offloaded step where its offload part takes longer than the GPU's work (None: it does not):
    "host" where the CPU's optimizer step is most of it, else "communication" (the PCIe copies between the host
    and the GPU)."""
    if cpu_s + copies_s <= gpu_s:
        return None
    return "host" if cpu_s >= copies_s else "communication"


@dataclass(frozen=True)
class ServeTime:
    """Prefill + decode of one request batch; the decode figures are None for a prefill-only job
    (``--max-new-tokens 0``: prompts scored, nothing generated)."""

    ttft_s: float                   # the prefill
    decode_step_s: float | None     # one generated token for the whole batch, at the mean context
    decode_tokens_per_s: float | None   # all sequences together
    decode_s: float | None          # all max_new_tokens
    step: StepTime


@dataclass(frozen=True)
class DecodeStep:
    """One decode iteration: one new token for each of ``batch`` sequences at the mean context."""

    step_s: float                   # what the iteration takes: the smooth maximum of the GPU's and the host's time
    gpu_s: float                    # the GPU's part: max(bytes read, arithmetic) + the GPUs' communication
    host_s: float                   # eager HF generate issuing the kernels from Python (0 for vLLM's CUDA graphs)
    memory_s: float                 # weights touched + KV cache read, at what CUDA-graph engines reach, + the
    #                                 quantized linears' dequantization and activation traffic
    compute_s: float                # the GEMMs at the tiled law, attention at the peak
    tp_comm_s: float                # the GPUs' communication in one iteration: the tensor-parallel all-reduces,
    #                                 or the hand-offs between the GPUs of a layer split (HF generate)
    syncs: float = 0.0              # host waits for the GPU (quantized linears: LLM.int8(), FP8Linear; HF's expert loop)
    quant_path: str = ""            # how the quantized linears run (gpuwise.runtime.quant_linears); "" unquantized

    @property
    def tp_exposed_s(self) -> float:
        """What the GPUs' communication adds to the iteration: less than its time where the host's issue time
        hides part of it."""
        return self.step_s - paced_s(self.gpu_s - self.tp_comm_s, self.host_s, self.syncs)


def weights_read_s(weights_bytes: float, gpu) -> float:
    """Reading the weights once at what CUDA-graph engines reach: the floor of a prefill."""
    return weights_bytes / (_bandwidth(gpu) * DECODE_BW_EFF)


def tp_all_reduces_s(arch: DecoderArch, w: Workload, tokens: float, topology: Topology, *,
                     graph_captured: bool = False) -> float:
    """The tensor-parallel all-reduces of one forward over ``tokens`` tokens on ``w.num_gpus`` GPUs: two a layer
    (``TP_ALL_REDUCES_PER_LAYER``), each of the tokens' hidden states in the activation dtype (tokens × hidden
    size × bytes), at NCCL's latency and the links' bandwidth (``collective_s``)."""
    if w.num_gpus <= 1:
        return 0.0
    size_bytes = tokens * arch.hidden_size * compute_bytes(w.precision)
    return TP_ALL_REDUCES_PER_LAYER * arch.num_layers * collective_s("all_reduce", size_bytes, w.num_gpus, topology,
                                                                     graph_captured=graph_captured)


def layer_handoffs_s(arch: DecoderArch, w: Workload, tokens: float, topology: Topology) -> float:
    """A layer split's forward over ``tokens`` tokens (HF generate, ``splits_layers``): the hidden states go from
    each GPU to the next, ``w.num_gpus`` − 1 copies of tokens × hidden size × bytes, each a hop's latency and
    the bytes at its link's bandwidth (accelerate's ``.to(device)``). The GPUs fill the nodes in order: a hop
    inside a node runs on the node's link, only the hops across a node boundary (nodes − 1 of them) on the
    network."""
    n = w.num_gpus
    if n <= 1:
        return 0.0
    size_bytes = tokens * arch.hidden_size * compute_bytes(w.precision)

    def hop_s(link) -> float:
        return link.latency_s + size_bytes / (link.bus_gbs * 1e9)

    nodes = topology.nodes(n)
    return (n - nodes) * hop_s(topology.ring_link(n)) + (nodes - 1) * hop_s(topology.network)


def split_by_layers(arch: DecoderArch, w: Workload, weights_bytes: float) -> tuple[Workload, float]:
    """A layer split timed as what it is, one GPU after another: the job on one GPU holding all the weights
    (``weights_bytes`` is the fullest GPU's, ``layer_split_weight_bytes``); any other job as it is."""
    if splits_layers(w):
        return w.with_(num_gpus=1), layer_split_total_bytes(arch, w, weights_bytes)
    return w, weights_bytes


def served_linears(arch: DecoderArch, w: Workload, gpu, *, rows: int, double_quant: bool = True) -> QuantLinears | None:
    """The quantized linears of a serving forward over ``rows`` rows on one of ``w.num_gpus`` tensor-parallel GPUs."""
    return quant_linears(arch, w.quant, rows=rows, tp=w.num_gpus, double_quant=double_quant,
                         expert_share=arch.expert_share(rows), gpu=gpu, engine=w.engine,
                         scheme=served_scheme(w.model, w.quant) if w.quant != "none" else None)


def linear_gemm_rate(w: Workload, gpu) -> str | None:
    """The rate the served block linears' GEMMs run at where their quantization sets it (FP8 W8A8 on FP8 tensor
    cores: ``LinearPath.gemm_rate``); None: the compute precision's."""
    if w.quant != "fp8" or gpu is None:
        return None
    return linear_path(w.quant, rows=2, double_quant=True, gpu=gpu, engine=w.engine).gemm_rate


@dataclass(frozen=True)
class PrefillParts:
    """One prefill on one GPU: its kernels, the floor of reading the weights its GEMMs read, the quantized
    linears' kernels around the GEMMs (dequantization, activation passes: serial work), and the
    tensor-parallel all-reduces; HF generate's loop over a mixture's experts (``hf_expert_loop``) adds its kernels'
    gaps, its eager calls' host time and its waits, paced as a decode step paces them."""

    kernels_s: float
    reads_s: float
    around_s: float
    tp_comm_s: float
    loop: ExpertLoop | None = None
    kernel_latency_s: float = 0.0

    @property
    def gpu_s(self) -> float:
        gaps_s = self.loop.kernels * self.kernel_latency_s if self.loop else 0.0
        return max(self.kernels_s, self.reads_s) + self.around_s + gaps_s

    @property
    def ttft_s(self) -> float:
        if self.loop is None:
            return self.gpu_s + self.tp_comm_s
        return paced_s(self.gpu_s, self.loop.host_s, self.loop.syncs) + self.tp_comm_s

    @property
    def memory_bound(self) -> bool:
        return self.reads_s >= self.kernels_s * (1 - 1e-9)


def prefill_parts(arch: DecoderArch, w: Workload, gpu, *, weights_bytes: float, prompt_tokens: int, batch: int,
                  topology: Topology | None = None, calibration: Calibration | None = None,
                  double_quant: bool = True) -> PrefillParts:
    """One prefill of ``batch`` prompts: the forward's kernels, never faster than reading the weights once (an
    untied embedding: the prompts' rows, ``unread_embedding_bytes``), plus
    2 all-reduces a layer over TP GPUs (a layer split, HF generate: the whole forward on one GPU after another,
    and the hand-offs between them). Quantized weights: the GEMMs read what their path gives them
    (bitsandbytes' nf4: the 16-bit copy ``dequantize_4bit`` writes), and the kernels around them
    (dequantization, LLM.int8()'s activation passes) add their traffic and gaps (``gpuwise.runtime.quant_linears``)."""
    cal = calibration or load_calibration()
    topo = topology or topology_for(gpu)
    if splits_layers(w):
        tp_comm = layer_handoffs_s(arch, w, prompt_tokens * batch, topo)
        w, weights_bytes = split_by_layers(arch, w, weights_bytes)
    else:
        tp_comm = tp_all_reduces_s(arch, w, prompt_tokens * batch, topo)
    kernels_s = prefill(arch, w, gpu, cal, prompt_tokens=prompt_tokens, batch=batch, tp=w.num_gpus,
                        linear_rate=linear_gemm_rate(w, gpu)).total_s
    q = served_linears(arch, w, gpu, rows=prompt_tokens * batch, double_quant=double_quant)
    read = max(weights_bytes - unread_embedding_bytes(arch, w, prompt_tokens * batch), 0.0)
    # transformers' sparse MoE block loops over the experts the prompts' tokens hit, in prefill as in decode
    loop = hf_expert_loop(arch, prompt_tokens * batch) if w.engine == "hf" else None
    paced = {"loop": loop, "kernel_latency_s": cal.p("kernel_latency_s")}
    if q is None:
        return PrefillParts(kernels_s, weights_read_s(read, gpu), 0.0, tp_comm, **paced)
    plain = max(read - q.stored_bytes, 0.0)
    return PrefillParts(kernels_s, weights_read_s(plain, gpu) + quant_reads_s(q, gpu), quant_around_s(q, gpu, cal),
                        tp_comm, **paced)


def quant_notes(arch: DecoderArch, w: Workload, gpu, *, batch: int, double_quant: bool = True) -> list[str]:
    """What the quantized linears' path means for this GPU and batch, said with the time."""
    if w.quant == "none":
        return []
    if w.quant == "fp8":
        refusal = fp8_refusal(gpu, w.engine)
        if refusal:
            return [f"cannot serve the FP8 weights here: {refusal}"]
        if not fp8_tensor_cores(gpu):
            return [f"FP8 weights on {gpu.id} (compute capability {gpu.compute_capability}, no FP8 tensor cores): "
                    "vLLM runs them weight-only through its FP8 Marlin kernel, 1 B a weight read, GEMMs at the "
                    "16-bit rate"]
        return ["FP8 weights on FP8 tensor cores: activations quantized per 128-wide group, the GEMMs W8A8 at the "
                "fp8 rate"]
    if w.quant in ("w4a16", "w8a16"):
        who = "vLLM's Marlin kernel" if w.engine == "vllm" else "HF's AWQ/GPTQ kernels (assumed Marlin-like)"
        return [f"--quant {w.quant} ({w.quant[1]}-bit weights, 16-bit activations): {who} dequantizes them inside "
                "a 16-bit GEMM, one kernel a linear; the weights' bytes read as stored (gpuwise.runtime.quant_linears)"]
    path = linear_path(w.quant, rows=batch, double_quant=double_quant, gpu=gpu, engine=w.engine)
    moved = path.matmul_bytes + path.gemv_bytes + path.stream_bytes
    syncs = f", {path.syncs} host waits for the GPU" if path.syncs else ""
    return [f"--quant {w.quant} decode at batch {batch}: bitsandbytes' {path.name}, ~{moved:.2f} B moved a weight "
            f"(16-bit: 2), {path.kernels} kernels a linear{syncs} (gpuwise.runtime.quant_linears)"]


def decode_kernels(arch: DecoderArch, engine: str) -> int:
    """Kernels of one decode step: per layer, what eager HF issues (``HF_KERNEL_OPS_PER_LAYER``) or vLLM's
    fused layer (``VLLM_KERNELS_PER_LAYER``), and the final norm and LM head."""
    per_layer = VLLM_KERNELS_PER_LAYER if engine == "vllm" else HF_KERNEL_OPS_PER_LAYER
    return arch.num_layers * per_layer + 2


def unread_embedding_bytes(arch: DecoderArch, w: Workload, rows: int) -> float:
    """Stored weight bytes a forward over ``rows`` tokens does not read: an untied input embedding's table but for
    those rows (``Embedding.cpp``: the lookup is an ``index_select``), on one of ``w.num_gpus`` tensor-parallel GPUs
    (each holds a vocabulary shard). A tied table is the LM head's weight, read whole: 0."""
    if arch.tie_word_embeddings:
        return 0.0
    elem = frozen_bytes(w.precision)
    table = arch.vocab_size * arch.hidden_size * elem / max(w.num_gpus, 1)
    return max(table - rows * arch.hidden_size * elem, 0.0)


def decode_step(arch: DecoderArch, w: Workload, gpu, *, weights_bytes: float, context_tokens: float, batch: int,
                kv_bytes_per_element: float, topology: Topology | None = None,
                calibration: Calibration | None = None, double_quant: bool = True) -> DecodeStep:
    """One decode iteration of ``batch`` sequences at ``context_tokens`` (``weights_bytes`` per GPU): the
    one decode model, for a static batch (``serve_time``) and for continuous batching at a load
    (``gpuwise.plan.llm``). Quantized weights (``w.quant``) go through their library's kernels
    (``gpuwise.runtime.quant_linears``): their traffic at those kernels' rates, their extra kernels, their eager
    calls (HF; vLLM without CUDA graphs) and host waits. Several GPUs: tensor parallelism's all-reduces of the
    batch's hidden states (``tp_all_reduces_s``), or HF generate's layer split (``splits_layers``): the whole
    step on one GPU after another and the hand-offs between them (``layer_handoffs_s``)."""
    cal = calibration or load_calibration()
    topo = topology or topology_for(gpu)
    handoffs_s = layer_handoffs_s(arch, w, batch, topo) if splits_layers(w) else 0.0
    w, weights_bytes = split_by_layers(arch, w, weights_bytes)
    n = w.num_gpus
    latent = engine_caches_mla_latent(w.engine)     # the cache the step reads, as infer_memory holds it
    kv_read = (arch.kv_cache_bytes(int(context_tokens), batch, kv_bytes_per_element, mla_latent=latent)
               * arch.kv_cache_share(n, mla_latent=latent))
    q = served_linears(arch, w, gpu, rows=batch, double_quant=double_quant)
    unread = unread_embedding_bytes(arch, w, batch)
    if q is None:
        # weights touched per step (MoE: experts hit by at least one of the batch's tokens)
        touched = weights_bytes
        if arch.is_moe:
            pc = arch.param_counts()
            touched = weights_bytes * (1 - pc.experts / pc.total * (1 - arch.expert_share(batch)))
        mem_s = (max(touched - unread, 0.0) + kv_read) / (_bandwidth(gpu) * DECODE_BW_EFF)
    else:   # the routed experts are quantized linears: the rest is read whole
        plain = max(weights_bytes - q.stored_bytes - unread, 0.0)
        mem_s = (plain + kv_read) / (_bandwidth(gpu) * DECODE_BW_EFF) + quant_reads_s(q, gpu)
    flop_s = decode_compute_s(arch, w, gpu, cal, context_tokens=context_tokens, batch=batch, tp=n,
                              linear_rate=linear_gemm_rate(w, gpu))
    # decode's tensor-parallel all-reduces carry one token's hidden state a sequence (2 a layer); vLLM replays
    # its decode steps as CUDA graphs (vllm/worker/model_runner.py, capture of decode batch sizes), so they pay
    # the hops and the bytes but not an eager call's per-collective latency
    graphs = w.engine == "vllm" and vllm_cuda_graphs(w.quant)
    tp_comm = tp_all_reduces_s(arch, w, batch, topo, graph_captured=graphs) + handoffs_s
    # every kernel's GPU-side gap (ramp-up and tail), as a traced step pays it (kernels.kernel_device_s)
    loop = hf_expert_loop(arch, batch) if w.engine == "hf" else None
    gaps_s = (decode_kernels(arch, w.engine) + (loop.kernels if loop else 0.0)) * cal.p("kernel_latency_s")
    around_s = quant_around_s(q, gpu, cal) if q is not None else 0.0     # serial: not hidden by the GEMMs
    gpu_step_s = max(mem_s, flop_s) + around_s + gaps_s + tp_comm
    if w.engine == "hf":
        host_step_s = hf_decode_host_s(arch) + quant_host_s(q) + (loop.host_s if loop else 0.0)
    else:
        host_step_s = 0.0 if graphs else vllm_eager_host_s(arch) + quant_host_s(q)
    syncs = (q.syncs if q is not None else 0.0) + (loop.syncs if loop else 0.0)
    return DecodeStep(step_s=paced_s(gpu_step_s, host_step_s, syncs), gpu_s=gpu_step_s, host_s=host_step_s,
                      memory_s=mem_s + around_s, compute_s=flop_s, tp_comm_s=tp_comm, syncs=syncs,
                      quant_path=q.path.name if q is not None else "")


def serve_time(arch: DecoderArch, w: Workload, gpu, *, weights_bytes: float, prompt_tokens: int,
               new_tokens: int, batch: int, kv_bytes_per_element: float,
               topology: Topology | None = None, calibration: Calibration | None = None,
               double_quant: bool = True) -> ServeTime:
    """Prefill + decode of one batch of requests; ``weights_bytes`` is per GPU (tensor parallel).
    ``topology``: how the GPUs are linked (None: ``topology_for(gpu)``, the GPU's usual machine).
    ``calibration``: the time model's factors (None: the shipped one, as the traced path).
    ``double_quant``: nf4 with double quantization (bitsandbytes' ``compress_statistics``)."""
    loop = hf_expert_loop(arch, batch) if w.engine == "hf" and new_tokens else None
    prefill_loop = hf_expert_loop(arch, batch * prompt_tokens) if w.engine == "hf" else None
    warnings = (_warnings(gpu, w.precision) + quant_notes(arch, w, gpu, batch=batch, double_quant=double_quant)
                + serving_link_notes(w, topology or topology_for(gpu))
                + ([f"prefill: {prefill_loop.words()}, counted"] if prefill_loop else [])
                + ([f"decode: {loop.words()}, counted"] if loop else []))
    cal = calibration or load_calibration()
    n = w.num_gpus
    pre = prefill_parts(arch, w, gpu, weights_bytes=weights_bytes, prompt_tokens=prompt_tokens, batch=batch,
                        topology=topology, calibration=cal, double_quant=double_quant)
    ttft, tp_comm = pre.ttft_s, pre.tp_comm_s
    prefill_gpu_s = pre.ttft_s - tp_comm      # its kernels, paced by HF's expert loop where there is one
    if new_tokens == 0:     # prefill only (prompts scored): no decode step, no per-token figure
        step = StepTime(gpu=gpu.id, count=n, step_time_s=ttft, samples_per_s=batch / ttft,
                        by_class_s={"prefill": prefill_gpu_s},
                        bound="communication" if tp_comm > prefill_gpu_s else
                        "memory" if pre.memory_bound else "compute",
                        compute_s=prefill_gpu_s, communication_s=tp_comm, warnings=tuple(warnings))
        return ServeTime(ttft_s=ttft, decode_step_s=None, decode_tokens_per_s=None, decode_s=None, step=step)
    d = decode_step(arch, w, gpu, weights_bytes=weights_bytes, context_tokens=prompt_tokens + new_tokens / 2,
                    batch=batch, kv_bytes_per_element=kv_bytes_per_element, topology=topology, calibration=cal,
                    double_quant=double_quant)
    step_s = d.step_s
    warnings.extend(filter(None, [decode_warning(d, w.engine)]))
    decode_s = step_s * new_tokens
    decode_comm_s = d.tp_exposed_s * new_tokens
    total = ttft + decode_s
    step = StepTime(
        gpu=gpu.id, count=n, step_time_s=total, samples_per_s=batch / total if total > 0 else 0.0,
        # by phase, the tensor-parallel communication apart (communication_s): the parts sum to the step
        by_class_s={"prefill": prefill_gpu_s, "decode": decode_s - decode_comm_s},
        # a prefill longer than the whole decode is compute work; the links where they take most of the time
        bound=serving_bound(d, prefill_s=ttft, prefill_bound="compute", decode_s=decode_s,
                            communication_s=tp_comm + decode_comm_s),
        compute_s=prefill_gpu_s + decode_s - decode_comm_s, communication_s=tp_comm + decode_comm_s,
        warnings=tuple(warnings),
    )
    return ServeTime(ttft_s=ttft, decode_step_s=step_s, decode_tokens_per_s=batch / step_s,
                     decode_s=decode_s, step=step)


def serving_link_notes(w: Workload, topology: Topology) -> list[str]:
    """What serving on ``w.num_gpus`` GPUs should say about them: their links (several nodes and the network
    between them, assumed where no provider names one; PCIe without peer-to-peer), as training says it
    (``comm.topology_notes``), and HF generate's layer split."""
    notes = topology_notes(w.num_gpus, topology)
    if splits_layers(w):
        notes.append(f"HF generate on {w.num_gpus} GPUs (device_map=\"auto\"): the layers run one GPU after "
                     "another, so a token takes about one GPU's time for all the weights; the GPUs add memory, "
                     "not speed (--engine vllm: tensor parallelism)")
        if topology.nodes(w.num_gpus) > 1:
            notes.append(f"HF generate's device_map places layers on the GPUs of one machine: {w.num_gpus} GPUs "
                         f"over {topology.nodes(w.num_gpus)} machines is not something it runs")
    return notes


def decode_warning(d: DecodeStep, engine: str, *, vllm_modelled: bool = True) -> str | None:
    """What a host-bound decode step means (None where the GPU sets its pace). ``vllm_modelled``: whether
    ``--engine vllm`` is an estimate gpuwise can give for this model (the closed form's decoders)."""
    if d.host_s <= d.gpu_s:
        return None
    if engine == "hf":
        return (f"decode is host-bound in HF generate (eager): ~{d.host_s * 1e3:.1f} ms of Python and kernel "
                f"launches per token against {d.gpu_s * 1e3:.1f} ms on the GPU; a serving engine with CUDA graphs "
                + ("(--engine vllm) decodes faster" if vllm_modelled else "(vLLM) decodes faster"))
    return (f"decode is host-bound: vLLM runs bitsandbytes 8-bit models without CUDA graphs, ~{d.host_s * 1e3:.1f} "
            f"ms of Python and kernel launches per token against {d.gpu_s * 1e3:.1f} ms on the GPU")


def serving_bound(d: DecodeStep, *, prefill_s: float, prefill_bound: str, decode_s: float,
                  communication_s: float = 0.0) -> str:
    """What dominates a request batch: the GPUs' communication (``communication_s``, exposed, in the prefill and
    the decode) where it takes more than half of it, else the host where it cannot issue a decode step as fast
    as the GPU runs it, else the prefill's own bound where the prefill takes longer than the whole decode, else
    the decode step's."""
    if communication_s > (prefill_s + decode_s) / 2:
        return "communication"
    if d.host_s > d.gpu_s:
        return "launch"
    if prefill_s >= decode_s:
        return prefill_bound
    return "compute" if d.compute_s > d.memory_s else "memory"


def generation_time(prefill: StepTime, d: DecodeStep, *, new_tokens: int, batch: int, engine: str,
                    regime: str) -> ServeTime:
    """A batch's prefill timed elsewhere (``prefill``: a traced forward of the prompts on ``prefill.count`` GPUs,
    each serving its own ``batch``), then ``new_tokens`` decode steps ``d`` (``decode_step``, one GPU's): the
    request batch as ``serve_time`` composes it, by phase. ``regime``: whose held-out error applies
    (``runtime.accuracy.REGIMES``). Its ``micro_step_s`` and ``kernel_launches`` are the prefill's: the traced forward
    whose issue time the prefill's launch warning counts (the decode steps are the closed form's, no traced kernels)."""
    ttft = prefill.step_time_s
    decode_s = d.step_s * new_tokens
    total = ttft + decode_s
    warnings = prefill.warnings + tuple(filter(None, [decode_warning(d, engine, vllm_modelled=False)]))
    step = StepTime(
        gpu=prefill.gpu, count=prefill.count, step_time_s=total, samples_per_s=batch * prefill.count / total,
        by_class_s={"prefill": ttft, "decode": decode_s},
        bound=serving_bound(d, prefill_s=ttft, prefill_bound=prefill.bound, decode_s=decode_s),
        compute_s=total, warnings=warnings, stack=prefill.stack, micro_step_s=prefill.micro_step_s,
        kernel_launches=prefill.kernel_launches, host_s=prefill.host_s + d.host_s * new_tokens,
        device_s=prefill.device_s + d.gpu_s * new_tokens,
        regime=regime)
    return ServeTime(ttft_s=ttft, decode_step_s=d.step_s, decode_tokens_per_s=batch / d.step_s, decode_s=decode_s,
                     step=step)
