"""How a launched training job must hold its state: the sharding (and offload) a plan is priced on.

A plan priced on ``--sharding zero3`` (or zero1/zero2, fsdp, ``--offload``) needs far less memory a GPU than
plain DDP: torchrun only starts the processes, so the command itself must run under DeepSpeed ZeRO (or PyTorch
FSDP), or the job the plan prices is not the job that runs. Both emitters therefore say it in a note, set
``GPUWISE_SHARDING`` (and ``GPUWISE_OFFLOAD``) in the environment, and for DeepSpeed write a minimal ZeRO config
beside the command (``gpuwise-ds-config.json``: the stage, the offload, the 16-bit mode and the batch split) whose
path ``GPUWISE_DEEPSPEED_CONFIG`` names, for ``deepspeed.initialize(config=...)`` or the HF Trainer's
``--deepspeed``.

The sharding said is the one the memory and time models price (``gpuwise.workload.parallelism.effective_sharding``):
``--offload params`` needs parameter partitioning (ZeRO-3), ``--offload optimizer`` partitioned gradients (at least
ZeRO-2). Offload is priced by the closed form (decoder LLMs) only; a traced estimate keeps everything on the GPU,
so its launch names no offload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpuwise.launch.errors import LaunchError
from gpuwise.workload.parallelism import ZERO_OFFLOAD_CPU_OPTIMIZERS, effective_sharding

ENV_SHARDING = "GPUWISE_SHARDING"            # ddp never set: zero1, zero2, zero3 or fsdp
ENV_OFFLOAD = "GPUWISE_OFFLOAD"              # optimizer or params (set only when offloading)
ENV_DEEPSPEED_CONFIG = "GPUWISE_DEEPSPEED_CONFIG"
DEEPSPEED_CONFIG_FILE = "gpuwise-ds-config.json"   # written in the directory the command starts in

_ZERO_STAGES = {"zero1": 1, "zero2": 2, "zero3": 3}
_PARTITIONED = {1: "optimizer state", 2: "optimizer state and gradients",
                3: "weights, gradients and optimizer state"}


@dataclass(frozen=True)
class ShardingSetup:
    """``sharding``: zero1, zero2, zero3 or fsdp, as priced; ``offload``: none, optimizer or params;
    ``half``: the 16-bit type the step computes in ("bf16", "fp16" or None); ``gpus``: the world size;
    ``optimizer``: the workload's ``--optimizer`` (under ZeRO-Offload, which DeepSpeed CPU optimizer to build)."""

    sharding: str
    offload: str
    half: str | None
    gpus: int
    optimizer: str = "adamw"

    @classmethod
    def of(cls, workload, gpus: int, *, closed_form: bool = True) -> "ShardingSetup | None":
        """The setup a training workload is priced on; None for plain DDP (or serving): nothing to say.
        LaunchError where DeepSpeed cannot run it as priced (``zero_refusal``)."""
        if not workload.is_training:
            return None
        offload = workload.offload if closed_form else "none"
        sharding = effective_sharding(workload) if closed_form else workload.sharding
        if sharding == "ddp":
            return None
        if (why := zero_refusal(sharding, workload.precision_value)) is not None:
            raise LaunchError(why)
        return cls(sharding, offload, workload.precision_value.half, gpus, workload.optimizer)

    @property
    def zero_stage(self) -> int | None:
        """DeepSpeed's ZeRO stage (None: FSDP)."""
        return _ZERO_STAGES.get(self.sharding)

    @property
    def env(self) -> dict[str, str]:
        out = {ENV_SHARDING: self.sharding}
        if self.offload != "none":
            out[ENV_OFFLOAD] = self.offload
        if self.zero_stage is not None:
            out[ENV_DEEPSPEED_CONFIG] = DEEPSPEED_CONFIG_FILE
        return out

    def deepspeed_config(self, batch=None) -> dict | None:
        """A minimal DeepSpeed config of what is priced (None for FSDP): the ZeRO stage, CPU offload, the
        16-bit mode, and the batch split (``batch``: a :class:`gpuwise.launch.plan.BatchSplit`) where known.
        The optimizer stays the script's own (DeepSpeed takes the one passed to ``initialize``; under ZeRO-Offload
        it must be DeepSpeed's CPU optimizer, which ``note`` names)."""
        if self.zero_stage is None:
            return None
        config: dict = {}
        if batch is not None and batch.training:
            config.update(train_batch_size=batch.effective_batch, train_micro_batch_size_per_gpu=batch.micro_batch,
                          gradient_accumulation_steps=batch.grad_accum_steps)
        if self.half is not None:
            config[self.half] = {"enabled": True}
        zero: dict = {"stage": self.zero_stage}
        if self.offload in ("optimizer", "params"):
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if self.offload == "params":
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        config["zero_optimization"] = zero
        return config

    def files(self, batch=None) -> dict[str, str]:
        """The files the launch writes beside the command: name -> text (the DeepSpeed config, one line)."""
        config = self.deepspeed_config(batch)
        return {} if config is None else {DEEPSPEED_CONFIG_FILE: json.dumps(config)}

    def note(self) -> str:
        """What the command must run, for the launch's header and ``launch.notes``."""

        def over(parts: str) -> str:
            return f" ({parts} partitioned over the {self.gpus} GPUs)" if self.gpus > 1 else ""

        if self.zero_stage is None:
            offload = (" with CPU offload (CPUOffload(offload_params=True): weights, gradients and optimizer "
                       "state in CPU RAM)" if self.offload != "none" else "")
            return (f"the plan is priced on PyTorch FSDP full sharding{over(_PARTITIONED[3])}{offload}, not on "
                    f"plain DDP: your command must wrap its model in FSDP (FULL_SHARD, or fully_shard in FSDP2); "
                    f"torchrun only starts the processes (gpuwise sets ${ENV_SHARDING}=fsdp for the script to read)")
        offload = {"optimizer": " and ZeRO-Offload (optimizer state, float32 master weights and float32 gradient "
                                "partitions in CPU RAM)",
                   "params": " and ZeRO-Offload of optimizer and parameters (weights too in CPU RAM)"}.get(
                       self.offload, "")
        return (f"the plan is priced on DeepSpeed ZeRO-{self.zero_stage}{over(_PARTITIONED[self.zero_stage])}"
                f"{offload}, not on plain DDP: your command must run under DeepSpeed "
                f"with the config written beside it, {DEEPSPEED_CONFIG_FILE} (${ENV_DEEPSPEED_CONFIG}): "
                f"deepspeed.initialize(model=..., optimizer={self._initialize_optimizer()}, "
                f"config=os.environ['{ENV_DEEPSPEED_CONFIG}']), or the HF Trainer's --deepspeed {DEEPSPEED_CONFIG_FILE}"
                f"{self._trainer_offload_remark()}; torchrun only starts the processes")

    def _initialize_optimizer(self) -> str:
        """What ``deepspeed.initialize`` must be given as ``optimizer=``: the script's own, except under
        ZeRO-Offload, where DeepSpeed raises ZeRORuntimeException for any client optimizer that is not its CPU one
        (``zero_force_ds_cpu_optimizer``, true by default: deepspeed/runtime/engine.py ``_configure_optimizer``)."""
        if self.offload == "none":
            return "..."
        cpu_class = ZERO_OFFLOAD_CPU_OPTIMIZERS.get(self.optimizer, "DeepSpeedCPUAdam")
        module = "lion" if cpu_class == "DeepSpeedCPULion" else "adam"
        mode = ", adamw_mode=False" if self.optimizer == "adam" else ""
        return f"deepspeed.ops.{module}.{cpu_class}(model.parameters(), lr=...{mode})"

    def _trainer_offload_remark(self) -> str:
        """Under ZeRO-Offload the HF Trainer needs nothing more: accelerate swaps its torch optimizer for
        DeepSpeed's CPU one (``map_pytorch_optim_to_deepspeed``)."""
        return "" if self.offload == "none" else " (accelerate swaps its optimizer for DeepSpeed's CPU one)"


def zero_refusal(sharding: str, precision) -> str | None:
    """Why DeepSpeed cannot run a ZeRO plan as priced (None: it can). A pure 16-bit plan (``--precision bf16`` or
    ``fp16``: 16-bit weights, gradients and optimizer state, 8 bytes a parameter with Adam) is not what DeepSpeed's
    ``bf16``/``fp16`` mode runs: its ZeRO optimizer keeps float32 master weights and optimizer state beside the
    16-bit weights (16 bytes a parameter with Adam), the layout the memory model prices as ``amp-bf16``/``amp-fp16``;
    a config written for the plan would run out of the memory it was priced with. FSDP of a 16-bit model keeps its
    state in 16 bits, as priced."""
    if sharding not in _ZERO_STAGES or not precision.pure_half:
        return None
    half = precision.half
    return (f"DeepSpeed ZeRO-{_ZERO_STAGES[sharding]} at --precision {precision.name}: the plan is priced on {half} weights, gradients "
            f"and optimizer state, but DeepSpeed ZeRO's {half} mode keeps float32 master weights and optimizer "
            f"state beside them (twice the bytes a parameter with Adam), so the job launched would not fit what was "
            f"priced: price what DeepSpeed runs with --precision amp-{half}, or shard with --sharding fsdp (a {half} "
            f"model under FSDP keeps its state in {half})")


def write_files_lines(files: dict[str, str]) -> list[str]:
    """Shell lines that write ``files`` (name -> text) in the current directory, as printed (quoted heredocs:
    nothing in the text is expanded)."""
    out = []
    for name, text in files.items():
        out += [f"cat > {name} <<'GPUWISE_EOF'", text, "GPUWISE_EOF"]
    return out
