"""The description of a job, shared by every command that takes a workload."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Protocol

from gpuwise.errors import did_you_mean
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.factory_signature import factory_input_sizes, factory_signature
from gpuwise.workload.llm_config import request_rate_refusal
from gpuwise.workload.parallelism import offload_optimizer_refusal
from gpuwise.workload.precision import NAMES as PRECISIONS
from gpuwise.workload.precision import Precision, default_for_model, parse
from gpuwise.workload.specs import DEFAULT_SEQ_LEN, feeds_images, image_side, input_kind
from gpuwise.workload.storage import HF_KV_CACHE_DTYPES, KV_CACHE_BYTES, VLLM_KV_CACHE_DTYPES

DEFAULT_OPTIMIZER = "adamw"   # what a job without --optimizer is priced with (Hugging Face Trainer's default)
OPTIMIZERS = ("none", "sgd", "momentum", "adam", "adamw", "adamw-8bit", "adafactor", "lion", "paged-adamw", "paged-adamw-8bit")
MODES = ("train", "infer")
FINETUNES = ("full", "freeze", "lora", "qlora")
QUANTS = ("none", "int8", "nf4", "fp8", "w4a16", "w8a16")   # fp8, w4a16, w8a16: a checkpoint's own (checkpoint.py), served
SHARDINGS = ("ddp", "zero1", "zero2", "zero3", "fsdp")
OFFLOADS = ("none", "optimizer", "params")
# The software stack: inputs with stated defaults (DESIGN.md, "The software stack assumed by predictions").
ATTENTIONS = ("sdpa", "eager", "flash2")          # transformers' attn_implementation
OPTIMIZER_IMPLS = ("foreach", "fused", "for-loop")  # torch.optim: foreach is PyTorch's default on CUDA
ENGINES = ("hf", "vllm")                         # what runs LLM inference: HF generate (eager) or vLLM
LOGITS = ("fp32", "chunked", "fused")              # how an LLM's loss holds the logits (see memory/llm_activations.py)
KV_CACHE_DTYPES = tuple(KV_CACHE_BYTES)            # --kv-cache-dtype (workload/storage.py: bytes an element)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9               # vLLM's default share of GPU memory it pre-allocates
# The vLLM release serving plans model (its defaults: memory/llm.py's vllm_batch_defaults, checkpoint.py's
# kernels), and so the series a launched server installs (launch/skyserve.py's setup)
VLLM_VERSION = "0.34"

# Sanity bounds: beyond these an input is a typo, not a job.
MAX_BATCH_SIZE = 1 << 20
MAX_SEQ_LEN = 1 << 22
MAX_IMAGE_SIZE = 8192


@dataclass(frozen=True)
class Workload:
    """One training or inference step of a model, as the user describes it.

    ``batch_size`` is the micro-batch per GPU per forward pass; the effective batch is
    ``batch_size * grad_accum_steps * num_gpus``. ``seq_len``/``image_size`` of None mean the
    model's default input (224 px for vision models, 128 tokens for text models, a model factory's own
    defaults: ``with_factory_sizes`` writes those in).

    ``model`` is a spec string: ``"torchvision:resnet50"``, ``"timm:vit_base_patch16_224"``,
    ``"hf:Qwen/Qwen2.5-7B"`` or ``"file.py:factory"``. ``lora_targets`` is a tuple of module names (a
    string is split on commas, as ``--lora-targets`` is).

    Precision: a Workload built in Python runs at ``precision`` as given, **fp32** when none is given.
    The CLI instead applies the one default rule when ``--precision`` is not given (decoder LLMs at their
    checkpoint's half precision, LoRA/QLoRA at amp-bf16, else fp32; docs/precision.md): to get the same
    job in Python, pass the workload through ``with_default_precision`` (the CLI calls that very method)::

        w = Workload("hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=2048, batch_size=2).with_default_precision()
        w.precision, w.precision_default    # ("amp-bf16", True)

    ``to_dict`` / ``from_dict`` round-trip through JSON: ``Workload.from_dict(json.loads(json.dumps(w.to_dict())))
    == w``. An inference job steps no optimizer: its record's ``optimizer`` is null, read back as the field's
    default (an optimizer named for inference changes nothing and is not kept).
    """

    model: str
    batch_size: int = 32
    seq_len: int | None = None
    image_size: int | None = None
    precision: str = "fp32"          # a public name (workload/precision.py); ``precision_value`` is its meaning
    optimizer: str = DEFAULT_OPTIMIZER
    mode: str = "train"
    grad_checkpointing: bool = False
    channels_last: bool = False
    grad_accum_steps: int = 1
    # LLM fine-tuning and serving
    finetune: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ()     # empty: the method's default (all linear layers of blocks)
    quant: str = "none"
    max_new_tokens: int = 0
    # Parallelism
    num_gpus: int = 1
    sharding: str = "ddp"
    offload: str = "none"
    # Software stack (each default says what it assumes)
    attention: str = "sdpa"          # transformers' default since 4.36 where the model supports it
    compile: bool = False            # torch.compile: fewer kernels, fused elementwise work
    optimizer_impl: str = "foreach"  # torch.optim's default on CUDA tensors
    keep_grads: bool = False         # zero_grad(set_to_none=False): .grad stays allocated between steps
    input_rate: float | None = None  # samples/s the input pipeline delivers (None: synthetic data, no limit)
    cpu_workers: int | None = None   # DataLoader workers decoding JPEGs (vision): sets the input rate
    engine: str | None = None        # LLM inference: HF generate in eager mode, or vLLM; None: ``default_engine``'s
    # LLM serving at a load: requests a second arriving as a Poisson stream (None: one batch of batch_size requests)
    request_rate_per_s: float | None = None
    # LLM fine-tuning stack (memory): how the loss holds the logits, and LoRA's dropout
    logits: str = "fp32"             # transformers: float32 logits and log-softmax; chunked (LitGPT); fused (Liger)
    lora_dropout: float = 0.05       # LitGPT, QLoRA and TRL recipes (PEFT's own default is 0): keeps a mask and a copy
    # LLM serving memory (vLLM's own flags): the KV cache's dtype ("auto": the compute dtype), and the share of the
    # GPU's memory vLLM pre-allocates (None: vLLM's default, DEFAULT_GPU_MEMORY_UTILIZATION; --engine vllm only)
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    # True: ``precision`` is the default rule's choice (workload/precision.py), not the user's: on a GPU
    # without bf16 the job runs at its fp16 twin instead of being refused there
    precision_default: bool = False
    # True: ``optimizer`` is the default (AdamW), not the user's choice: the output says so
    optimizer_default: bool = False
    # True: ``engine`` is ``default_engine``'s choice (vLLM at a request rate), not the user's: the output says so
    engine_default: bool = False

    def optimizer_described(self) -> str:
        """The optimizer as the output names it: the default says so, as the precision does."""
        return f"{self.optimizer} (the default; --optimizer to choose)" if self.optimizer_default else self.optimizer

    def __post_init__(self) -> None:
        if not isinstance(self.model, str):
            raise WorkloadError(f"model must be a spec string such as \"torchvision:resnet50\", \"hf:Qwen/Qwen2.5-7B\" "
                                f"or \"file.py:factory\"; got {type(self.model).__name__}")
        object.__setattr__(self, "lora_targets", lora_targets_of(self.lora_targets))
        if self.engine is None:
            object.__setattr__(self, "engine", default_engine(self.request_rate_per_s))
            object.__setattr__(self, "engine_default", True)
        for name in ("precision", "optimizer", "mode", "finetune", "quant", "sharding", "offload",
                     "attention", "optimizer_impl", "engine", "logits", "kv_cache_dtype"):
            value = getattr(self, name)
            if isinstance(value, str) and value != value.strip().lower():
                object.__setattr__(self, name, value.strip().lower())   # choices are case-insensitive
        if self.precision == "fp8":
            raise WorkloadError(FP8_PRECISION_REFUSAL)
        _choice("precision", self.precision, PRECISIONS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("mode", self.mode, MODES)
        _choice("finetune", self.finetune, FINETUNES)
        _choice("quant", self.quant, QUANTS)
        _choice("sharding", self.sharding, SHARDINGS)
        _choice("offload", self.offload, OFFLOADS)
        _choice("attention", self.attention, ATTENTIONS)
        _choice("optimizer-impl", self.optimizer_impl, OPTIMIZER_IMPLS)
        _choice("engine", self.engine, ENGINES)
        _choice("logits", self.logits, LOGITS)
        _choice("kv-cache-dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        if (refusal := serving_memory_refusal(self)) is not None:
            raise WorkloadError(refusal)
        if not (isinstance(self.lora_dropout, (int, float)) and 0.0 <= self.lora_dropout < 1.0):
            raise WorkloadError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout!r}")
        if self.input_rate is not None and not (isinstance(self.input_rate, (int, float))
                                                and math.isfinite(self.input_rate) and self.input_rate > 0):
            raise WorkloadError(f"--input-rate must be a positive number of samples/s, got {self.input_rate!r}")
        if self.request_rate_per_s is not None:
            rate = self.request_rate_per_s
            if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
                raise WorkloadError(f"--request-rate must be a positive number of requests a second, got {rate!r}")
            if self.mode != "infer" or self.max_new_tokens < 1:
                refusal = request_rate_refusal(self.model)     # the model first: no flag makes it one
                if refusal:
                    raise WorkloadError(refusal)
            if self.mode != "infer":
                raise WorkloadError("--request-rate is a serving load: it needs --mode infer (and --max-new-tokens N)")
            if self.max_new_tokens < 1:
                raise WorkloadError("--request-rate needs --max-new-tokens N (N >= 1 tokens an answer): a load is "
                                    "priced per output token")
        if self.cpu_workers is not None:
            _positive("cpu-workers", self.cpu_workers, 4096)
            if self.input_rate is not None:
                raise WorkloadError("give --input-rate (a measured rate) or --cpu-workers (decoding JPEGs), not both")
        _positive("batch-size", self.batch_size, MAX_BATCH_SIZE)
        _positive("grad-accum", self.grad_accum_steps, 1 << 16)
        _positive("num-gpus", self.num_gpus, 4096)
        _positive("lora-rank", self.lora_rank, 65536)
        if self.seq_len is not None:
            _positive("seq-len", self.seq_len, MAX_SEQ_LEN)
        if self.image_size is not None:
            _positive("image-size", self.image_size, MAX_IMAGE_SIZE)
        if self.max_new_tokens < 0 or self.max_new_tokens > MAX_SEQ_LEN:
            raise WorkloadError(f"--max-new-tokens must be between 0 and {MAX_SEQ_LEN}, got {self.max_new_tokens}")
        if self.finetune == "qlora" and self.quant == "none":
            object.__setattr__(self, "quant", "nf4")
        if self.finetune == "qlora" and self.quant != "nf4":
            # QLoRA is LoRA on 4-bit NormalFloat base weights (Dettmers et al. 2023; bitsandbytes' 4-bit
            # layers, peft's prepare_model_for_kbit_training): int8 or fp8 base weights are another recipe
            q = self.quant
            if self.mode == "infer":
                raise WorkloadError(f"--finetune qlora serves nf4 base weights, not {q}: drop --finetune qlora to "
                                    f"serve {q} weights, or drop --quant {q}")
            lora = f", or --finetune lora --quant {q} for LoRA on {q} weights" if q == "int8" else ""
            raise WorkloadError(f"--finetune qlora trains LoRA adapters on nf4 base weights, not {q}: drop --quant "
                                f"{q} (qlora implies nf4){lora}")
        if (refusal := offload_optimizer_refusal(self)) is not None:
            raise WorkloadError(refusal)
        if self.quant in ("fp8", "w4a16", "w8a16") and self.mode != "infer":
            raise WorkloadError(f"--quant {self.quant} serves a checkpoint stored so (--mode infer); training starts "
                                "from 16-bit weights (--quant none, int8 or nf4)")

    def inert_settings(self) -> tuple[str, ...]:
        """Settings given a value of their own that change nothing in this job: said, not dropped in silence
        (training settings in serving included)."""
        defaults = {f.name: f.default for f in fields(self)}
        given = lambda name: getattr(self, name) != defaults[name]  # noqa: E731
        out = []
        if self.mode == "infer":
            for name, flag in (("grad_checkpointing", "--grad-checkpointing"), ("grad_accum_steps", "--grad-accum"),
                               ("optimizer_impl", "--optimizer-impl"), ("keep_grads", "--keep-grads")):
                if given(name):
                    out.append(f"{flag} has no effect with --mode infer (no backward pass, no optimizer step)")
            if self.optimizer not in (defaults["optimizer"], "none"):
                out.append(f"--optimizer {self.optimizer} has no effect with --mode infer (no optimizer step)")
            # training settings in serving; --finetune qlora serves its base weights quantized (``quant``)
            if self.finetune == "qlora":
                out.append(f"--finetune qlora with --mode infer serves the base weights in {self.quant} (as --quant "
                           f"{self.quant}); the adapters are not counted")
            elif self.finetune in ("lora", "freeze"):
                out.append(f"--finetune {self.finetune} has no effect with --mode infer (the base model is served; "
                           "adapters, merged or not, are not counted)")
            for name, why in (("sharding", "--num-gpus N serves by tensor parallelism"),
                              ("offload", "the weights stay on the GPUs"), ("logits", "it is the training loss's")):
                if given(name):
                    out.append(f"--{name} {getattr(self, name)} has no effect with --mode infer ({why})")
        else:
            if self.max_new_tokens:
                out.append("--max-new-tokens has no effect with --mode train (it sizes generation: --mode infer)")
            if self.engine != default_engine(None):     # the engine of a job without a rate
                out.append(f"--engine {self.engine} has no effect with --mode train (it is the serving engine)")
        out.extend(self.inputs_it_ignores().values())
        if self.cpu_workers is not None and not feeds_images(self):
            out.append("--cpu-workers has no effect: this model's samples are not images (it sizes JPEG decoding; "
                       "--input-rate sets any pipeline's rate)")
        if self.finetune not in ("lora", "qlora"):
            for name, flag in (("lora_rank", "--lora-rank"), ("lora_targets", "--lora-targets"),
                               ("lora_dropout", "--lora-dropout")):
                if given(name):
                    out.append(f"{flag} has no effect without --finetune lora or qlora")
        return tuple(out)

    def inputs_it_ignores(self) -> dict[str, str]:
        """``seq_len`` given to a model that takes images, ``image_size`` to one that takes tokens: field -> what
        the warning says (the CLI drops the field from the job it records). A model file takes either, unless
        its factory has no such parameter and returns its own example inputs (workload/factory_signature.py); where
        it returns none, the input guessed from its first layer decides, which only the trace knows (a note, and
        ``Trace.sized_job`` for the job recorded)."""
        spec = input_kind(self.model)
        out = {}
        sig = factory_signature(self.model) if spec is None else None
        if sig is not None and sig.returns_inputs:
            for name, flag in (("seq_len", "--seq-len"), ("image_size", "--image-size")):
                if getattr(self, name) is not None and name not in sig.params:
                    out[name] = (f"{flag} has no effect: {self.model} takes no {name} parameter (its example "
                                 "inputs set their size)")
        if spec == "images" and self.seq_len is not None:
            out["seq_len"] = (f"--seq-len has no effect: {self.model} takes images, not tokens (--image-size sets "
                              "their side)")
        if spec == "tokens" and self.image_size is not None:
            out["image_size"] = (f"--image-size has no effect: {self.model} takes tokens, not images (--seq-len "
                                 "sets their count)")
        return out

    @property
    def effective_batch_size(self) -> int:
        return self.batch_size * self.grad_accum_steps * self.num_gpus

    @property
    def is_training(self) -> bool:
        return self.mode == "train"

    @property
    def tokens_per_sequence(self) -> int:
        """``seq_len``, or the text models' default (``DEFAULT_SEQ_LEN``) where none was given."""
        return self.seq_len or DEFAULT_SEQ_LEN

    @property
    def precision_value(self) -> Precision:
        """What ``precision`` means: dtypes, bytes, the peak its kernels run at (workload/precision.py)."""
        return parse(self.precision)

    def with_factory_sizes(self) -> "Workload":
        """This job with the input sizes its model runs at when none is given written in, so that the job recorded
        (``--json``'s workload) is the job traced: a model factory's own defaults (workload/factory_signature.py),
        a vision model's side (224 px, 299 for inception_v3, a config's or timm's own: ``specs.image_side``);
        unchanged for a size given and for a text model's tokens."""
        sizes = {k: v for k, v in factory_input_sizes(self.model).items() if getattr(self, k) is None}
        if self.image_size is None and "image_size" not in sizes and input_kind(self.model) == "images":
            sizes["image_size"] = image_side(self)
        return self.with_(**sizes) if sizes else self

    def with_default_precision(self, gpu: HasBf16 | None = None) -> "Workload":
        """This job at the precision the one default rule picks when the user names none
        (``gpuwise.workload.precision.default_for_model``: a decoder LLM's checkpoint half precision, bf16
        autocast for LoRA/QLoRA, else fp32), marked ``precision_default=True`` so that a GPU without bf16 runs
        its fp16 twin (``gpuwise.plan.profile.workload_on``). ``gpu``: a catalog GPU the job is for (a GPU
        without bf16 gets the fp16 twin now); None: decided per GPU later. The CLI applies it to every job
        given without ``--precision``; a precision set here is replaced."""
        rule = default_for_model(self.model, finetune=self.finetune, mode=self.mode,
                                 gpu_has_bf16=gpu.has_bf16 if gpu is not None else None)
        return self.with_(precision=rule.name, precision_default=True)

    def with_(self, **changes) -> "Workload":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field, JSON-safe (``lora_targets`` a list); ``from_dict`` reads it back."""
        d = asdict(self)
        d["lora_targets"] = list(self.lora_targets)
        if not self.is_training:
            d["optimizer"] = None     # serving steps no optimizer: the record says so rather than name one
        return d

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "Workload":
        """The Workload of a ``to_dict()`` record, e.g. read back from JSON or a run log (keys that are not
        fields are ignored, so records of other gpuwise versions read); WorkloadError when invalid."""
        if not isinstance(record.get("model"), str) or not record["model"]:
            raise WorkloadError(f"the workload record names no model (model {str(record.get('model'))[:40]!r})")
        for key, value in record.items():
            if isinstance(value, bool) and key in ("batch_size", "seq_len", "image_size", "grad_accum_steps",
                                                   "num_gpus"):
                raise WorkloadError(f"the workload record's {key} is {value!r}, not a whole number")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in record.items() if k in known}
        if kwargs.get("optimizer", "") is None and str(kwargs.get("mode", "")).strip().lower() == "infer":
            del kwargs["optimizer"]   # to_dict's null for a job that steps none: the field's default
        return cls(**kwargs)


class HasBf16(Protocol):
    """What ``Workload.with_default_precision`` reads of a GPU (a ``gpuwise.catalog.GPU``)."""

    @property
    def has_bf16(self) -> bool: ...


def lora_targets_of(value: object) -> tuple[str, ...]:
    """``--lora-targets`` as the job holds it: a tuple of module names. A string is split on commas
    ("q_proj,v_proj"; spaces and empty names dropped), a list or tuple kept as a tuple, None is ``()``
    (the method's default); WorkloadError for anything else."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(t.strip() for t in value.split(",") if t.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise WorkloadError(f"--lora-targets must be module names (\"q_proj,v_proj\" or a list of names), got {value!r}")


def serving_memory_refusal(w: Workload) -> str | None:
    """Why ``w``'s ``kv_cache_dtype`` or ``gpu_memory_utilization`` (vLLM's --kv-cache-dtype and
    --gpu-memory-utilization) is refused (None: each is unset, or valid and applies): a utilization outside (0, 1];
    either on a training step (no KV cache, no serving reservation); a utilization without vLLM (HF generate
    allocates as it goes); a KV cache dtype the engine has no such cache for (vLLM's ``VLLM_KV_CACHE_DTYPES``,
    HF generate's ``HF_KV_CACHE_DTYPES``)."""
    util, dtype = w.gpu_memory_utilization, w.kv_cache_dtype
    if util is not None and (isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1):
        return f"--gpu-memory-utilization must be a share of the GPU's memory in (0, 1], got {util!r}"
    given = [flag for flag, is_set in (("--kv-cache-dtype", dtype != "auto"),
                                       ("--gpu-memory-utilization", util is not None)) if is_set]
    if given and w.mode != "infer":
        return (f"{' and '.join(given)} size{'s' if len(given) == 1 else ''} LLM serving's memory (--mode infer); "
                "a training step keeps no KV cache")
    if util is not None and w.engine != "vllm":
        return ("--gpu-memory-utilization is the share of GPU memory vLLM pre-allocates: it needs --engine vllm "
                "(HF generate allocates as it goes)")
    if w.engine == "vllm" and dtype not in VLLM_KV_CACHE_DTYPES:
        return (f"--kv-cache-dtype {dtype}: vLLM's KV cache is one of {', '.join(VLLM_KV_CACHE_DTYPES)} "
                f"(auto: the model's dtype); --engine hf serves a {dtype} KV cache")
    if w.engine == "hf" and dtype not in HF_KV_CACHE_DTYPES:
        return (f"--kv-cache-dtype {dtype}: HF generate's KV cache is one of {', '.join(HF_KV_CACHE_DTYPES)} "
                "(int8/int4: transformers' quantized cache; it has no FP8 cache); --engine vllm serves an FP8 KV cache")
    return None


def default_engine(request_rate_per_s: float | None) -> str:
    """The serving engine of a job that names none: vLLM at a request rate (a rate is served by a server: HF
    generate's static batches make every request wait for the batch in progress, minutes at a few requests a
    second), else HF generate. The API and the CLI both get it (``Workload.engine`` None)."""
    return "vllm" if request_rate_per_s is not None else "hf"


FP8_PRECISION_REFUSAL = ("--precision: 'fp8' is how weights are stored, not a compute precision: an FP8 checkpoint "
                         "(a quantization_config with quant_method fp8, as DeepSeek-V3's) is served in FP8 by "
                         "itself with --mode infer, or say --quant fp8; --precision is the activations' dtype, "
                         f"valid: {', '.join(PRECISIONS)}")


def check_precision(value: str) -> str:
    """A precision as the user typed it (any case) -> its name; WorkloadError with suggestions otherwise."""
    name = str(value).strip().lower()
    if name == "fp8":
        raise WorkloadError(FP8_PRECISION_REFUSAL)
    _choice("precision", name, PRECISIONS)
    return name


def _choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""    # a record's null: no spelling
        raise WorkloadError(f"--{option}: unknown value {value!r}{hint}; valid: {', '.join(choices)}")


def _positive(option: str, value: int, maximum: int) -> None:
    if not isinstance(value, int) or value <= 0 or value > maximum:
        raise WorkloadError(f"--{option} must be a whole number between 1 and {maximum}, got {value!r}")
