"""Model specs: one resolver from the string a user types to something that can build the model.

Accepted forms (see docs/trace.md):

- ``torchvision:NAME``        a torchvision classification or segmentation model
- ``timm:NAME``               a timm model (when timm is installed)
- ``hf:NAME``                 a transformers model: a shipped config (configs/*.json), else any Hub
                              repo id through huggingface_hub (config.json only; see workload/hub.py)
- ``hf:path/to/config.json``  any transformers config (a folder holding config.json works too)
- ``path/to/file.py:factory`` the user's own model: ``factory()`` returns the module, or
  ``(module, example_inputs)``, or ``(module, example_inputs, loss_fn)``
- a bare name (``resnet50``, ``bert-base-uncased``) is looked up in the shipped configs, then torchvision.

Resolution is cheap (no torch model is built); :meth:`ModelSpec.build` builds the model on the
``meta`` device, so no weights are allocated or initialised.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from gpuwise.errors import did_you_mean
from gpuwise.workload.config_checks import check_config
from gpuwise.workload.decoder_configs import is_decoder_config, missing_decoder_sizes
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.hub import NOT_ON_HUB, hub_config
from gpuwise.workload.timm_index import timm_models

log = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_IMAGE_SIZE = 224
DEFAULT_SEQ_LEN = 128     # tokens per sequence of a text model when --seq-len is not given

# Tasks a spec can be built for; they decide the inputs and the loss.
IMAGE_CLASSIFICATION = "image-classification"
SEGMENTATION = "segmentation"
SEQUENCE_CLASSIFICATION = "sequence-classification"
CAUSAL_LM = "causal-lm"
SEQ2SEQ_LM = "seq2seq-lm"
CUSTOM = "custom"


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model spec. ``name`` is canonical (``torchvision:resnet50``, ``hf:gpt2``)."""

    spec: str                   # as the user wrote it
    source: str                 # "torchvision" | "timm" | "hf" | "file"
    name: str                   # canonical, with the source prefix
    task: str                   # one of the task constants above
    target: str                 # torchvision/timm model name, config path or "file.py:factory"
    hf_config: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def is_vision(self) -> bool:
        return self.task in (IMAGE_CLASSIFICATION, SEGMENTATION)

    @property
    def is_text(self) -> bool:
        return self.task in (SEQUENCE_CLASSIFICATION, CAUSAL_LM, SEQ2SEQ_LM)

    def default_image_size(self) -> int:
        """The side the model is built for. Only a timm model needs its library (its pretrained config); the
        rest is answered here without importing torch (a cached estimate never imports it)."""
        if self.source == "torchvision" and self.target == "inception_v3":
            return 299   # its stem needs it
        if self.source == "timm" and timm_models().get(self.target.split(".", 1)[0]):
            return int(timm_models()[self.target.split(".", 1)[0]])
        if self.hf_config and self.hf_config.get("image_size"):
            return int(self.hf_config["image_size"])
        return DEFAULT_IMAGE_SIZE

    def default_seq_len(self) -> int:
        return DEFAULT_SEQ_LEN

    @property
    def max_positions(self) -> int | None:
        """The most tokens a sequence of this transformers model may hold (its position table's rows), or None
        without a limit: the bound a traced text model's --seq-len (and, generating, prompt + answer) must keep."""
        config = self.hf_config or {}
        if config.get("model_type") in ("t5", "mt5"):
            return None   # relative positions: no limit in the model
        for attr in ("max_position_embeddings", "n_positions"):
            value = config.get(attr)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def build(self, workload) -> "spec_builders.BuiltModel":  # noqa: F821 (lazy import: torch is heavy)
        """The module on the ``meta`` device, a batch maker and a loss (see spec_builders.BuiltModel)."""
        from gpuwise.workload import spec_builders

        return spec_builders.build(self, workload)


def resolve_model_spec(spec: str) -> ModelSpec:
    """Resolves a model spec string; WorkloadError (with suggestions) when nothing matches."""
    if not isinstance(spec, str) or not spec.strip():
        raise WorkloadError("model spec is empty; try e.g. torchvision:resnet50 or hf:bert-base-uncased")
    spec = spec.strip()
    head, sep, rest = spec.partition(":")
    if _is_factory_spec(spec):
        return _resolve_factory(spec)
    if sep and head == "torchvision":
        return _resolve_torchvision(spec, rest)
    if sep and head == "timm":
        return _resolve_timm(spec, rest)
    if sep and head == "hf":
        return _resolve_hf(spec, rest)
    if spec.endswith(".json") or Path(spec, "config.json").is_file():
        return _resolve_hf(spec, spec)
    # A bare name: shipped configs first (bert-base-uncased), then torchvision (resnet50).
    hf = _find_shipped(spec)
    if hf is not None:
        return _hf_from_file(spec, hf)
    if _torchvision_task(spec.lower()) is not None:
        return _resolve_torchvision(spec, spec)
    if spec.endswith(".py"):
        raise WorkloadError(_factory_missing(Path(spec)))
    raise WorkloadError(f"unknown model {spec!r}{did_you_mean(spec, _suggestion_pool())}; "
                        "use torchvision:NAME, timm:NAME, hf:NAME, hf:config.json or file.py:factory")


def known_models(include_timm: bool = False) -> list[str]:
    """Canonical names of the models gpuwise can build without a user file."""
    names = [f"torchvision:{n}" for n in sorted(_torchvision_tasks())]
    names += [f"hf:{n}" for n in sorted(_shipped_configs())]
    if include_timm:
        names += [f"timm:{n}" for n in timm_models()]
    return names


def shipped_config_path(name: str) -> Path | None:
    """The shipped config file for a repo id or its last part (case-insensitive), or None."""
    return _find_shipped(name)


# --- factories -----------------------------------------------------------------------------------

def image_side(workload) -> int | None:
    """The side in pixels of the job's images, the model's own default where none is given (299 for
    inception_v3, 384 for a ViT at 384); None for a job whose samples are not images (a text model, even
    with --image-size). A model file's samples are images when --image-size says so."""
    try:
        spec = _resolved(workload.model)
    except WorkloadError:
        return workload.image_size
    if spec.is_vision:
        return workload.image_size or spec.default_image_size()
    return workload.image_size if spec.task == CUSTOM else None


def feeds_images(workload) -> bool:
    """A job whose samples are images: what an input pipeline of JPEG-decoding workers feeds."""
    return image_side(workload) is not None


def input_kind(model: str) -> str | None:
    """"images" (a vision model: --image-size sizes its samples), "tokens" (a text model: --seq-len), or None
    (a model file, which may take either, or a spec that does not resolve)."""
    try:
        spec = _resolved(model)
    except WorkloadError:
        return None
    return "images" if spec.is_vision else "tokens" if spec.is_text else None


@lru_cache(maxsize=64)
def _resolved(model: str) -> ModelSpec:
    return resolve_model_spec(model)


def _is_factory_spec(spec: str) -> bool:
    path, sep, func = spec.rpartition(":")
    return bool(sep) and path.endswith(".py") and func.isidentifier()


def _factory_missing(path: Path) -> str:
    """Why a bare ``file.py`` is not a model: the file is missing, or the spec names no function in it (its
    top-level functions listed, read without running the file: importing it runs the user's code)."""
    if not path.is_file():
        return f"model factory file not found: {path}"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("_")]
    except (SyntaxError, ValueError, OSError):
        names = []
    shown = f" (defined there: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})" if names else ""
    return f"{path} names no factory: give {path}:FUNCTION, the function that returns the model{shown}"


def _resolve_factory(spec: str) -> ModelSpec:
    path, _, func = spec.rpartition(":")
    if not Path(path).is_file():
        raise WorkloadError(f"model factory file not found: {path}")
    return ModelSpec(spec, "file", spec, CUSTOM, spec)


# --- torchvision ---------------------------------------------------------------------------------

TORCHVISION_NAMES = Path(__file__).parent / "torchvision_models.json"
QUANTIZED_PREFIX = "quantized_"     # torchvision.models.quantization's builders: quantized_resnet50, ...


@lru_cache(maxsize=1)
def _torchvision_names() -> dict:
    """torchvision's model names by task: the shipped list when it was made from the installed version
    (no torch import: a typo is refused in a fraction of a second), else torchvision's own list."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("torchvision")
    except PackageNotFoundError:
        installed = None
    try:
        shipped = json.loads(TORCHVISION_NAMES.read_text())
    except (OSError, ValueError):
        shipped = {}
    if installed is not None and shipped.get("torchvision") == installed:
        return shipped
    import torchvision.models as tvm  # another version: ask it (slow, but right)

    classification, segmentation = tvm.list_models(module=tvm), tvm.list_models(module=tvm.segmentation)
    return {"torchvision": installed, "classification": classification, "segmentation": segmentation,
            "other": sorted(set(tvm.list_models()) - set(classification) - set(segmentation))}


@lru_cache(maxsize=1)
def _torchvision_tasks() -> dict[str, str]:
    names = _torchvision_names()
    tasks = {n: IMAGE_CLASSIFICATION for n in names["classification"]}
    tasks.update({n: SEGMENTATION for n in names["segmentation"]})
    return tasks


def _torchvision_task(name: str) -> str | None:
    return _torchvision_tasks().get(name)


def _is_torchvision_detection(key: str) -> bool:
    import torchvision.models as tvm     # only on this refusal's path

    return key in tvm.list_models(module=tvm.detection)


def _resolve_torchvision(spec: str, name: str) -> ModelSpec:
    key = name.strip().lower().replace("-", "_")
    task = _torchvision_task(key)
    if task is None:
        if key in _torchvision_names()["other"]:
            if _is_torchvision_detection(key):
                raise WorkloadError(
                    f"torchvision:{name} is a detection model: its training step checks the values of its target "
                    "boxes and its forward keeps the boxes non-maximum suppression selects, which tracing on fake "
                    "tensors (no values) cannot decide, so gpuwise cannot trace it, from a file.py:factory "
                    "either; it traces classification and segmentation models")
            if key.startswith(QUANTIZED_PREFIX):
                raise WorkloadError(
                    f"torchvision:{name} is a quantized model: its int8 layers (torch.ao's quantized conv and linear, "
                    "through fbgemm or qnnpack) run on the CPU only, PyTorch has no CUDA kernels for them, so there "
                    "is no GPU step to estimate; torchvision:" + key.removeprefix(QUANTIZED_PREFIX)
                    + " is the float model it quantizes")
            raise WorkloadError(f"torchvision:{name} is a video/optical-flow model; gpuwise traces "
                                "classification and segmentation models (wrap others in a file.py:factory)")
        # every torchvision name, the refused ones too (a typo of fasterrcnn_resnet50_fpn learns its name and then
        # why it is refused), matched on the bare names: a shared "torchvision:" made every name look alike
        names = [*_torchvision_tasks(), *_torchvision_names()["other"]]
        raise WorkloadError(f"unknown torchvision model {name!r}{did_you_mean(key, names, prefix='torchvision:')}")
    return ModelSpec(spec, "torchvision", f"torchvision:{key}", task, key)


# --- timm ----------------------------------------------------------------------------------------

def _resolve_timm(spec: str, name: str) -> ModelSpec:
    models = timm_models()     # the installed timm's names, cached per version: no import of timm
    if not models:
        raise WorkloadError(f"{spec}: timm is not installed (pip install timm)")
    key = name.strip()
    if key.split(".", 1)[0] not in models:     # "arch.pretrained_tag" names the arch's weights
        hint = did_you_mean(key, list(models), prefix="timm:")     # pasted back as is, as torchvision's
        if not hint:    # nothing close: where the names are, and a few of them
            examples = [m for m in ("resnet50", "vit_base_patch16_224", "convnext_tiny") if m in models]
            hint = (f" (timm.list_models() lists the {len(models):,} names of the installed timm"
                    + (f", e.g. {', '.join(examples)}" if examples else "") + ")")
        raise WorkloadError(f"unknown timm model {name!r}{hint}")
    return ModelSpec(spec, "timm", f"timm:{key}", IMAGE_CLASSIFICATION, key)


# --- transformers --------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _shipped_configs() -> dict[str, Path]:
    """repo id ('google/vit-base-patch16-224') -> config file, for every shipped config."""
    return {p.stem.replace("--", "/"): p for p in sorted(CONFIG_DIR.glob("*.json"))}


def _find_shipped(name: str, exact_only: bool = False) -> Path | None:
    key = name.strip().lower()
    shipped = _shipped_configs()
    for repo, path in shipped.items():
        if repo.lower() == key:
            return path
    if exact_only:
        return None
    short = [(repo, path) for repo, path in shipped.items() if repo.lower().rpartition("/")[2] == key.rpartition("/")[2]]
    return short[0][1] if len(short) == 1 else None


def as_config_file(path: Path) -> Path:
    """A checkpoint's folder holding a config.json is that file (``hf:path/to/checkpoint``); any other path as it
    is. The one rule of every reader of a local model."""
    return path / "config.json" if path.is_dir() and (path / "config.json").is_file() else path


def _resolve_hf(spec: str, name: str) -> ModelSpec:
    name = name.strip()
    path = as_config_file(Path(name))
    if path.suffix == ".json":
        if not path.is_file():
            raise WorkloadError(f"transformers config file not found: {name}")
        return _hf_from_file(spec, path, canonical=f"hf:{path}")
    exact = _find_shipped(name, exact_only=True)
    if exact is not None:
        return _hf_from_file(spec, exact)

    hub, why = hub_config(name)
    if hub is not None:
        return _hf_from_file(spec, hub, canonical=f"hf:{name}")
    shipped = _find_shipped(name)
    if shipped is not None:
        return _hf_from_file(spec, shipped)
    base = finetune_base_config(name, why)
    if base is None:
        # matched on the bare ids: an "hf:" on both sides made every id look alike (pythia-70m: "Mistral-7B?")
        raise WorkloadError(f"unknown model hf:{name} ({why}; no shipped config)"
                            f"{did_you_mean(name, list(_shipped_configs()), prefix='hf:')}; "
                            "pass hf:path/to/config.json for others")
    return _hf_from_file(spec, base, canonical=f"hf:{name}")


# A fine-tune's id is its base model's id plus a suffix (Qwen2.5-7B-Instruct, Llama-2-7b-chat-hf of
# Llama-2-7b-hf, gemma-3-4b-it of gemma-3-4b-pt, Baichuan2-7B-Chat of Baichuan2-7B-Base,
# Mistral-7B-Instruct-v0.3 of Mistral-7B-v0.3, Qwen3-4B-Instruct-2507 of Qwen3-4B): the same architecture,
# so the same layer sizes; a context length or rope base may differ, hence the warning naming the base.
_FINETUNE_NAME = re.compile(r"(?P<stem>.+?)-(?:instruct|chat|it)(?:-hf|-\d{4})?(?P<version>-v\d+(?:\.\d+)*)?", re.I)
_BASE_SUFFIXES = ("", "-hf", "-base", "-pt")


def finetune_base(name: str) -> tuple[str, Path] | None:
    """(base repo id, its shipped config) when ``name`` is a shipped model's id plus a fine-tune suffix
    (same organisation; a bare name matches the shipped ids' last parts), else None."""
    match = _FINETUNE_NAME.fullmatch(name.strip())
    if match is None:
        return None
    for suffix in _BASE_SUFFIXES:
        base = f"{match['stem']}{suffix}{match['version'] or ''}"
        path = _find_shipped(base, exact_only="/" in base)
        if path is not None:
            return path.stem.replace("--", "/"), path
    return None


def finetune_base_config(name: str, why: str) -> Path | None:
    """The base model's shipped config for a fine-tune's Hub id that the Hub gave no config.json for
    (``why``: workload.hub.hub_config's reason), logged; None when ``name`` is no fine-tune of a shipped
    model, or when the Hub answered that no such repo exists (a typo)."""
    base = None if why == NOT_ON_HUB else finetune_base(name)
    if base is None:
        return None
    _warn_finetune_base(name.strip(), base[0], why if "/" in name else "")
    return base[1]


@lru_cache(maxsize=64)
def _warn_finetune_base(name: str, base: str, why: str) -> None:
    """Once per name and process (recommend resolves a model for every GPU)."""
    log.warning("using %s's shipped config for %s: same architecture%s", base, name, f" ({why})" if why else "")


def _hf_from_file(spec: str, path: Path, canonical: str | None = None) -> ModelSpec:
    try:
        config = check_config(json.loads(path.read_text()), str(path))
    except (OSError, ValueError, RecursionError) as exc:
        raise WorkloadError(f"cannot read transformers config {path}: {str(exc)[:100]}") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise WorkloadError(f"{path}: not a transformers config (no 'model_type')")
    if missing := missing_decoder_sizes(config):
        raise WorkloadError(f"{path}: a decoder LM config must state its {' and '.join(missing)} "
                            "(gpuwise does not guess a model's size)")
    repo = path.stem.replace("--", "/")
    name = canonical or f"hf:{repo}"
    return ModelSpec(spec, "hf", name, _hf_task(config, name), str(path), config)


_ENCODER_TYPES = {"bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "xlm-roberta",
                  "camembert", "mpnet", "ernie", "longformer", "megatron-bert", "modernbert"}
_VISION_TYPES = {"vit", "deit", "beit", "swin", "swinv2", "convnext", "convnextv2", "dinov2", "resnet", "regnet",
                 "efficientnet", "mobilevit", "levit", "poolformer", "cvt", "vit_msn", "vit_hybrid"}


# Encoder-decoders of text to text: transformers' AutoModelForSeq2SeqLM, fed tokens (an audio or image
# encoder-decoder, Whisper's input_features, is none of these).
_TEXT_SEQ2SEQ_TYPES = {"t5", "mt5", "umt5", "longt5", "bart", "mbart", "marian", "pegasus", "pegasus_x", "led",
                       "blenderbot", "blenderbot-small", "plbart", "m2m_100", "fsmt", "prophetnet",
                       "switch_transformers", "bigbird_pegasus", "nllb-moe", "encoder-decoder"}
# Models whose inputs are not token ids or images for a classifier (audio, image-text pairs, detection):
# no AutoModelFor... that gpuwise builds feeds them right, even where one accepts the config.
_NOT_BUILT_TYPES = {"whisper", "wav2vec2", "wav2vec2-conformer", "wav2vec2-bert", "hubert", "wavlm", "unispeech",
                    "unispeech-sat", "sew", "sew-d", "data2vec-audio", "speech_to_text", "speecht5", "seamless_m4t",
                    "seamless_m4t_v2", "audio-spectrogram-transformer", "clap", "encodec", "musicgen", "bark",
                    "clip", "clipseg", "siglip", "siglip2", "chinese_clip", "altclip", "x_clip", "owlvit", "owlv2",
                    "blip", "blip-2", "instructblip", "flava", "align", "vision-encoder-decoder",
                    "speech-encoder-decoder", "vision-text-dual-encoder", "pix2struct", "detr", "yolos",
                    "conditional_detr", "deformable_detr", "sam", "mask2former", "maskformer", "oneformer",
                    "videomae", "timesformer", "vivit"}
# Head suffixes of architectures whose trunk gpuwise builds (with its own head: a sequence classifier for an
# encoder, a causal LM head for a decoder).
_BUILT_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForSequenceClassification", "ForMaskedLM", "ForPreTraining",
                        "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice", "Model")


def _hf_task(config: Mapping[str, Any], name: str = "") -> str:
    """Which AutoModelFor... to build: the config's architectures first, then its model_type. A model none of
    them builds with the right inputs (Whisper, CLIP, wav2vec2) is refused in one line, never built as another
    (a WhisperForConditionalGeneration config is not WhisperForCausalLM)."""
    archs = [str(a) for a in (config.get("architectures") or [])]
    model_type = str(config.get("model_type", ""))
    if any("ImageClassification" in a for a in archs) or model_type in _VISION_TYPES:
        return IMAGE_CLASSIFICATION
    if model_type in _ENCODER_TYPES:
        return SEQUENCE_CLASSIFICATION
    if model_type in _NOT_BUILT_TYPES:
        raise WorkloadError(_not_built(name, archs, model_type))
    if model_type in _TEXT_SEQ2SEQ_TYPES or config.get("is_encoder_decoder"):
        return SEQ2SEQ_LM
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return CAUSAL_LM
    if archs and not any(a.endswith(_BUILT_ARCH_SUFFIXES) for a in archs):

        if not is_decoder_config(dict(config)):     # a multimodal LLM's text decoder: the closed form reads it
            raise WorkloadError(_not_built(name, archs, model_type))
    if "MaskedLM" in " ".join(archs) or "SequenceClassification" in " ".join(archs):
        return SEQUENCE_CLASSIFICATION
    return CAUSAL_LM


def _not_built(name: str, archs: list[str], model_type: str) -> str:
    what = f"{archs[0]} (model_type {model_type!r})" if archs else f"model_type {model_type!r}"
    return (f"{name}: gpuwise cannot build {what} with its inputs from a config: it builds text encoders, decoder "
            "LMs (...ForCausalLM), text encoder-decoders (T5, BART ...) and image classifiers; wrap the model in a "
            "file.py:factory that returns it with example inputs")


def _suggestion_pool() -> list[str]:
    pool = list(_torchvision_tasks()) + list(_shipped_configs())
    pool += [repo.rpartition("/")[2] for repo in _shipped_configs()]
    return pool
