"""What the job a plan is priced on assumes of the training (or serving) script, beyond the batch and sharding.

A plan fits (and costs what it says) only for the job it was estimated for: an 8B LoRA plan on a 24 GiB GPU may
fit only with gradient checkpointing (40.2 GiB without), at bf16, at 2048 tokens a sequence. gpuwise cannot rewrite
the command's flags, so both emitters say these in a note and set them in the environment, as they do the batch
split (``GPUWISE_MICRO_BATCH`` …) and the sharding (``GPUWISE_SHARDING`` …), for a script to read or check:

- ``GPUWISE_PRECISION``: the precision priced on the option's GPU (``fp32``, ``tf32``, ``amp-bf16``, ``amp-fp16``,
  ``bf16``, ``fp16``; a default bf16 is its fp16 twin on a GPU without bf16)
- ``GPUWISE_GRAD_CHECKPOINTING``: ``1`` (activation checkpointing on) or ``0`` (training only)
- ``GPUWISE_FINETUNE``: ``full``, ``lora`` or ``qlora`` (training only); with LoRA/QLoRA ``GPUWISE_LORA_RANK``,
  ``GPUWISE_LORA_TARGETS`` (``all-linear``: every linear of the blocks, gpuwise's default; else the
  ``--lora-targets`` as PEFT module names, comma-separated: ``lora_targets_said``) and ``GPUWISE_LORA_DROPOUT``: an 8B LoRA on every linear with
  dropout 0.05 peaks at 99 GiB where PEFT's own defaults (``q_proj,v_proj``, dropout 0) peak near 69 GiB
- ``GPUWISE_QUANT``: ``int8`` or ``nf4`` where the base weights are quantized (QLoRA, ``--quant``)
- ``GPUWISE_SEQ_LEN``: tokens a sequence (text models, decoder LLMs); ``GPUWISE_IMAGE_SIZE``: pixels a side (vision)
- ``GPUWISE_LOGITS``: ``chunked`` or ``fused`` where the loss never holds the whole float32 logits (LLM training)
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload.decoder import ROLE_ALIASES, name_matches
from gpuwise.workload.specs import input_kind

ENV_PRECISION = "GPUWISE_PRECISION"
ENV_GRAD_CHECKPOINTING = "GPUWISE_GRAD_CHECKPOINTING"   # 1 or 0
ENV_FINETUNE = "GPUWISE_FINETUNE"                       # full, lora or qlora
ENV_LORA_RANK = "GPUWISE_LORA_RANK"
ENV_LORA_TARGETS = "GPUWISE_LORA_TARGETS"               # all-linear, or the --lora-targets as module names
ENV_LORA_DROPOUT = "GPUWISE_LORA_DROPOUT"
ENV_QUANT = "GPUWISE_QUANT"                             # int8 or nf4 (set only when quantized)
ENV_SEQ_LEN = "GPUWISE_SEQ_LEN"                         # tokens per sequence
ENV_IMAGE_SIZE = "GPUWISE_IMAGE_SIZE"                   # pixels per side
ENV_LOGITS = "GPUWISE_LOGITS"                           # chunked or fused (set only when not fp32)
ALL_LINEAR = "all-linear"     # PEFT's name for every linear layer: what no --lora-targets prices (workload.decoder)
NO_LAYER_NAME = "\0"          # a layer name no --lora-targets names: matched only by the default


@dataclass(frozen=True)
class JobAssumptions:
    """The settings of the job a plan is priced on that change its memory or time: ``precision`` (on the option's
    GPU), ``grad_checkpointing``, ``finetune``, ``lora_rank``, ``lora_targets`` (``ALL_LINEAR`` or the names given)
    and ``lora_dropout`` (training), ``quant``, ``seq_len`` (tokens), ``image_size`` (pixels), ``logits``."""

    precision: str
    training: bool
    grad_checkpointing: bool = False
    finetune: str = "full"
    lora_rank: int | None = None
    lora_targets: str | None = None
    lora_dropout: float | None = None
    quant: str = "none"
    seq_len: int | None = None
    image_size: int | None = None
    logits: str = "fp32"

    @classmethod
    def of(cls, workload, *, closed_form: bool = False) -> "JobAssumptions":
        """The assumptions of ``workload`` as priced (give it at the option's GPU: ``plan.profile.workload_on``);
        ``closed_form``: a decoder LLM's closed form, where a sequence length is always priced (its default), as it
        is for any text model (``workload.specs.input_kind``)."""
        # a text model is priced at its sequence length, the default where none was given (as is the closed form)
        text = closed_form or input_kind(workload.model) == "tokens"
        seq_len = workload.tokens_per_sequence if workload.seq_len is None and text else workload.seq_len
        lora = workload.finetune in ("lora", "qlora")
        return cls(precision=workload.precision, training=workload.is_training,
                   grad_checkpointing=workload.grad_checkpointing if workload.is_training else False,
                   finetune=workload.finetune, lora_rank=workload.lora_rank if lora else None,
                   lora_targets=lora_targets_said(workload.lora_targets) if lora else None,
                   lora_dropout=workload.lora_dropout if lora else None,
                   quant=workload.quant, seq_len=seq_len, image_size=workload.image_size,
                   logits=workload.logits if workload.is_training and closed_form else "fp32")

    @property
    def env(self) -> dict[str, str]:
        """The variables the launched script can read (or check) the assumptions from."""
        env = {ENV_PRECISION: self.precision}
        if self.training:
            env[ENV_GRAD_CHECKPOINTING] = "1" if self.grad_checkpointing else "0"
            env[ENV_FINETUNE] = self.finetune
            if self.lora_rank is not None:
                env[ENV_LORA_RANK] = str(self.lora_rank)
                env[ENV_LORA_TARGETS] = self.lora_targets
                env[ENV_LORA_DROPOUT] = f"{self.lora_dropout:g}"
        if self.quant != "none":
            env[ENV_QUANT] = self.quant
        if self.seq_len is not None:
            env[ENV_SEQ_LEN] = str(self.seq_len)
        if self.image_size is not None:
            env[ENV_IMAGE_SIZE] = str(self.image_size)
        if self.logits != "fp32":
            env[ENV_LOGITS] = self.logits
        return env

    def _trained(self) -> str:
        """What the job trains, in words: every weight, or LoRA/QLoRA adapters (rank, the layers they are on,
        dropout), or the method's name (freeze)."""
        if self.lora_rank is None:
            return "every weight trained (no LoRA)" if self.finetune == "full" else self.finetune
        on = ("every linear of the blocks (all-linear)" if self.lora_targets == ALL_LINEAR
              else self.lora_targets.replace(",", ", "))
        method = "QLoRA" if self.finetune == "qlora" else "LoRA"
        return f"{method} rank {self.lora_rank} on {on}, dropout {self.lora_dropout:g}"

    def note(self) -> str:
        """The assumptions in words, for the launch's header and ``launch.notes``."""
        said = [f"precision {self.precision}"]
        if self.training:
            said.append("gradient checkpointing " + ("on" if self.grad_checkpointing else "off"))
            said.append(self._trained())
        if self.quant != "none":
            said.append(f"{self.quant} base weights")
        if self.seq_len is not None:
            said.append(f"{self.seq_len} tokens a sequence")
        if self.image_size is not None:
            said.append(f"{self.image_size} px images")
        if self.logits != "fp32":
            said.append(f"{self.logits} logits in the loss")
        names = [f"${name}" for name in self.env]
        return (f"the plan fits and is priced only for the job as estimated: {', '.join(said)}; your command must "
                f"run the same (gpuwise does not rewrite its flags; it sets {', '.join(names[:-1])}"
                f"{' and ' if len(names) > 1 else ''}{names[-1]} for the script to read or check)")


def lora_targets_said(targets: tuple[str, ...]) -> str:
    """``--lora-targets`` as the launch says it, in names PEFT's ``target_modules`` takes: ``ALL_LINEAR`` for the
    default (none given, or an "all" name: the one rule, ``workload.decoder.name_matches``), else the module names
    given, a gpuwise role (``q``, ``down``: ``ROLE_ALIASES``) as the module names it stands for (PEFT matches none of
    ``q,v,down`` on a Llama, and raises), comma-separated, each once."""
    # a name no layer has is matched only by the default, every linear
    if name_matches(NO_LAYER_NAME, targets):
        return ALL_LINEAR
    names = [name for target in targets for name in ROLE_ALIASES.get(target, (target,))]
    return ",".join(dict.fromkeys(names))
