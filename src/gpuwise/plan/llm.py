"""The closed-form path for decoder LLMs: ``estimate_llm(workload, gpu)`` = memory (gpuwise.memory.llm)
+ time (gpuwise.runtime.llm) + the serving extras of inference.

Fast (no tracing, milliseconds) and valid for any size, so it serves 70B+ models and sweeps over
GPUs, counts and batch sizes. ``gpuwise.trace`` + ``gpuwise.memory`` remain the reference for
small models; tests/llm check that both agree. Fit questions go through ``gpuwise.plan.fit``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpuwise.catalog.model import GPU, not_a_gpu
from gpuwise.catalog.topology import Topology
from gpuwise.memory.llm import (VLLM_MAX_NUM_SEQS, InferMemory, TrainMemory, infer_memory, train_memory,
                               vllm_batch_defaults)
from gpuwise.memory.llm_activations import decode_logits_bytes
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan.errors import PlanError
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION, largest_fitting, usable_bytes
from gpuwise.runtime.llm import decode_step, prefill_parts, serve_time, train_step_time
from gpuwise.runtime.model import StepTime
from gpuwise.runtime.serving_load import (ServingCurve, ServingLoad, concurrency_rule, load_fraction,
                                          serving_load)
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.checkpoint import checkpoint_note
from gpuwise.workload.decoder import DecoderArch, ParamCounts, defaulted_note, load_arch, vision_tower_note
from gpuwise.units import format_bytes, format_request_rate
from gpuwise.workload.model import DEFAULT_GPU_MEMORY_UTILIZATION
from gpuwise.workload.storage import HF_FLOAT_KV_CACHE_DTYPES, compute_bytes, kv_cache_bytes_per_element


@dataclass(frozen=True)
class InferenceEstimate:
    """Serving one batch: ``batch_size`` requests of ``prompt_tokens`` + ``new_tokens`` tokens."""

    prompt_tokens: int
    new_tokens: int
    batch_size: int
    kv_cache_bytes: int                     # at the full context, whole batch, per GPU
    kv_cache_bytes_per_token: int           # one token of one sequence, all layers, per GPU
    weights_bytes: int
    prefill_activation_bytes: int
    ttft_s: float | None = None             # time to first token (prefill)
    # the decode figures: None without a GPU, and for a prefill-only job (new_tokens 0: prompts scored)
    decode_tokens_per_s: float | None = None  # all sequences together, at the mean context
    decode_s: float | None = None           # time to generate all new tokens
    time_per_output_token_s: float | None = None   # TPOT: one decode step, every sequence gets one token
    decode_tokens_per_s_per_user: float | None = None  # what one request sees: 1 / TPOT
    max_context_tokens: int | None = None   # longest prompt+new per sequence that fits, this batch size
    max_batch_size: int | None = None       # most sequences of this length that fit
    serving_reserved_bytes: int | None = None  # --engine vllm: what it grabs, gpu_memory_utilization × GPU memory
    # --engine vllm: the share of the GPU it pre-allocates; None under HF generate (it allocates as it goes)
    gpu_memory_utilization: float | None = None
    # --engine vllm with a GPU: what its KV cache holds (the one vLLM capacity: largest batch, longest context, fit)
    vllm: VllmCapacity | None = None
    # --request-rate: the deployment at that load (replicas, concurrency, utilisation, loaded TTFT/TPOT); None
    # without a rate, without a GPU, or where one replica holds no sequence (gpuwise.runtime.serving_load)
    at_load: ServingLoad | None = None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["vllm"] = self.vllm.to_dict(self.prompt_tokens + self.new_tokens) if self.vllm is not None else None
        d["at_load"] = load_dict(self.at_load) if self.at_load is not None else None
        return d


def load_dict(load: ServingLoad) -> dict:
    """A load's JSON: ``ServingLoad.to_dict`` and ``load`` (``load_fraction``)."""
    return {**load.to_dict(),
            "load": load_fraction(load.request_rate_per_s, load.replicas, load.capacity_per_replica_per_s)}


@dataclass(frozen=True)
class VllmCapacity:
    """What vLLM's KV cache holds on each GPU, vLLM's own rule (``Worker.determine_available_memory``):
    ``gpu_memory_utilization`` of the GPU's memory (as the driver reports it), less the peak of its profiling
    run (``memory_profiling``: the weights after loading, the peak of one dummy forward of max_num_batched_tokens
    tokens and of the sampler over max_num_seqs rows, non-torch memory: the CUDA context; a loading transient
    is freed before the peak counters are reset and is not in it), over the KV cache of a sequence
    (``infer_memory``'s KV rule, tensor-parallel share included). Paged blocks (16 tokens) are not rounded. The one capacity of ``--engine vllm``: the largest batch (``--max-batch``,
    ``-b auto``), the longest context, whether the job fits, and the sequences one replica runs at a load."""

    reserved_bytes: int                  # gpu_memory_utilization × the GPU's memory
    profile_peak_bytes: int              # weights, the profiling forward, CUDA context (no KV cache)
    gpu_memory_utilization: float
    kv_bytes_of: Callable[[int], float] = field(compare=False, repr=False)   # one sequence of N tokens, per GPU
    max_num_seqs: int = VLLM_MAX_NUM_SEQS

    @property
    def kv_budget_bytes(self) -> int:
        return max(0, self.reserved_bytes - self.profile_peak_bytes)

    def sequences(self, context_tokens: int) -> int:
        """Sequences of ``context_tokens`` the cache holds (memory alone; ``batch`` caps it at max_num_seqs)."""
        per_sequence = self.kv_bytes_of(max(1, int(context_tokens)))
        return int(self.kv_budget_bytes // per_sequence) if per_sequence > 0 else 0

    def batch(self, context_tokens: int) -> int:
        """The most sequences of ``context_tokens`` vLLM runs at once: the cache, and ``max_num_seqs``."""
        return min(self.sequences(context_tokens), self.max_num_seqs)

    def holds(self, context_tokens: int, batch: int = 1) -> bool:
        """The fit rule of ``--engine vllm``: the reservation holds the weights, a prefill and the KV cache of
        ``batch`` sequences of ``context_tokens`` (at a load, one: the batch is what the load makes it)."""
        return self.sequences(context_tokens) >= max(1, batch)

    def longest_context(self, batch: int = 1) -> int:
        """The most tokens a sequence may reach with ``batch`` of them in the cache (0: not one token)."""
        return largest_fitting(lambda t: int(self.kv_bytes_of(t) * max(1, batch)), self.kv_budget_bytes,
                               upper=1 << 22)

    def spare_bytes(self, context_tokens: int, batch: int = 1) -> int:
        """The reservation left after the weights, a prefill and the KV cache of ``batch`` sequences of
        ``context_tokens`` (negative: short by that much; ``holds`` where it is not negative)."""
        return int(self.reserved_bytes - self.profile_peak_bytes - self.kv_bytes_of(max(1, int(context_tokens)))
                   * max(1, batch))

    def shortfall(self, context_tokens: int, batch: int = 1) -> str | None:
        """Why the reservation does not hold ``batch`` sequences of ``context_tokens``, in words (None: it does)."""
        if self.holds(context_tokens, batch):
            return None
        gib = 1 << 30
        share = f"vLLM's {self.reserved_bytes / gib:.1f} GiB (gpu_memory_utilization {self.gpu_memory_utilization})"
        if not self.sequences(context_tokens):
            return (f"no room for one sequence's KV cache of {context_tokens:,} tokens: the weights and vLLM's "
                    f"profiling forward need up to {self.profile_peak_bytes / gib:.1f} GiB of {share}")
        what = "one sequence" if batch <= 1 else f"the batch of {batch}"
        return (f"{share} holds the KV cache of {self.sequences(context_tokens):,} sequences of "
                f"{context_tokens:,} tokens after the weights and its profiling forward, not {what}")

    def wording(self, context_tokens: int, batch: int = 1) -> str:
        """The fit line of ``--engine vllm``, as ``fit_wording`` is HF's."""
        short = self.shortfall(context_tokens, batch)
        if short:
            return f"does not fit: {short}"
        gib = 1 << 30
        return (f"fits vLLM's {self.reserved_bytes / gib:.1f} GiB (gpu_memory_utilization "
                f"{self.gpu_memory_utilization}): the weights and its profiling forward take "
                f"{self.profile_peak_bytes / gib:.1f} "
                f"GiB, the KV cache holds {self.sequences(context_tokens):,} sequences of {context_tokens:,} tokens")

    def to_dict(self, context_tokens: int) -> dict:
        return {"reserved_bytes": self.reserved_bytes, "profile_peak_bytes": self.profile_peak_bytes,
                "kv_budget_bytes": self.kv_budget_bytes, "gpu_memory_utilization": self.gpu_memory_utilization,
                "max_num_seqs": self.max_num_seqs, "context_tokens": context_tokens,
                "sequences_at_context": self.sequences(context_tokens)}


@dataclass(frozen=True)
class LlmEstimate:
    workload: Workload
    params: ParamCounts
    trainable_params: int
    memory: MemoryEstimate                  # per GPU
    time: StepTime | None                   # train step, or prefill + decode of one request batch
    inference: InferenceEstimate | None
    flops_per_step: float                   # per GPU: forward (+ backward) of one optimizer step / request batch
    cpu_offload_bytes: int = 0
    spillable_bytes: int = 0
    method: str = "closed-form"
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "params": self.params.to_dict(),
            "trainable_params": self.trainable_params,
            "memory": self.memory.to_dict(),
            "time": self.time.to_dict() if self.time else None,
            "inference": self.inference.to_dict() if self.inference else None,
            "flops_per_step": self.flops_per_step,
            "cpu_offload_bytes": self.cpu_offload_bytes,
            "spillable_bytes": self.spillable_bytes,
            "notes": list(self.notes),
        }


def estimate_llm(workload: Workload, gpu: GPU | None = None, *, double_quant: bool = True,
                 kv_cache_dtype: str | None = None, gpu_memory_utilization: float | None = None,
                 arch: DecoderArch | None = None,
                 headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
                 topology: Topology | None = None, bitsandbytes_before_0_43: bool = False) -> LlmEstimate:
    """Closed-form memory (per GPU) and, with a GPU, time of an LLM training step or request batch.

    ``double_quant``: nf4 with double quantization (QLoRA's default). ``kv_cache_dtype`` ("auto": the compute
    dtype; "fp8"/"int8": 1 byte; "int4") and ``gpu_memory_utilization`` (vLLM's reservation, (0, 1]): the
    workload's own (``--kv-cache-dtype``, ``--gpu-memory-utilization``) where None; given, they replace the
    workload's and are checked as it checks them (WorkloadError: a training job, vLLM's choices, the range).
    ``headroom_fraction``: for the serving
    extras (longest context and largest batch that fit), as in ``gpuwise.plan.fit``. ``topology``: how
    ``workload.num_gpus`` GPUs are linked (``topology_for(gpu, provider)``); None: the GPU's usual machine.
    ``bitsandbytes_before_0_43``: the stack's 4-bit layers keep their inputs for backward (gpuwise.memory.llm).
    """
    if (why := not_a_gpu(gpu, optional=True)) is not None:
        raise PlanError(why)
    given = {k: v for k, v in (("kv_cache_dtype", kv_cache_dtype), ("gpu_memory_utilization", gpu_memory_utilization))
             if v is not None}
    workload = workload.with_(**given) if given else workload
    arch = arch or load_arch(workload.model)
    notes: list[str] = []
    if workload.seq_len is None:
        notes.append("--seq-len not given: 128 tokens assumed (the default for text models)")
    if (defaulted := defaulted_note(workload.model)) is not None:
        notes.append(defaulted)
    if (vision := vision_tower_note(workload.model)) is not None:
        notes.append(vision)
    if (refusal := vllm_context_refusal(workload, arch)) is not None:
        raise PlanError(refusal)
    context = workload.tokens_per_sequence + (0 if workload.is_training else workload.max_new_tokens)
    if arch.context_tokens and context > arch.context_tokens:
        notes.append(f"{context:,} tokens per sequence is past {workload.model}'s context of "
                     f"{arch.context_words()}: estimated as asked, but the model was not trained that long")
    if workload.image_size is not None:
        notes.append("--image-size has no effect on a text model")
    if workload.is_training:
        return _train(arch, workload, gpu, double_quant, notes, topology, bitsandbytes_before_0_43)
    return _infer(arch, workload, gpu, double_quant, headroom_fraction, notes, topology)


def vllm_context_refusal(w: Workload, arch: DecoderArch) -> str | None:
    """Why vLLM would not start for ``w`` (None: it would, or ``w`` is not served by vLLM): its max_model_len,
    prompt + new tokens, past the length vLLM derives from the config (``arch.vllm_max_model_len``: the
    positions times a rope scaling factor), which it refuses (``_get_and_verify_max_len``) unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set. HF generate runs it: its estimate says so in a note instead."""
    limit = arch.vllm_max_model_len
    context = w.tokens_per_sequence + w.max_new_tokens
    if w.is_training or w.engine != "vllm" or not limit or context <= limit:
        return None
    engine = "vLLM (the engine of --request-rate)" if w.engine_default else "--engine vllm"
    return (f"{engine}: --seq-len {w.tokens_per_sequence:,} + --max-new-tokens {w.max_new_tokens:,} = "
            f"{context:,} tokens (max_model_len) is past the {limit:,} vLLM derives from {w.model}'s config, and it "
            f"refuses to start so (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); keep prompt + new tokens within "
            f"{limit:,}, or estimate HF generate (--engine hf), which runs past it")


def _train(arch: DecoderArch, w: Workload, gpu, double_quant: bool, notes: list[str],
           topology: Topology | None, bitsandbytes_before_0_43: bool = False) -> LlmEstimate:
    mem: TrainMemory = train_memory(arch, w, gpu, double_quant=double_quant, topology=topology,
                                    bitsandbytes_before_0_43=bitsandbytes_before_0_43)
    time = (train_step_time(arch, w, gpu, mem, double_quant=double_quant, topology=topology)
            if gpu is not None else None)
    s = w.tokens_per_sequence
    tokens = w.batch_size * s * w.grad_accum_steps
    mult = 6.0 if w.finetune == "full" else (4.0 if w.finetune in ("lora", "qlora") else 2.0)
    flops = (mult / 2) * arch.forward_flops_per_token((s + 1) / 2) * tokens
    if w.grad_checkpointing and w.finetune != "freeze":
        flops += arch.forward_flops_per_token((s + 1) / 2) * tokens
    all_notes = tuple(notes) + mem.notes
    return LlmEstimate(
        workload=w, params=arch.param_counts(), trainable_params=mem.split.trainable,
        memory=replace(mem.memory, notes=all_notes), time=time, inference=None, flops_per_step=flops,
        cpu_offload_bytes=mem.cpu_offload_bytes, spillable_bytes=mem.spillable_bytes, notes=all_notes,
    )


def kv_bytes_per_element(w: Workload, kv_cache_dtype: str | None = None) -> float:
    """Bytes an element of ``w``'s KV cache holds: ``kv_cache_dtype``'s (None: the workload's own, --kv-cache-dtype),
    by ``workload.storage.kv_cache_bytes_per_element``. WorkloadError for a float dtype HF generate cannot hold:
    its cache keeps the keys and values as the model computes them (``compute_bytes``), or transformers' quantized
    codes; it has no setting for another float width."""
    dtype = kv_cache_dtype or w.kv_cache_dtype
    element_bytes = kv_cache_bytes_per_element(dtype, w.precision)
    if w.engine == "hf" and dtype in HF_FLOAT_KV_CACHE_DTYPES and element_bytes != compute_bytes(w.precision):
        raise WorkloadError(f"--kv-cache-dtype {dtype}: HF generate's KV cache holds the keys and values as the model "
                            f"computes them ({compute_bytes(w.precision)} bytes an element at --precision "
                            f"{w.precision}); give auto, or int8 / int4 (transformers' quantized cache)")
    return element_bytes


def _infer(arch: DecoderArch, w: Workload, gpu, double_quant: bool, headroom_fraction: float, notes: list[str],
           topology: Topology | None) -> LlmEstimate:
    kvb = kv_bytes_per_element(w)
    utilization = w.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
    note = checkpoint_note(w.model, w.quant)
    if note:
        notes.append(note)
    load: ServingLoad | None = None
    if w.request_rate_per_s is not None and gpu is not None:
        curve = serving_curve(arch, w, gpu, kv_bytes_per_element=kvb, double_quant=double_quant,
                              gpu_memory_utilization=utilization, headroom_fraction=headroom_fraction,
                              topology=topology)
        load = serving_load(curve, w.request_rate_per_s) if curve is not None else None
        notes.extend(load_notes(w, curve))
        # the memory and the step below are those of the batch one replica runs: vLLM's working set of one
        # request (its KV cache fills the rest of its reservation), or HF's static batch that fits
        # (none fits: batch 1, whose memory says by how much)
        w = w.with_(batch_size=curve.max_batch if curve is not None and w.engine == "hf" else 1)
    prompt, new, batch = w.tokens_per_sequence, w.max_new_tokens, w.batch_size
    mem: InferMemory = infer_memory(arch, w, gpu, prompt_tokens=prompt, new_tokens=new, batch=batch,
                                    kv_bytes_per_element=kvb, double_quant=double_quant)
    per_token = int(round(mem.kv_cache_bytes / max(batch * (prompt + new), 1)))
    extras = dict(prompt_tokens=prompt, new_tokens=new, batch_size=batch, kv_cache_bytes=int(mem.kv_cache_bytes),
                  kv_cache_bytes_per_token=per_token, weights_bytes=int(mem.weights_bytes),
                  prefill_activation_bytes=int(mem.prefill_bytes),
                  gpu_memory_utilization=utilization if w.engine == "vllm" else None)
    time = None
    if gpu is not None:
        st = serve_time(arch, w, gpu, weights_bytes=mem.weights_bytes, prompt_tokens=prompt, new_tokens=new,
                        batch=batch, kv_bytes_per_element=kvb, topology=topology, double_quant=double_quant)
        time = st.step
        total_tokens = prompt + new
        capacity = None
        if w.engine == "vllm":     # the one vLLM capacity: its reservation, not the batch's own peak
            capacity = vllm_capacity(arch, w, gpu, kv_bytes_per_element=kvb, double_quant=double_quant,
                                     gpu_memory_utilization=utilization)
            max_ctx, max_bs = capacity.longest_context(batch), capacity.batch(total_tokens)
            held = "vLLM's KV cache would hold"
            if batch > capacity.max_num_seqs:
                notes.append(f"vLLM runs at most {capacity.max_num_seqs} sequences at once (max_num_seqs): a batch "
                             f"of {batch} is served {capacity.max_num_seqs} at a time unless max_num_seqs is raised")
        else:
            max_ctx = largest_fitting(lambda tokens: _total_at_context(arch, w, gpu, tokens, kvb, double_quant),
                                      usable_bytes(gpu, headroom_fraction), upper=1 << 22)
            max_bs = largest_batch(arch, w, gpu, kv_bytes_per_element=kvb, double_quant=double_quant,
                                   headroom_fraction=headroom_fraction)
            held = "memory would hold"
        if arch.context_tokens and max_ctx > arch.context_tokens:
            limit = (f"max_position_embeddings is {arch.max_position_embeddings:,}"
                     if arch.context_tokens == arch.max_position_embeddings else f"context is {arch.context_words()}")
            notes.append(f"{held} {max_ctx:,} tokens a sequence; the model's {limit}")
            max_ctx = arch.context_tokens
        extras.update(ttft_s=st.ttft_s, decode_tokens_per_s=st.decode_tokens_per_s, decode_s=st.decode_s,
                      time_per_output_token_s=st.decode_step_s,
                      decode_tokens_per_s_per_user=1.0 / st.decode_step_s if st.decode_step_s else None,
                      max_context_tokens=max_ctx, max_batch_size=max_bs, vllm=capacity)
        if capacity is not None:
            extras.update(serving_reserved_bytes=capacity.reserved_bytes)
            notes.append(f"vLLM pre-allocates gpu_memory_utilization={utilization} of the GPU "
                         f"({format_bytes(capacity.reserved_bytes)}) for weights + KV cache, so nvidia-smi shows "
                         f"that, not the {format_bytes(mem.memory.total_bytes)} this batch needs ({total_tokens:,} "
                         f"tokens × {batch})")
    flops = arch.prefill_flops(prompt, batch) + arch.decode_step_flops(prompt + new / 2, batch) * new
    all_notes = tuple(notes) + mem.memory.notes
    return LlmEstimate(
        workload=w, params=arch.param_counts(), trainable_params=0, memory=replace(mem.memory, notes=all_notes),
        time=time, inference=InferenceEstimate(**extras, at_load=load), flops_per_step=flops, notes=all_notes,
    )


def _total_at_context(arch: DecoderArch, w: Workload, gpu, tokens: int, kvb: float, double_quant: bool) -> int:
    """HF's batch with ``tokens`` of prompt + answer, the answer as long as asked (the one fit rule: the upper
    side of the total against the usable memory, as "fits" says)."""
    answer = min(w.max_new_tokens, tokens - 1)
    return infer_memory(arch, w, gpu, prompt_tokens=tokens - answer, new_tokens=answer, batch=w.batch_size,
                        kv_bytes_per_element=kvb, double_quant=double_quant).memory.total_upper_bytes


def largest_batch(arch: DecoderArch, w: Workload, gpu, *, kv_bytes_per_element: float, double_quant: bool = True,
                  headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> int:
    """The most requests of ``w``'s prompt + answer that fit ``gpu`` served as one batch (0: not one), by the
    one fit rule: what ``max_batch_size`` says, and HF's static batch at a load."""
    return largest_fitting(
        lambda b: infer_memory(arch, w, gpu, prompt_tokens=w.tokens_per_sequence, new_tokens=w.max_new_tokens,
                               batch=b, kv_bytes_per_element=kv_bytes_per_element,
                               double_quant=double_quant).memory.total_upper_bytes,
        usable_bytes(gpu, headroom_fraction), upper=1 << 16)


def vllm_capacity(arch: DecoderArch, w: Workload, gpu, *, kv_bytes_per_element: float, double_quant: bool = True,
                  gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION) -> VllmCapacity:
    """vLLM's KV cache on each of ``w.num_gpus`` GPUs of ``gpu`` serving ``w``'s prompts (``VllmCapacity``): its
    profiling run is a forward of max_num_batched_tokens (``vllm_batch_defaults``; chunked prefill: no prompt
    runs more at once) and the sampler over max_num_seqs rows of logits, without the loading transient."""
    def memory(tokens: int) -> InferMemory:
        return infer_memory(arch, w, gpu, prompt_tokens=tokens, new_tokens=0, batch=1,
                            kv_bytes_per_element=kv_bytes_per_element, double_quant=double_quant,
                            load_transient=False)

    defaults = vllm_batch_defaults(gpu)
    profiled = memory(defaults.max_num_batched_tokens)
    # every tensor-parallel rank all-gathers the whole [max_num_seqs, vocab] logits and runs the dummy sampler on
    # them (LogitsProcessor._gather_logits: use_all_gather on CUDA): not split over the GPUs
    sampler = decode_logits_bytes(arch, defaults.max_num_seqs)
    peak = profiled.memory.total_upper_bytes - profiled.kv_cache_bytes + max(0.0, sampler - profiled.prefill_bytes)
    return VllmCapacity(reserved_bytes=int(gpu_memory_utilization * gpu.visible_memory_bytes),
                        profile_peak_bytes=int(peak), gpu_memory_utilization=gpu_memory_utilization,
                        kv_bytes_of=lambda tokens: memory(tokens).kv_cache_bytes, max_num_seqs=defaults.max_num_seqs)


def _knots(max_batch: int) -> tuple[int, ...]:
    """The batch sizes a load curve is computed at: 1, 2, 3, 4, 6, 8, 12, 16 … (powers of two and 1.5× them)
    below ``max_batch``, and ``max_batch``."""
    out, k = {1, max_batch}, 2
    while k < max_batch:
        out.update(x for x in (k, 3 * k // 2) if x < max_batch)
        k *= 2
    return tuple(sorted(out))


def serving_curve(arch: DecoderArch, w: Workload, gpu, *, kv_bytes_per_element: float, double_quant: bool = True,
                  gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
                  headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
                  topology: Topology | None = None) -> ServingCurve | None:
    """One replica (``w.num_gpus`` GPUs, tensor parallel) as the queueing of ``gpuwise.runtime.serving_load``
    needs it: prefill and decode at a few batch sizes from the one prefill and decode model, and the most
    sequences at once. vLLM: the KV cache at the mean context P + N/2 and ``max_num_seqs`` (``VllmCapacity``),
    where one sequence's whole context fits at all; HF: ``--batch-size``, or the largest static batch that fits
    (``largest_batch``). None where not one sequence fits."""
    prompt, new = w.tokens_per_sequence, w.max_new_tokens
    weights = infer_memory(arch, w, gpu, prompt_tokens=prompt, new_tokens=new, batch=1,
                           kv_bytes_per_element=kv_bytes_per_element, double_quant=double_quant).weights_bytes
    context = prompt + new / 2
    if w.engine == "vllm":
        capacity = vllm_capacity(arch, w, gpu, kv_bytes_per_element=kv_bytes_per_element, double_quant=double_quant,
                                 gpu_memory_utilization=gpu_memory_utilization)
        in_cache = capacity.sequences(int(context)) if capacity.holds(prompt + new) else 0
        max_batch = min(in_cache, capacity.max_num_seqs)
        limit = (f"vLLM's max_num_seqs {capacity.max_num_seqs}" if in_cache >= capacity.max_num_seqs else
                 f"the KV cache: {in_cache} sequences of {int(context):,} tokens (the mean context) in "
                 f"gpu_memory_utilization {gpu_memory_utilization}")
    else:
        fitting = largest_batch(arch, w, gpu, kv_bytes_per_element=kv_bytes_per_element, double_quant=double_quant,
                                headroom_fraction=headroom_fraction)
        max_batch = min(w.batch_size, fitting)
        limit = (f"--batch-size {w.batch_size}" if max_batch == w.batch_size else
                 f"memory: the largest static batch of {prompt + new:,} tokens that fits is {fitting}")
    if max_batch < 1:
        return None
    knots = _knots(max_batch)

    def first_token_s(batch: int) -> float:
        return prefill_parts(arch, w, gpu, weights_bytes=weights, prompt_tokens=prompt, batch=batch,
                             topology=topology).ttft_s

    one_prompt = first_token_s(1)     # vLLM prefills each arriving prompt; HF a static batch's prompts together
    first = tuple(one_prompt if w.engine == "vllm" else first_token_s(b) for b in knots)
    decode = tuple(decode_step(arch, w, gpu, weights_bytes=weights, context_tokens=context, batch=b,
                               kv_bytes_per_element=kv_bytes_per_element, topology=topology).step_s for b in knots)
    return ServingCurve(engine=w.engine, new_tokens=new, batches=knots, first_token_s=first, decode_step_s=decode,
                        max_batch=max_batch, batch_limit=limit)


def load_notes(w: Workload, curve: ServingCurve | None) -> list[str]:
    """What a load's figures assume, said once with them."""
    rate = w.request_rate_per_s
    said = [f"{format_request_rate(rate)} arriving as a Poisson stream, each {w.tokens_per_sequence:,} prompt + "
            f"{w.max_new_tokens:,} new tokens"]
    if w.engine == "vllm":
        said.append("vLLM continuous batching: the batch is what the load makes it (--batch-size is not used), up "
                    "to " + (curve.batch_limit if curve is not None else "what the KV cache holds") +
                    f"; {concurrency_rule()}; TTFT waits for the prefill slot (M/D/1), TPOT is stretched by the "
                    "prefills interleaved (docs/llm.md)")
    else:
        said.append("HF generate: static batches served one after another (no continuous batching), up to "
                    + (curve.batch_limit if curve is not None else f"--batch-size {w.batch_size}")
                    + "; a request waits for the batch in progress, then runs with its own (docs/llm.md)")
    return said
