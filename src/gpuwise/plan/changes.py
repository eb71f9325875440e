"""The changes that lower a step's memory, each a changed workload (``Remedy``): a smaller micro-batch with more
accumulation steps, AMP, gradient checkpointing, chunked logits, an 8-bit optimizer, a ZeRO stage on several GPUs, a
one-GPU job sharded by ZeRO-3 over several (its effective batch split over them), LoRA and QLoRA, CPU offload; in
serving, half-precision or quantized weights and a smaller batch. Only which changes exist and what each sets:
``plan.remedies`` estimates and prices them."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gpuwise.plan.batch_split import splitting_batch
from gpuwise.plan.profile import largest_divisor_at_most
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.checkpoint import stored_quant, vllm_quantizes_on_load
from gpuwise.workload.parallelism import effective_sharding, offload_optimizer_refusal, params_offloaded


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Remedy:
    change: str              # what to change, as the user would type it
    fields: tuple[tuple[str, object], ...]   # the Workload fields it sets

    def apply(self, w: Workload) -> Workload:
        return w.with_(**dict(self.fields))

    @property
    def workload_fields(self) -> dict:
        return dict(self.fields)


def _remedy(change: str, **fields) -> Remedy:
    return Remedy(change, tuple(fields.items()))


def _precision_remedy(name: str) -> Remedy:
    # the user's choice now, not the default rule's: a GPU without bf16 refuses it rather than running fp16
    return _remedy(f"--precision {name}", precision=name, precision_default=False)


def micro_batch_remedy(w: Workload) -> Remedy | None:
    """Half the micro-batch, twice the accumulation steps: the same effective batch and method, the first
    change people make when a step does not fit."""
    if w.batch_size < 2 or w.batch_size % 2:   # an odd micro-batch cannot be halved keeping the effective batch
        return None
    half, accum = w.batch_size // 2, w.grad_accum_steps * 2
    return _remedy(f"--batch-size {half} --grad-accum {accum}", batch_size=half, grad_accum_steps=accum)


def candidate_remedies(w: Workload, closed_form: bool, *, micro_batch: bool = True) -> list[Remedy]:
    """The changes that lower a step's memory, in the order a practitioner tries them; only those that make a
    job the workload accepts (an 8-bit AdamW under ZeRO-Offload, which steps on DeepSpeed's CPU optimizer, is
    none). ``micro_batch``: include the smaller micro-batch with more accumulation steps (recommend does not:
    it already splits the effective batch wherever the micro-batch does not fit)."""
    return [r for r in _candidates(w, closed_form, micro_batch) if makes_a_job(r, w)]


def makes_a_job(remedy: Remedy, w: Workload) -> bool:
    """Whether the workload accepts ``remedy`` applied to ``w`` (its refusal logged at debug where not)."""
    try:
        remedy.apply(w)
    except WorkloadError as exc:
        logger.debug("not suggested: %s (%s)", remedy.change, exc)
        return False
    return True


def _smaller_quants(w: Workload) -> list[str]:
    """The quantized weights a served job could load instead of its own, smallest saving first: vLLM quantizes a
    16-bit checkpoint as it loads only to FP8 (its usual way to halve the weights; GPUs below compute capability 8.0
    refuse it: ``cannot_run``) and bitsandbytes' 4-bit (``vllm_quantizes_on_load``), transformers also to 8-bit
    (LLM.int8()); none for a checkpoint stored quantized."""
    if stored_quant(w.model) != "none":
        return []    # a checkpoint stored quantized (DeepSeek-V3's FP8, AWQ, GPTQ) is served as stored, not re-quantized
    smaller = {"none": ("fp8", "int8", "nf4"), "int8": ("nf4",)}.get(w.quant, ())
    if w.engine == "vllm":
        return [q for q in smaller if vllm_quantizes_on_load(q)]
    return [q for q in smaller if q != "fp8"]


def _candidates(w: Workload, closed_form: bool, micro_batch: bool) -> list[Remedy]:
    out = []
    if not w.is_training:
        # serving: half-precision weights, quantized weights (closed form), fewer sequences at once
        if w.precision_value.half is None:
            out.extend(_precision_remedy(name) for name in ("bf16", "fp16"))
        if closed_form:
            out.extend(_remedy(f"--quant {q}", quant=q) for q in _smaller_quants(w))
        if w.batch_size > 1:
            out.append(_remedy(f"--batch-size {w.batch_size // 2}", batch_size=w.batch_size // 2))
        return out
    if micro_batch and (smaller := micro_batch_remedy(w)) is not None:
        out.append(smaller)
    if w.precision_value.half is None:
        out.extend(_precision_remedy(name) for name in ("amp-bf16", "amp-fp16"))
    if not w.grad_checkpointing:
        out.append(_remedy("--grad-checkpointing", grad_checkpointing=True))
    if closed_form and w.logits == "fp32":
        # a chunked/fused cross-entropy (Liger, torchtune, LitGPT's chunked loss) never holds the float32
        # logits of the whole vocabulary: for 150k-vocabulary models the biggest single saving
        out.append(_remedy("--logits chunked", logits="chunked"))
    if w.optimizer in ("adam", "adamw"):
        out.append(_remedy("--optimizer adamw-8bit", optimizer="adamw-8bit", optimizer_default=False))
    out.extend(sharding_remedies(w))
    if closed_form and w.finetune == "full":
        out.append(_remedy("--finetune lora", finetune="lora"))
        out.append(_remedy("--finetune qlora", finetune="qlora"))
    if closed_form and w.finetune == "lora" and w.quant == "none":
        out.append(_remedy("--finetune qlora", finetune="qlora", quant="nf4"))
    if closed_form:
        out.extend(offload_remedies(w))
    return out


# ZeRO stages in the order they cost communication; each also partitions what the one before did
ZERO_STAGES = ("zero1", "zero2", "zero3")

# The GPU counts a job is sharded over when it fits no single GPU: one node, the counts recommend quotes
SHARD_GPU_COUNTS = (2, 4, 8)
SHARD_STAGE = "zero3"    # everything partitioned (weights, gradients, optimizer state): FSDP's full shard alike


def changes_method(remedy: Remedy) -> bool:
    """Whether a remedy trains something else (LoRA or QLoRA adapters, 4-bit base weights instead of the
    job's own): the one rule that ranks such changes after those that keep the training the same (a smaller
    micro-batch, checkpointing, AMP, an 8-bit optimizer, sharding over GPUs, offload)."""
    return any(name in ("finetune", "quant") for name in remedy.workload_fields)


def per_gpu_layout(effective_batch: int, count: int, micro_batch_limit: int) -> tuple[int, int]:
    """(micro-batch, accumulation steps) of each of ``count`` GPUs that together keep ``effective_batch``: the
    batch split evenly over them, run as the largest micro-batch that divides each GPU's share and is at most
    ``micro_batch_limit`` (the job's own micro-batch), accumulation making up the rest, as recommend splits a
    row's batch. A batch that does not split evenly grows to the next one that does (``batch_change_note``)."""
    per_gpu = splitting_batch(effective_batch, count) // count
    micro = largest_divisor_at_most(per_gpu, micro_batch_limit)
    return micro, per_gpu // micro


def shard_over_gpus_remedy(w: Workload, count: int | None = None) -> Remedy | None:
    """For a training job that fits no single GPU: its state partitioned over ``count`` GPUs by ZeRO-3 (FSDP's
    full shard alike), the same method and result (None: serving, already fully sharded or offloading, or on
    several GPUs already, where ``sharding_remedies`` offers the next stages). ``count`` None: the change
    ``recommend`` names (its rows are the counts, each priced at the row's effective batch); a count: the one
    ``estimate`` names (``--num-gpus N``), the job's effective batch split over the N GPUs (``per_gpu_layout``:
    ``--batch-size`` and ``--grad-accum`` named where they change), never N times the job's batch.
    ZeRO-3 partitions no activations: where they are the need, it helps little (``changes_that_fit`` and
    ``find_remedies`` quote it, so it is offered only where it fits)."""
    if not w.is_training or w.num_gpus > 1 or w.offload != "none" or effective_sharding(w) in (SHARD_STAGE, "fsdp"):
        return None
    if count is None:
        return _remedy(f"--sharding {SHARD_STAGE}", sharding=SHARD_STAGE)
    micro, accum = per_gpu_layout(w.effective_batch_size, count, w.batch_size)
    layout = {k: v for k, v in (("batch_size", micro), ("grad_accum_steps", accum)) if v != getattr(w, k)}
    flags = {"batch_size": "--batch-size", "grad_accum_steps": "--grad-accum"}
    change = " ".join([f"--num-gpus {count}", *(f"{flags[k]} {v}" for k, v in layout.items()),
                       f"--sharding {SHARD_STAGE}"])
    return _remedy(change, num_gpus=count, **layout, sharding=SHARD_STAGE)


def serving_split_remedy(w: Workload, count: int, closed_form: bool) -> Remedy | None:
    """For a decoder LLM served on one GPU (the closed form): the same job over ``count`` GPUs
    (``--num-gpus N``), its weights and KV cache split over them: vLLM's tensor parallelism, HF generate's layer
    split; the same batch and answers. None for training (``shard_over_gpus_remedy``), a traced model (several GPUs
    serve it data-parallel: each holds the whole model) or a job on several GPUs already. Whether the heads split
    over ``count`` (``count_refusal``) and the GPUs hold it is ``changes_that_fit``'s to estimate."""
    if w.is_training or not closed_form or w.num_gpus > 1:
        return None
    return _remedy(f"--num-gpus {count}", num_gpus=count)


def more_gpus_remedy(w: Workload, count: int, closed_form: bool) -> Remedy | None:
    """The job of one GPU over ``count`` of them, the same method and result: a training job sharded by ZeRO-3
    (``shard_over_gpus_remedy``), a served LLM split over them (``serving_split_remedy``); None: neither applies."""
    return shard_over_gpus_remedy(w, count) or serving_split_remedy(w, count, closed_form)


def sharding_remedies(w: Workload) -> list[Remedy]:
    """On several GPUs, the ZeRO stages past the job's own: the same method, its state partitioned over the
    GPUs (zero1 the optimizer state, zero2 also the gradients, zero3 also the weights), lightest first. None on
    one GPU (nothing to partition over) or under zero3/FSDP (everything already is)."""
    if w.num_gpus < 2 or w.sharding not in ("ddp", *ZERO_STAGES):
        return []
    done = ZERO_STAGES.index(w.sharding) + 1 if w.sharding in ZERO_STAGES else 0
    return [_remedy(f"--sharding {stage}", sharding=stage) for stage in ZERO_STAGES[done:]]


def offload_remedies(w: Workload) -> list[Remedy]:
    """DeepSpeed ZeRO-Offload (decoder LLMs, the closed form; training with an optimizer): the optimizer state,
    float32 master weights and float32 gradient partitions in CPU RAM, then the weights too. The same method and
    result, at the cost of a CPU optimizer step and PCIe copies (the step time says how much): after the changes
    that keep the step on the GPU. Under FSDP, whose one CPU offload moves the weights too whichever ``--offload``
    says (``params_offloaded``), one remedy: the two would be the same job."""
    if (w.optimizer == "none" or params_offloaded(w, effective_sharding(w))
            or offload_optimizer_refusal(w, "optimizer")):
        return []       # nothing (more) to offload, or an optimizer ZeRO-Offload has no CPU kernel for
    out = [] if w.offload == "optimizer" else [_remedy("--offload optimizer", offload="optimizer")]
    return out if effective_sharding(w) == "fsdp" else out + [_remedy("--offload params", offload="params")]
