"""What a precision means, in one place: the six public names (DESIGN.md) as one frozen value, the
peak a kernel runs at under it on a GPU, and the one rule that picks a precision when the user names none.

``fp32`` is PyTorch's default: float32 tensors, cuBLAS without TF32, cuDNN convolutions with it;
``tf32`` turns TF32 on for matmuls too. ``amp-fp16``/``amp-bf16`` autocast: float32 master weights,
16-bit activations and matmuls. ``fp16``/``bf16`` hold everything in 16 bits (LitGPT's ``bf16-true``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload.llm_config import try_load_decoder_config

NAMES = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "bf16")
_HALF_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
_HALF_OF_DTYPE = {v: k for k, v in _HALF_DTYPES.items()}
# A GEMM the GPU has no tensor-core rate for: bf16 without bf16 tensor cores is emulated on CUDA cores
# in fp32 arithmetic (cuBLAS on T4, V100), reading bf16 operands.
BF16_EMULATED = "bf16-emulated"
# The datasheet ratio of a job whose precision nobody said (a bare nvidia-smi log): fp16 tensor cores,
# as most training on rented GPUs runs today.
UNKNOWN_JOB_PRECISION = "amp-fp16"
_PEFT = ("lora", "qlora")


@dataclass(frozen=True)
class Precision:
    """One of the six public precisions. ``half``: the 16-bit type it computes in (None: float32)."""

    name: str
    amp: bool                 # autocast: float32 master weights, half activations and matmuls
    half: str | None          # "fp16", "bf16" or None

    @property
    def compute_dtype(self) -> str:
        """torch dtype name of activations and matmul inputs."""
        return _HALF_DTYPES.get(self.half, "float32")

    @property
    def activation_bytes(self) -> int:
        """Bytes per element of activations (and of frozen, unquantized weights: recipes load the
        base model in the compute dtype whenever the step computes in 16-bit)."""
        return 2 if self.half else 4

    @property
    def master_bytes(self) -> int:
        """Bytes per trained parameter (and its gradient): float32 master weights under fp32, tf32 and
        AMP; 16-bit under pure fp16/bf16."""
        return 2 if self.half and not self.amp else 4

    @property
    def pure_half(self) -> bool:
        """Weights, gradients and activations all in 16 bits (no float32 master)."""
        return self.half is not None and not self.amp

    @property
    def needs_grad_scaler(self) -> bool:
        """fp16 autocast scales the loss (torch.amp.GradScaler): fp16's range is too narrow for gradients."""
        return self.amp and self.half == "fp16"

    @property
    def needs_bf16(self) -> bool:
        """PyTorch refuses bf16 on a GPU without it (T4, V100)."""
        return self.half == "bf16"

    @property
    def matmul_rate(self) -> str:
        """The catalog's peak_tflops key its matmuls want (before the GPU's fallbacks)."""
        return self.half or ("tf32" if self.name == "tf32" else "fp32")

    @property
    def fp16_twin(self) -> "Precision":
        """What the job runs at on a GPU without bf16: amp-bf16 -> amp-fp16, bf16 -> fp16; others are their own."""
        return parse(self.name.replace("bf16", "fp16")) if self.needs_bf16 else self

    def rate_key(self, gpu, cls: str = "matmul", op_dtype: str | None = None) -> str:
        """The peak a tensor-class kernel (matmul, conv, attention) runs at on ``gpu``: a catalog key, or
        ``BF16_EMULATED``. ``op_dtype``: the kernel's input dtype where known (a 16-bit op under fp32,
        e.g. a quantized base, runs at its own half rate). The one answer calibration and the time model use."""
        has = lambda key: gpu.peak(key) is not None  # noqa: E731
        want = self.half or _HALF_OF_DTYPE.get(op_dtype or "float32")
        if want is None:
            # PyTorch defaults: cuBLAS without TF32, cuDNN (convolutions, fused RNNs) with it; "tf32" turns both on.
            tf32 = self.name == "tf32" or cls in ("conv", "rnn")
            want = "tf32" if tf32 and has("tf32") else "fp32"
        if want == "bf16" and not has("bf16"):
            return BF16_EMULATED
        return want if has(want) else "fp32"

    def __str__(self) -> str:
        return self.name


_VALUES = {
    "fp32": Precision("fp32", amp=False, half=None),
    "tf32": Precision("tf32", amp=False, half=None),
    "amp-fp16": Precision("amp-fp16", amp=True, half="fp16"),
    "amp-bf16": Precision("amp-bf16", amp=True, half="bf16"),
    "fp16": Precision("fp16", amp=False, half="fp16"),
    "bf16": Precision("bf16", amp=False, half="bf16"),
}


def parse(name: str | Precision) -> Precision:
    """A public name (any case) -> its Precision; ValueError for anything else (the workload's
    ``check_precision`` turns it into a WorkloadError with suggestions)."""
    if isinstance(name, Precision):
        return name
    key = str(name).strip().lower()
    if key not in _VALUES:
        raise ValueError(f"unknown precision {name!r}; valid: {', '.join(NAMES)}")
    return _VALUES[key]


def default_precision(*, finetune: str = "full", mode: str = "train", llm: bool = False,
                      checkpoint_dtype: str | None = None, gpu_has_bf16: bool | None = None) -> Precision:
    """The precision a job runs at when the user names none: the one rule of every command.

    Decoder LLMs (any method, any mode) run in the checkpoint's half precision, as the recipes and
    serving engines load them: bf16 autocast for training (HF Trainer's ``bf16=True``, LitGPT, LLaMA-Factory),
    bf16 weights for inference; fp16 where the checkpoint is fp16. LoRA/QLoRA of other models: bf16
    autocast. Everything else: fp32, PyTorch's default. On a GPU without bf16 (T4, V100;
    ``gpu_has_bf16=False``) the bf16 choice becomes its fp16 twin; None: not known yet (per GPU later).
    """
    if llm:
        half = _HALF_OF_DTYPE.get(str(checkpoint_dtype or "").removeprefix("torch."), "bf16")
        choice = parse(f"amp-{half}" if mode.lower() == "train" else half)
    elif finetune.lower() in _PEFT:
        choice = parse("amp-bf16")
    else:
        choice = parse("fp32")
    return choice.fp16_twin if gpu_has_bf16 is False else choice


def on_gpu(precision: str | Precision, gpu_has_bf16: bool, *, defaulted: bool) -> Precision:
    """The precision a job runs at on a GPU: the default rule's bf16 choice becomes its fp16 twin where the
    GPU has no bf16; a precision the user named is kept (and that GPU cannot run it)."""
    p = parse(precision)
    return p.fp16_twin if defaulted and p.needs_bf16 and not gpu_has_bf16 else p


def why_not_on(precision: str | Precision, gpu_has_bf16: bool, arch: str) -> str | None:
    """Why a job at ``precision`` cannot run on a GPU (None: it can): bf16 needs bf16 support (Ampere
    and newer; PyTorch refuses bf16 autocast on a T4 or V100)."""
    p = parse(precision)
    if p.needs_bf16 and not gpu_has_bf16:
        return f"no bf16 on this GPU ({arch}): use --precision {p.fp16_twin.name}"
    return None


def runs_on(gpu) -> tuple[str, ...]:
    """The public precisions ``gpu`` runs at their own rate, in ``NAMES`` order: ``why_not_on`` refuses none of
    them and their matmuls get the peak they ask for (``rate_key``). tf32 on a GPU without a tf32 rate (before
    Ampere) is accepted with a warning but runs at the fp32 rate, so it is not listed."""
    return tuple(n for n in NAMES if why_not_on(n, gpu.has_bf16, gpu.arch) is None
                 and parse(n).rate_key(gpu) == parse(n).matmul_rate)


def checkpoint_dtype(cfg: dict) -> str | None:
    """The dtype a transformers config says its checkpoint is stored in (``torch_dtype``; ``dtype`` since
    transformers 4.56; multimodal configs may say it in their ``text_config``)."""
    for d in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        value = d.get("torch_dtype") or d.get("dtype")
        if value:
            return str(value)
    return None


def default_for_model(model: str, *, finetune: str = "full", mode: str = "train",
                      gpu_has_bf16: bool | None = None) -> Precision:
    """``default_precision`` for a model spec: whether it is a decoder LLM, and its checkpoint's dtype,
    come from its config (a shipped or Hub config; no model is built)."""
    cfg = try_load_decoder_config(model)
    return default_precision(finetune=finetune, mode=mode, llm=cfg is not None,
                             checkpoint_dtype=checkpoint_dtype(cfg) if cfg else None, gpu_has_bf16=gpu_has_bf16)


def described(name: str, defaulted: bool) -> str:
    """The precision as the output names it: the default rule's choice says so."""
    return f"{name} (the default for this job; --precision to choose)" if defaulted else name
