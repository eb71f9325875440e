"""Building a resolved ModelSpec: the module on the ``meta`` device, its inputs and its loss.

Kept apart from specs.py because it imports torch and the model libraries; resolving a spec does not.
Batches are made by calling ``make_batch`` under the tracer's FakeTensorMode, so their tensors are
fake: shapes and dtypes only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from gpuwise.errors import did_you_mean
from gpuwise.workload.deadline import deadline
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.specs import (
    CAUSAL_LM,
    DEFAULT_IMAGE_SIZE,
    DEFAULT_SEQ_LEN,
    IMAGE_CLASSIFICATION,
    SEGMENTATION,
    SEQ2SEQ_LM,
    SEQUENCE_CLASSIFICATION,
    ModelSpec,
)

Batch = tuple[tuple, dict]
LossFn = Callable[[Any, Batch], torch.Tensor]
# The frames of the clip guessed for a factory whose first layer is a Conv3d and which returns no inputs: what video
# classifiers are commonly trained on (torchvision's R3D/MViT, X3D-M, VideoMAE); said in the note with the guess.
GUESSED_CLIP_FRAMES = 16


@dataclass(frozen=True)
class GuessedInputs:
    """The input gpuwise made for a factory that returned no example inputs, from the model's first layer."""

    shape: tuple[int, ...]
    dtype: str                 # "float32", "int64"
    layer: str                 # the first layer's class: "Conv2d", "Linear", "Embedding"
    size_name: str | None      # the job's size the last dimension is: "image_size", "seq_len"; None (features)
    assumed: str = ""          # a size no layer and no option gives, in words: "16 frames of 224x224 px (...)"

    def described(self) -> str:
        return f"{self.shape} {self.dtype} from its first layer ({self.layer})" + (
            f", {self.assumed}" if self.assumed else "")

    def failure_hint(self) -> str:
        """What a failed trace adds where its input was guessed (a suffix): the guess, and how to give real ones."""
        return (f"; the factory returned no example inputs, so gpuwise guessed its input as {self.described()}: "
                "return (module, example_inputs) from the factory to give real ones, a tuple of forward's "
                "positional arguments (a dict inside it is one argument) or a dict of its keyword arguments")


@dataclass
class BuiltModel:
    """``module`` lives on ``meta``; ``make_batch(training)`` returns fresh (args, kwargs) each call;
    ``loss_fn(outputs, batch)`` returns the scalar loss (None: the model returns its own loss)."""

    module: nn.Module
    make_batch: Callable[[bool], Batch]
    loss_fn: LossFn | None
    is_hf: bool = False
    notes: tuple[str, ...] = ()
    resized_inputs: str = ""     # a factory without batch_size: how gpuwise resized its example inputs, in words
    guessed_inputs: GuessedInputs | None = None   # a factory that returned no example inputs: what gpuwise made
    # the sizes the inputs had where gpuwise, not the job, chose them (``guessed_sizes``); recorded as the job's
    input_sizes: tuple[tuple[str, int | None], ...] = ()

    @property
    def loss_note(self) -> str:
        """The loss gpuwise chose for a factory without a loss_fn, in words, once a step has run ('' otherwise)."""
        return self.loss_fn.said if isinstance(self.loss_fn, DefaultLoss) else ""


def build(spec: ModelSpec, workload) -> BuiltModel:
    image_size = workload.image_size or spec.default_image_size()
    seq_len = workload.tokens_per_sequence
    batch_size = workload.batch_size
    if spec.source == "file":
        return _build_factory(spec, workload)
    if spec.source == "hf":
        return _build_hf(spec, batch_size, seq_len, image_size, workload.attention)
    try:
        if spec.source == "torchvision":
            module = on_meta(lambda: _torchvision_module(spec, image_size))
        else:
            import timm

            module = on_meta(lambda: timm.create_model(spec.target, pretrained=False))
    except MODEL_ERRORS as exc:
        if not raised_by_model(exc):
            raise
        raise WorkloadError(model_failure(spec, workload, exc)) from exc
    num_classes = _num_classes(module)
    if spec.task == SEGMENTATION:
        return BuiltModel(module, _images(batch_size, image_size, num_classes, per_pixel=True), _segmentation_loss)
    return BuiltModel(module, _images(batch_size, image_size, num_classes), _classification_loss)


# What a model's own code raises for inputs it cannot take (torch._assert, shape checks, config checks).
MODEL_ERRORS = (AssertionError, ValueError, RuntimeError)


def raised_by_model(exc: BaseException, caller: tuple[str, str] | None = None) -> bool:
    """True when the code that raised ``exc`` is the model's (torchvision, timm, transformers, the
    user's file, torch.nn layers), not gpuwise's: the innermost frame of its traceback past torch's own
    functions and the dispatch hooks that only pass an operator on (the tracer's recorder among them).
    ``caller``: (module, function) of the gpuwise frame that calls the model itself; torch code it
    called directly (a model made of torch.nn layers only) counts as the model's."""
    for frame, _ in reversed(list(traceback.walk_tb(exc.__traceback__))):
        module = str(frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] == "torch" or frame.f_code.co_name in ("__torch_dispatch__", "__torch_function__"):
            continue
        if module.partition(".")[0] != "gpuwise":   # a user's factory file imports as gpuwise_user_<name>
            return True
        return caller == (module, frame.f_code.co_name)
    return False


def model_failure(spec: ModelSpec, workload, exc: BaseException, where: str = "", resized: str = "") -> str:
    """One line: the model, the inputs it was given, the library's message, ``where`` (a suffix)
    and, for a ViT-style model given an image size it cannot take, a size it can. A user's model that raised
    by itself (its own ``raise``, not a torch operator refusing a shape) is named with the exception's type,
    the inputs not blamed. ``resized``: how gpuwise resized a factory's inputs (it takes no batch_size)."""
    message = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:240]
    hint = image_size_hint(spec, workload.image_size or spec.default_image_size()) if spec.is_vision else ""
    if spec.source == "file" and not _raised_by_torch(exc):
        return f"{spec.name} raised {type(exc).__name__}: {message}{where}"
    if resized:
        hint += (f"; the factory takes no batch_size, so gpuwise {resized}: give it a batch_size parameter to "
                 "size its inputs itself")
    return f"{spec.name} cannot run on {describe_inputs(spec, workload)}: {message}{where}{hint}"


def _raised_by_torch(exc: BaseException) -> bool:
    """True when the innermost frame of the traceback is torch's (an operator or torch._assert refusing what it
    was given), False when it is the model's own code (a ``raise`` of its own)."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    return bool(frames) and str(frames[-1][0].f_globals.get("__name__", "")).partition(".")[0] == "torch"


def describe_inputs(spec: ModelSpec, workload) -> str:
    """``3×224×224 images``, ``512-token sequences``, or the factory's inputs, in words."""
    if spec.is_vision:
        size = workload.image_size or spec.default_image_size()
        channels = int((spec.hf_config or {}).get("num_channels", 3))
        return f"{channels}×{size}×{size} images"
    if spec.is_text:
        return f"{workload.tokens_per_sequence}-token sequences"
    return f"its inputs at batch size {workload.batch_size}"


_TORCHVISION_VIT = re.compile(r"vit_[a-z]_(\d+)")


def image_size_hint(spec: ModelSpec, image_size: int) -> str:
    """`` (try --image-size N)`` for a ViT-style model: the nearest multiple of its patch size when it
    takes any (torchvision's ViTs, built for the size asked), else the one size it is built for
    (timm's fixed-size models, transformers' ViT configs); '' when unknown or already that size."""
    vit = _TORCHVISION_VIT.fullmatch(spec.target) if spec.source == "torchvision" else None
    if vit is not None:
        patch = int(vit.group(1))
        if image_size % patch == 0:
            return ""
        lower = image_size // patch * patch
        sizes = sorted({lower, lower + patch} - {0}, key=lambda n: abs(n - image_size))
        if len(sizes) == 2 and abs(sizes[0] - image_size) != abs(sizes[1] - image_size):
            sizes = sizes[:1]
        return f" (try --image-size {' or '.join(map(str, sorted(sizes)))}: a multiple of its {patch}-pixel patch)"
    fixed = None
    if spec.source == "timm":
        import timm

        cfg = timm.get_pretrained_cfg(spec.target)
        if cfg is not None and getattr(cfg, "fixed_input_size", False) and getattr(cfg, "input_size", None):
            fixed = int(cfg.input_size[-1])
    elif spec.hf_config and spec.hf_config.get("patch_size") and isinstance(spec.hf_config.get("image_size"), int):
        fixed = spec.hf_config["image_size"]
    return f" (try --image-size {fixed}, the size it is built for)" if fixed and fixed != image_size else ""


def on_meta(build_fn: Callable[[], Any]):
    """Runs ``build_fn`` with new tensors on ``meta``; if the constructor computes with tensors
    (RegNet derives its widths with torch ops and ``.tolist()``), builds again with only the
    parameters and buffers moved to ``meta`` as they are registered (accelerate's
    ``init_empty_weights`` does the same)."""
    try:
        with torch.device("meta"):
            return build_fn()
    except NotImplementedError as exc:
        if "meta" not in str(exc):
            raise
    with _params_on_meta():
        return build_fn()


@contextlib.contextmanager
def _params_on_meta() -> Iterator[None]:
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter_on_meta(self, name, param):
        register_parameter(self, name, param)
        if param is not None and not param.is_meta:
            self._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    def buffer_on_meta(self, name, tensor, persistent=True):
        register_buffer(self, name, tensor, persistent)
        if tensor is not None and not tensor.is_meta:
            self._buffers[name] = tensor.to("meta")

    nn.Module.register_parameter, nn.Module.register_buffer = parameter_on_meta, buffer_on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


# --- vision --------------------------------------------------------------------------------------

def _torchvision_module(spec: ModelSpec, image_size: int) -> nn.Module:
    import torchvision.models as tvm

    builder = tvm.get_model_builder(spec.target)
    kwargs: dict[str, Any] = {"weights": None}
    if spec.task == SEGMENTATION:
        kwargs["weights_backbone"] = None
    if "image_size" in inspect.signature(builder).parameters or spec.target.startswith("vit_"):
        kwargs["image_size"] = image_size
    if spec.target in ("inception_v3", "googlenet"):
        kwargs["init_weights"] = False   # scipy truncnorm init would be wasted on meta tensors
    return builder(**kwargs)


def _num_classes(module: nn.Module) -> int:
    for attr in ("num_classes", "num_labels"):
        if isinstance(getattr(module, attr, None), int):
            return getattr(module, attr)
    last = [m for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    return last[-1].out_features if last and isinstance(last[-1], nn.Linear) else 1000


def _images(batch_size: int, image_size: int, num_classes: int, per_pixel: bool = False):
    def make_batch(training: bool) -> Batch:
        images = torch.empty(batch_size, 3, image_size, image_size)
        if not training:
            return (images,), {}
        label_shape = (batch_size, image_size, image_size) if per_pixel else (batch_size,)
        return (images,), {"_labels": torch.randint(0, num_classes, label_shape)}
    return make_batch


def _tensor_outputs(outputs) -> list[torch.Tensor]:
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, dict):
        return [v for v in outputs.values() if isinstance(v, torch.Tensor)]
    if isinstance(outputs, (tuple, list)):   # inception/googlenet aux logits
        return [v for v in outputs if isinstance(v, torch.Tensor)]
    return []


def _classification_loss(outputs, batch: Batch) -> torch.Tensor:
    labels = batch[1]["_labels"]
    logits = _tensor_outputs(outputs)
    loss = nn.functional.cross_entropy(logits[0], labels)
    for aux in logits[1:]:   # torchvision's reference recipe weighs auxiliary heads by 0.4
        loss = loss + 0.4 * nn.functional.cross_entropy(aux, labels)
    return loss


def _segmentation_loss(outputs, batch: Batch) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs["out"], batch[1]["_labels"])


# --- transformers --------------------------------------------------------------------------------

def _build_hf(spec: ModelSpec, batch_size: int, seq_len: int, image_size: int,
              attention: str = "sdpa") -> BuiltModel:
    """``attention`` "eager" builds the model with transformers' ``attn_implementation="eager"``, so the
    trace runs the model's own eager code (BERT's keeps the float32 probabilities through dropout under
    autocast, where Llama's casts them to 16-bit first); "sdpa" and "flash2" call SDPA, which the tracer
    routes to CUDA's fused kernels."""
    config_dict = dict(spec.hf_config or {})
    max_positions = spec.max_positions
    if spec.task != IMAGE_CLASSIFICATION and max_positions and seq_len > max_positions:
        raise WorkloadError(f"--seq-len {seq_len} exceeds {spec.name}'s {max_positions} positions")
    import transformers
    from transformers import AutoConfig

    model_type = config_dict.pop("model_type")
    for key in ("_name_or_path", "transformers_version", "architectures", "auto_map", "dtype"):
        config_dict.pop(key, None)
    # built in float32 whatever the checkpoint's dtype: the workload's precision (its flags or the default
    # rule, workload/precision.py) decides the dtypes the tracer gives weights and activations
    config_dict["torch_dtype"] = "float32"
    try:
        config = AutoConfig.for_model(model_type, **config_dict)
    except (KeyError, ValueError) as exc:
        raise WorkloadError(f"{spec.target}: transformers {transformers.__version__} cannot build "
                            f"model_type {model_type!r}: {exc}") from None
    auto = {
        SEQUENCE_CLASSIFICATION: transformers.AutoModelForSequenceClassification,
        CAUSAL_LM: transformers.AutoModelForCausalLM,
        SEQ2SEQ_LM: transformers.AutoModelForSeq2SeqLM,
        IMAGE_CLASSIFICATION: transformers.AutoModelForImageClassification,
    }[spec.task]
    fits = _auto_classes_for(model_type)
    if fits and auto.__name__ not in fits:
        raise WorkloadError(_kind_refusal(spec, model_type, fits))
    previous = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with torch.device("meta"):
            module = auto.from_config(config, **({"attn_implementation": "eager"} if attention == "eager" else {}))
    except ValueError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        reason = reason if len(reason) <= 160 else reason[:157] + "..."      # transformers lists every class it knows
        raise WorkloadError(f"{spec.name}: transformers cannot build {auto.__name__} for model_type {model_type!r}: "
                            f"{reason}; wrap the model in a file.py:factory that returns it with example inputs") from exc
    finally:
        transformers.logging.set_verbosity(previous)
    vocab = int(getattr(config, "vocab_size", 0) or 2)
    num_labels = int(getattr(config, "num_labels", 2))

    def make_batch(training: bool) -> Batch:
        if spec.task == IMAGE_CLASSIFICATION:
            channels = int(getattr(config, "num_channels", 3))
            kwargs = {"pixel_values": torch.empty(batch_size, channels, image_size, image_size)}
            if training:
                kwargs["labels"] = torch.randint(0, num_labels, (batch_size,))
            return (), kwargs
        # No padding: the attention mask is all ones, as in packed or equal-length batches.
        kwargs = {"input_ids": torch.randint(0, vocab, (batch_size, seq_len)),
                  "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long)}
        if spec.task == SEQ2SEQ_LM:
            kwargs["labels" if training else "decoder_input_ids"] = torch.randint(0, vocab, (batch_size, seq_len))
        elif training:
            shape = (batch_size,) if spec.task == SEQUENCE_CLASSIFICATION else (batch_size, seq_len)
            kwargs["labels"] = torch.randint(0, num_labels if spec.task == SEQUENCE_CLASSIFICATION else vocab, shape)
        if not training and spec.task == CAUSAL_LM:
            kwargs["use_cache"] = False
        return (), kwargs

    notes = ("transformers attention mask all ones (no padding)",) if spec.task != IMAGE_CLASSIFICATION else ()
    return BuiltModel(module, make_batch, None, is_hf=True, notes=notes)


def _auto_classes_for(model_type: str) -> dict[str, str]:
    """The transformers auto classes that build ``model_type``, each with the class it builds
    ({"AutoModelForImageClassification": "SegformerForImageClassification", ...}), from their name mappings; {} for
    a model_type the installed transformers does not know."""
    from transformers.models.auto import modeling_auto

    fits = {}
    for name in sorted(vars(modeling_auto)):
        names = getattr(getattr(getattr(modeling_auto, name), "_model_mapping", None), "_model_mapping", None)
        if name.startswith("AutoModel") and isinstance(names, dict) and model_type in names:
            fits[name] = names[model_type]
    return fits


def _kind_refusal(spec: ModelSpec, model_type: str, fits: dict[str, str]) -> str:
    """Why a config is not built as the kind of model its task says (a config without ``architectures`` is taken
    for a decoder): what transformers builds its model_type as, and what gpuwise builds."""
    heads = [f for f in fits if f != "AutoModel"] or list(fits)
    classifier = fits.get("AutoModelForImageClassification")
    remedy = (f"add \"architectures\": [\"{classifier}\"] to the config to estimate its image classifier, or wrap"
              if classifier else "wrap")
    return (f"{spec.name}: model_type {model_type!r} is none of the kinds gpuwise builds from a config "
            f"alone{' (it names no architectures)' if not (spec.hf_config or {}).get('architectures') else ''}: "
            f"transformers builds it as {' or '.join([', '.join(heads[:-1]), heads[-1]] if len(heads) > 1 else heads)}"
            f", while gpuwise builds text encoders, decoder LMs, text encoder-decoders and image classifiers; "
            f"{remedy} the model in a file.py:factory that returns it with "
            "example inputs")


# --- user factories ------------------------------------------------------------------------------

def _build_factory(spec: ModelSpec, workload) -> BuiltModel:
    path_str, _, func_name = spec.target.rpartition(":")
    path = Path(path_str).resolve()
    with deadline(f"model factory {path.name}:{func_name}"):  # the user's code: it may hang
        return _run_factory(path, func_name, workload)


@contextlib.contextmanager
def _folder_first_on_path(path: Path) -> Iterator[None]:
    """The model file's folder first on ``sys.path`` while it is loaded and its factory runs, as ``python
    file.py`` puts it: the file imports the modules beside it (and the trace cache hashes them: they are
    loaded from an absolute path, trace/cache.py ``user_sources``)."""
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)      # the first occurrence: the one inserted (or one equal to it)
        except ValueError:
            pass


def _run_factory(path: Path, func_name: str, workload) -> BuiltModel:
    with _folder_first_on_path(path):
        factory = _load_factory(path, func_name)
        params = inspect.signature(factory).parameters
        kwargs = factory_kwargs(params, workload)
        try:
            result = on_meta(lambda: factory(**kwargs))
        except (Exception, SystemExit) as exc:  # the user's code (even sys.exit): any error is bad input
            raise WorkloadError(f"model factory {path.name}:{func_name} raised {type(exc).__name__}: {exc}") from None
    return _built_from(result, path, func_name, params, kwargs, workload)


def _built_from(result, path: Path, func_name: str, params, kwargs: dict, workload) -> BuiltModel:
    """The factory's ``result`` checked and turned into the model, its batch maker and its loss."""
    module, example, loss_fn = _unpack_factory_result(result, path.name, func_name)
    notes = [note for note in (_call_note(func_name, params, kwargs),) if note]
    module, compiled = _uncompiled(module)
    if compiled:
        notes.append(compiled)
    resized, guessed, sizes = "", None, ()
    if example is None:
        example, guessed = _guess_inputs(module, workload.batch_size, workload.tokens_per_sequence,
                                         workload.image_size or DEFAULT_IMAGE_SIZE)
        sizes = guessed_sizes(guessed, params)
        notes.append(f"factory gave no inputs: guessed {guessed.described()}")
        notes += [ignored_size_note(name, func_name, guessed) for name, value in sizes
                  if value is None and getattr(workload, name) is not None]
    elif "batch_size" not in kwargs:
        example, resized = _with_batch(example, workload.batch_size)
        if resized:
            notes.append(f"{func_name} takes no batch_size: gpuwise {resized} (give it a batch_size parameter "
                         "to size its inputs itself)")
    if isinstance(example, dict):       # keyword inputs: forward(**example)

        def make_batch(training: bool) -> Batch:
            return (), {k: _fresh_like(x) for k, x in example.items()}
    else:
        template = example if isinstance(example, tuple) else (example,)

        def make_batch(training: bool) -> Batch:
            return tuple(_fresh_like(x) for x in template), {}

    materialised = _materialise_lazy(module, make_batch, f"{path.name}:{func_name}")
    if materialised:
        notes.append(materialised)
    return BuiltModel(module, make_batch, _user_loss(loss_fn) if loss_fn else DefaultLoss(), notes=tuple(notes),
                      resized_inputs=resized, guessed_inputs=guessed, input_sizes=sizes)


def lazy_modules(module: nn.Module) -> list[str]:
    """The names of ``module``'s modules whose own parameters or buffers have no shape yet (nn.LazyLinear,
    nn.LazyConv2d …: a first forward gives them one); '<top>' for ``module`` itself."""
    return [name or "<top>" for name, sub in module.named_modules()
            if any(is_lazy(t) for t in chain(sub.parameters(recurse=False), sub.buffers(recurse=False)))]


def _materialise_lazy(module: nn.Module, make_batch: Callable[[bool], Batch], factory: str) -> str:
    """Shapes a model's lazy modules as PyTorch does, by one forward of the example inputs, here on ``meta`` (no
    values computed; the tracer's fake tensors cannot hold an uninitialized parameter). A note ('' where nothing is
    lazy); WorkloadError where that forward fails or leaves one lazy (a module the forward does not reach)."""
    lazy = lazy_modules(module)
    if not lazy:
        return ""
    remedy = ("; give the lazy layers their sizes (nn.Linear(in, out) for nn.LazyLinear): the factory runs on the "
              "meta device, where a forward that reads values cannot run either")
    try:
        with torch.device("meta"), torch.no_grad():
            args, kwargs = make_batch(False)
            module(*args, **kwargs)
    except Exception as exc:  # the user's code on meta tensors: any error is theirs to work around
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]
        raise WorkloadError(f"model factory {factory}: its lazy modules take their sizes from a first forward, which "
                            f"failed on shape-only (meta) inputs ({type(exc).__name__}: {first_line}){remedy}") from None
    left = lazy_modules(module)
    if left:
        raise WorkloadError(f"model factory {factory}: lazy modules the forward of the example inputs does not reach "
                            f"have no shape ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''}){remedy}")
    return (f"lazy modules ({', '.join(lazy[:3])}{', ...' if len(lazy) > 3 else ''}) shaped by one forward of the "
            "example inputs on meta tensors, as their first real forward would")


def guessed_sizes(guessed: GuessedInputs, params) -> tuple[tuple[str, int | None], ...]:
    """(size, value) for each of ``seq_len``/``image_size`` the factory takes no parameter for: the value the guessed
    input's last dimension took where it is that size, None where it is not (the size changed nothing)."""
    return tuple((name, guessed.shape[-1] if name == guessed.size_name else None)
                 for name in ("seq_len", "image_size") if name not in params)


def ignored_size_note(name: str, func_name: str, guessed: GuessedInputs) -> str:
    """What is said of a ``--seq-len``/``--image-size`` given to a factory whose guessed input does not take it."""
    flag = "--" + name.replace("_", "-")
    return (f"{flag} has no effect: {func_name} takes no {name} parameter and its input was guessed as "
            f"{guessed.described()}, which has no {name}; return (module, example_inputs) from the factory to "
            "size its inputs")


def _uncompiled(module: nn.Module) -> tuple[nn.Module, str]:
    """A ``torch.compile``d module (an ``OptimizedModule``) -> the module it wraps and a note ('' for any other):
    the trace runs the eager module; ``--compile`` is what times a step as torch.compile runs it."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")   # not imported: nothing was compiled
    optimized = getattr(eval_frame, "OptimizedModule", None)
    if optimized is None or not isinstance(module, optimized):
        return module, ""
    return module._orig_mod, ("the factory returned a torch.compile'd module: traced as the eager module it wraps "
                              "(memory as eager PyTorch keeps it); give --compile to time the step as torch.compile "
                              "runs it")


def factory_kwargs(params, workload) -> dict[str, int]:
    """What a factory is called with: ``batch_size`` always (where it takes it); ``seq_len``/``image_size`` as the
    workload gives them, else nothing where the factory has a default of its own (its default stands), else
    gpuwise's default (a parameter without a default must be given)."""
    kwargs: dict[str, int] = {}
    if "batch_size" in params:
        kwargs["batch_size"] = workload.batch_size
    for name, given, fallback in (("seq_len", workload.seq_len, DEFAULT_SEQ_LEN),
                                  ("image_size", workload.image_size, DEFAULT_IMAGE_SIZE)):
        if name not in params:
            continue
        if given is not None:
            kwargs[name] = given
        elif params[name].default is inspect.Parameter.empty:
            kwargs[name] = fallback
    return kwargs


def _call_note(func_name: str, params, kwargs: dict) -> str:
    """``factory called as unet(batch_size=32, image_size=64), image_size its own default``: the sizes used ('' for a
    factory that takes none)."""
    used = {n: kwargs[n] if n in kwargs else params[n].default for n in ("batch_size", "seq_len", "image_size")
            if n in params}
    if not used:
        return ""
    own = [n for n in used if n != "batch_size" and params[n].default is not inspect.Parameter.empty
           and used[n] == params[n].default]
    call = ", ".join(f"{n}={v!r}" for n, v in used.items())
    return f"factory called as {func_name}({call})" + (f", {' and '.join(own)} its own default" if own else "")


def _load_factory(path: Path, func_name: str):
    module_name = f"gpuwise_user_{path.stem}_{abs(hash(str(path)))}"
    try:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        user_module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = user_module
        loader_spec.loader.exec_module(user_module)
    except (Exception, SystemExit) as exc:
        raise WorkloadError(f"cannot import model file {path.name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(user_module, func_name, None)
    if not callable(factory):
        names = [n for n, v in vars(user_module).items() if callable(v) and not n.startswith("_")]
        raise WorkloadError(f"{path.name} has no function {func_name!r}{did_you_mean(func_name, names)}")
    return factory


def _unpack_factory_result(result, file_name: str, func_name: str):
    parts = result if isinstance(result, tuple) and result and isinstance(result[0], nn.Module) else (result,)
    if not isinstance(parts[0], nn.Module) or len(parts) > 3:
        raise WorkloadError(f"model factory {file_name}:{func_name} must return a torch.nn.Module, "
                            "(module, example_inputs) or (module, example_inputs, loss_fn)")
    module = parts[0]
    example = parts[1] if len(parts) > 1 else None
    loss_fn = parts[2] if len(parts) > 2 else None
    if isinstance(example, Mapping):
        if not all(isinstance(k, str) and k.isidentifier() for k in example):
            raise WorkloadError(f"{file_name}:{func_name}: example inputs given as a dict are forward's keyword "
                                f"arguments: its keys must be names, not {sorted(map(repr, example))[:3]}")
        example = dict(example)
    elif example is not None and not isinstance(example, (torch.Tensor, tuple, list)):
        raise WorkloadError(f"{file_name}:{func_name}: example inputs must be a tensor, a tuple of tensors (forward's "
                            "positional arguments) or a dict of them (its keyword arguments)")
    if loss_fn is not None and not callable(loss_fn):
        raise WorkloadError(f"{file_name}:{func_name}: the third item it returns, the loss_fn, must be callable "
                            f"(outputs -> scalar loss tensor), not {_kind_of(loss_fn)}")
    if loss_fn is not None and (why := _one_argument_refusal(loss_fn)) is not None:
        raise WorkloadError(f"{file_name}:{func_name}: the loss_fn takes the model's outputs alone (outputs -> scalar "
                            f"loss tensor), but {why}; close over anything else it needs, e.g. "
                            "lambda out: F.cross_entropy(out, targets)")
    if isinstance(example, list):
        example = tuple(example)
    return module, example, loss_fn


def _with_batch(example, batch_size: int):
    """Sets the leading (batch) dimension of the example tensors to the workload's batch size: those whose
    leading dimension is the first tensor's (the example's batch; an (L, L) mask beside a (B, L, D) input keeps
    its shape). ``example``: a tensor, a tuple or a dict (keyword inputs) of them. Returns (example, what was done,
    in words: '' when nothing changed)."""
    if isinstance(example, dict):
        names, items = [repr(k) for k in example], tuple(example.values())
    else:
        items = example if isinstance(example, tuple) else (example,)
        names = [str(i) for i in range(len(items))]
    tensors = [(i, x) for i, x in enumerate(items) if isinstance(x, torch.Tensor) and x.dim()]
    if not tensors:
        return example, ""
    batch = tensors[0][1].shape[0]
    out = list(items)
    changed, kept = [], []
    for i, x in tensors:
        if x.shape[0] != batch:
            kept.append(f"input {names[i]} {tuple(x.shape)}")
            continue
        out[i] = x.new_empty((batch_size, *x.shape[1:]), device="meta")
        if batch != batch_size:
            changed.append(f"input {names[i]} {tuple(x.shape)} -> {tuple(out[i].shape)}")
    if not changed:
        return example, ""
    words = "set the first dimension to the batch size: " + ", ".join(changed)
    if kept:
        words += f" (kept, its first dimension is not {batch}: {', '.join(kept)})"
    if isinstance(example, dict):
        return dict(zip(example, out)), words
    return (tuple(out) if isinstance(example, tuple) else out[0]), words


def _fresh_like(example):
    """``example`` with each tensor made afresh (a fake tensor under the trace's FakeTensorMode), inside
    lists, tuples and dicts too (a detection model's list of images and list of target dicts)."""
    from torch.utils._pytree import tree_map

    return tree_map(_fresh_tensor, example)


def _fresh_tensor(x):
    if isinstance(x, torch.Tensor):
        fresh = torch.empty(x.shape, dtype=x.dtype)
        return fresh.requires_grad_(x.requires_grad) if x.is_floating_point() else fresh
    return x


def _guess_inputs(module: nn.Module, batch_size: int, seq_len: int, image_size: int):
    """(the example inputs, what was guessed) for a factory that returned none, from the model's first layer: images
    (Conv2d) and clips of ``GUESSED_CLIP_FRAMES`` frames (Conv3d) at ``image_size`` px square, tokens (Embedding,
    EmbeddingBag) and sequences (Conv1d) of ``seq_len``, features (Linear). A lazy first layer (nn.LazyLinear) learns its input's size
    from the first forward, so there is nothing to guess from."""
    first = next((m for m in module.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear,
                                                                   nn.Embedding, nn.EmbeddingBag))), None)
    size_name, assumed = None, ""
    if first is None or lazy_modules(first):
        why = f": its first layer, {type(first).__name__}, takes its input's size from the first forward" if first \
            else ""
        raise WorkloadError(f"the model factory returned no example inputs and gpuwise cannot guess them{why}; "
                            "return (module, example_inputs)")
    if isinstance(first, nn.Conv3d):
        x = torch.empty(batch_size, first.in_channels, GUESSED_CLIP_FRAMES, image_size, image_size, device="meta")
        size_name, assumed = "image_size", (f"{GUESSED_CLIP_FRAMES} frames of {image_size}x{image_size} px (the frame "
                                            "count assumed)")
    elif isinstance(first, nn.Conv2d):
        x, size_name = torch.empty(batch_size, first.in_channels, image_size, image_size, device="meta"), "image_size"
    elif isinstance(first, nn.Conv1d):
        x, size_name = torch.empty(batch_size, first.in_channels, seq_len, device="meta"), "seq_len"
    elif isinstance(first, nn.Linear):
        x = torch.empty(batch_size, first.in_features, device="meta")
    else:
        x, size_name = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta"), "seq_len"
    return (x,), GuessedInputs(tuple(x.shape), str(x.dtype).removeprefix("torch."), type(first).__name__, size_name,
                               assumed)


def _one_argument_refusal(fn) -> str | None:
    """Why ``fn`` cannot be called with one positional argument, in words (None: it can, or its signature cannot be
    read, as for some builtins: then calling it says)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError as exc:
        return f"{getattr(fn, '__name__', 'it')}{signature} needs more: {exc}"
    return None


def _user_loss(loss_fn) -> LossFn:
    def loss(outputs, batch: Batch) -> torch.Tensor:
        return loss_fn(outputs)
    return loss


def _kind_of(value) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


class DefaultLoss:
    """The loss of a factory that gives no loss_fn. The model's own ``loss`` output where it returns one (a
    transformers model given labels); else a sum over every floating tensor it returns that requires grad (nested in
    tuples, lists and dicts): cross-entropy for a (batch, classes) output, mean squared error against zeros for any
    other. Every head trains, as in a multi-task model's loss (and torchvision's detection losses, a sum): each gets
    its backward, its gradients and its optimizer state. ``said``: the loss used, in words (a note of the trace)."""

    def __init__(self) -> None:
        self.said = ""

    def __call__(self, outputs, batch: Batch) -> torch.Tensor:
        own = outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
        if isinstance(own, torch.Tensor) and own.is_floating_point() and own.dim() == 0:
            self.said = "no loss_fn: the model's own 'loss' output is the loss"
            return own
        from torch.utils._pytree import tree_flatten_with_path

        leaves = [(_output_name(path), t) for path, t in tree_flatten_with_path(_as_tree(outputs))[0]
                  if isinstance(t, torch.Tensor)]
        if not leaves:
            raise WorkloadError(f"the model's forward returned {_kind_of(outputs)}, no tensor to train on: return the "
                                "output (or the loss), or give the factory a loss_fn: (module, inputs, loss_fn)")
        used = [(k, t) for k, t in leaves if t.is_floating_point() and t.requires_grad] or leaves[:1]
        loss, words = None, []
        for key, out in used:
            if out.dim() == 2 and out.shape[1] > 1 and out.is_floating_point():
                term = nn.functional.cross_entropy(out, torch.zeros(out.shape[0], dtype=torch.long))
                kind = "cross-entropy"
            else:
                term = nn.functional.mse_loss(out, torch.zeros_like(out))
                kind = "mean squared error"
            loss = term if loss is None else loss + term
            words.append(f"{kind} on {'the output' if not key else repr(key)} {tuple(out.shape)}")
        self.said = ("no loss_fn: the loss is " + ("the sum of " if len(words) > 1 else "") + ", ".join(words)
                     + (" (every floating output that requires grad)" if len(words) > 1 else "")
                     + "; give the factory a loss_fn for the model's own loss")
        return loss


def _output_name(path) -> str:
    """A pytree key path as the output's name: 'logits', 'aux.0' ('' for the output itself)."""
    return ".".join(str(next((getattr(k, a) for a in ("key", "idx", "name") if hasattr(k, a)), k)) for k in path)


def _as_tree(outputs):
    """``outputs`` as a pytree: a transformers ModelOutput (a dict subclass with attributes) as a plain dict."""
    if isinstance(outputs, Mapping) and not isinstance(outputs, dict):
        return dict(outputs)
    if isinstance(outputs, dict) and type(outputs) is not dict:
        return dict(outputs.items())
    return outputs
