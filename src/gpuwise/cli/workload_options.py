"""The workload options, declared once and given to every command that takes a workload (DESIGN.md).

``@workload_options()`` adds ``--batch-size``, ``--seq-len``, ``--precision`` … to a typer command's
signature and hands the command one ``workload_kwargs`` dict, so ``estimate``, ``recommend``,
``report --model`` and ``advise --model`` take the same names with the same defaults, and a workload
described on one command means the same job on another.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import typing
from typing import Annotated, Any, Callable, Optional

import typer

from gpuwise.cli import common as c

# vLLM's own flags, by their vLLM names: the serving memory of a decoder LLM (Workload.kv_cache_dtype,
# Workload.gpu_memory_utilization; the choices are workload.storage's KV_CACHE_BYTES)
KvCacheDtypeOpt = Annotated[str, typer.Option(
    "--kv-cache-dtype", help="LLM serving (--mode infer): the KV cache's dtype, as vLLM's --kv-cache-dtype: auto (the "
    "model's dtype), fp8 (fp8_e4m3, fp8_e5m2: 1 byte), bf16; with --engine hf also fp16, fp32, int8, int4 "
    "(transformers' quantized cache).")]
GpuMemoryUtilizationOpt = Annotated[Optional[float], typer.Option(
    "--gpu-memory-utilization", help="--engine vllm: the share of each GPU's memory vLLM pre-allocates for weights, "
    "activations and KV cache, in (0, 1] (vLLM's flag; default 0.9).")]

# name -> (typer annotation, default). The order is the order in --help.
WORKLOAD_OPTIONS: dict[str, tuple[Any, Any]] = {
    "batch_size": (c.BatchSizeOpt, "32"),
    "seq_len": (c.SeqLenOpt, None),
    "image_size": (c.ImageSizeOpt, None),
    "precision": (c.PrecisionOpt, None),
    "optimizer": (c.OptimizerOpt, None),
    "mode": (c.ModeOpt, "train"),
    "grad_checkpointing": (c.GradCkptOpt, False),
    "channels_last": (c.ChannelsLastOpt, False),
    "grad_accum": (c.GradAccumOpt, 1),
    "finetune": (c.FinetuneOpt, "full"),
    "lora_rank": (c.LoraRankOpt, 16),
    "lora_targets": (c.LoraTargetsOpt, None),
    "quant": (c.QuantOpt, "none"),
    "max_new_tokens": (c.MaxNewTokensOpt, 0),
    "num_gpus": (c.NumGpusOpt, 1),
    "sharding": (c.ShardingOpt, "ddp"),
    "offload": (c.OffloadOpt, "none"),
    "attention": (c.AttentionOpt, "sdpa"),
    "compile": (c.CompileOpt, False),
    "optimizer_impl": (c.OptimizerImplOpt, "foreach"),
    "keep_grads": (c.KeepGradsOpt, False),
    "input_rate": (c.InputRateOpt, None),
    "cpu_workers": (c.CpuWorkersOpt, None),
    "engine": (c.EngineOpt, None),     # None: hf, or vllm at --request-rate (``workload.model.default_engine``)
    "request_rate": (c.RequestRateOpt, None),
    "kv_cache_dtype": (KvCacheDtypeOpt, "auto"),
    "gpu_memory_utilization": (GpuMemoryUtilizationOpt, None),
    "logits": (c.LogitsOpt, "fp32"),
    "lora_dropout": (c.LoraDropoutOpt, 0.05),
}


# --help groups the ~26 shared options under their own panels, after the command's own options (typer's
# rich_help_panel): `report --html` and `advise --gpu-price` are not lost among them.
_PANEL_OF = {
    "Workload: the step": ("batch_size", "seq_len", "image_size", "precision", "optimizer", "mode",
                           "grad_checkpointing", "channels_last", "grad_accum"),
    "Workload: fine-tuning and LLMs": ("finetune", "lora_rank", "lora_targets", "quant", "max_new_tokens",
                                       "request_rate", "kv_cache_dtype", "gpu_memory_utilization", "logits",
                                       "lora_dropout"),
    "Workload: several GPUs": ("num_gpus", "sharding", "offload"),
    "Workload: software stack": ("attention", "compile", "optimizer_impl", "keep_grads", "input_rate", "cpu_workers",
                                 "engine"),
}
WORKLOAD_PANELS = {name: panel for panel, names in _PANEL_OF.items() for name in names}


def _in_panel(annotation: Any, panel: str) -> Any:
    """``Annotated[T, typer.Option(...)]`` with the option shown under ``panel`` in --help."""
    base, info = typing.get_args(annotation)[:2]
    info = copy.copy(info)
    info.rich_help_panel = panel
    return Annotated[base, info]


def _with_help(annotation: Any, text: str) -> Any:
    """``Annotated[T, typer.Option(...)]`` with its help replaced by ``text``."""
    base, info = typing.get_args(annotation)[:2]
    info = copy.copy(info)
    info.help = text
    return Annotated[base, info]


def workload_options(*, exclude: tuple[str, ...] = (), help: dict[str, str] | None = None) -> Callable:
    """Decorate a command whose last keyword parameter is ``workload_kwargs: dict``; the shared options
    (less ``exclude``) appear in its signature before ``workload_kwargs``' place. ``help``: option name ->
    the help a command gives it where the option means more there (recommend's --batch-size)."""
    names = [n for n in WORKLOAD_OPTIONS if n not in exclude]
    helps = help or {}

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "workload_kwargs"]
        first_model_free = next((i for i, p in enumerate(own) if p.default is not inspect.Parameter.empty), len(own))
        added = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY if own[first_model_free:] else
                              inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=WORKLOAD_OPTIONS[n][1],
                              annotation=_in_panel(_with_help(WORKLOAD_OPTIONS[n][0], helps[n]) if n in helps
                                                   else WORKLOAD_OPTIONS[n][0], WORKLOAD_PANELS[n]))
            for n in names
        ]
        params = own[:first_model_free] + added + own[first_model_free:]
        params = [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]

        @functools.wraps(fn)
        def command(*args, **kwargs):
            workload_kwargs = {n: kwargs.pop(n) for n in names if n in kwargs}
            return fn(*args, workload_kwargs=workload_kwargs, **kwargs)

        command.__signature__ = inspect.Signature(params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__          # typer must see the signature above, not the wrapped one
        return command

    return decorate


# Workload fields c.build_workload does not take: set on the workload it builds (and checked there, as every field is)
SERVING_MEMORY_OPTIONS = ("kv_cache_dtype", "gpu_memory_utilization")


def _build(model: str, batch_size: int, kw: dict):
    """``c.build_workload`` with the serving-memory options (``SERVING_MEMORY_OPTIONS``) set on what it builds."""
    serving = {n: kw.pop(n) for n in SERVING_MEMORY_OPTIONS if n in kw}
    return c.build_workload(model, batch_size=batch_size, **kw).with_(**serving)


def workload_from(model: str, workload_kwargs: dict, *, batch_size: int | None = None, gpu=None, **overrides):
    """The Workload for ``model`` from the shared options (``batch_size`` parsed by the caller). Without
    --precision, the one default rule (``Workload.with_default_precision``: an LLM's
    checkpoint half precision, bf16 autocast for LoRA/QLoRA, else fp32), marked as the default so that
    each GPU without bf16 runs its fp16 twin (``plan.profile.workload_on``)."""
    from gpuwise.workload.checkpoint import served_quant
    from gpuwise.workload.model import DEFAULT_OPTIMIZER
    from gpuwise.workload.specs import resolve_model_spec

    resolve_model_spec(model)     # a misspelt model is refused now, before anything heavy is imported
    kw = dict(workload_kwargs)
    kw.pop("batch_size", None)
    kw.update(overrides)
    defaulted = kw.get("precision") is None
    if defaulted:
        kw.pop("precision", None)     # set below by the one rule (``Workload.with_default_precision``)
    if kw.get("optimizer") is None:
        kw["optimizer"], kw["optimizer_default"] = DEFAULT_OPTIMIZER, True
    # serving a checkpoint stored quantized (its quantization_config: DeepSeek-V3's FP8) loads it so
    kw["quant"] = served_quant(model, mode=kw.get("mode", "train"), quant=kw.get("quant", "none"))
    workload = _build(model, batch_size if batch_size is not None else
                      c.parse_batch_size(workload_kwargs.get("batch_size", "32")), kw)
    from gpuwise.plan.generation import serving_memory_model_refusal

    if (refusal := serving_memory_model_refusal(workload)) is not None:
        raise c.WorkloadError(refusal)
    if defaulted:
        workload = workload.with_default_precision(gpu)
    for message in (*workload.inert_settings(), *_named_default_inert(workload, workload_kwargs)):
        logging.getLogger("gpuwise.cli").warning(message)
    ignored = workload.inputs_it_ignores()
    if ignored:     # warned above; not recorded either (--json's workload is the job that was estimated)
        workload = workload.with_(**dict.fromkeys(ignored))
    return workload.with_factory_sizes()     # a model factory's own sizes, where none was given, recorded



def _named_default_inert(workload, workload_kwargs: dict) -> tuple[str, ...]:
    """What ``Workload.inert_settings`` cannot tell: an option named with its default value that changes nothing
    (``--optimizer adamw --mode infer``; the Workload sees AdamW, the default either way). Only the CLI knows it
    was named (``workload_kwargs``)."""
    from gpuwise.workload.model import DEFAULT_OPTIMIZER

    named = workload_kwargs.get("optimizer")
    if not workload.is_training and named is not None and workload.optimizer == DEFAULT_OPTIMIZER:
        return (f"--optimizer {workload.optimizer} has no effect with --mode infer (no optimizer step)",)
    return ()


NO_MODEL = "(no --model)"     # the model of the job a command without --model validates its workload options on


def workload_or_checked(model: str | None, workload_kwargs: dict, *, used_without_model: tuple[str, ...] = (),
                        **overrides):
    """With --model, its Workload (``workload_from``); without, None, once the workload options are checked as
    they are with one: a bad value is refused (one line, exit 2) whether or not --model is given, and each option
    given that changes nothing without a model is warned about, as ``Workload.inert_settings`` warns of the
    options a job ignores. ``used_without_model``: the options the command reads without a model (report's and
    advise's --precision sets the datasheet ratio); ``overrides``: the command's own values of workload fields
    (advise's --num-gpus), checked by the same rules."""
    if c.text_option("--model", model, names="model", give="a model spec, e.g. torchvision:resnet50", unset="none"):
        return workload_from(model, workload_kwargs, **overrides)
    from gpuwise.workload.model import DEFAULT_OPTIMIZER

    kw = {**workload_kwargs, **overrides}
    kw.pop("batch_size", None)
    # named (an empty name too): checked; not named: the rule needs a model
    kw["precision"] = "fp32" if kw.get("precision") is None else kw["precision"]
    kw["optimizer"] = DEFAULT_OPTIMIZER if kw.get("optimizer") is None else kw["optimizer"]
    kw.pop("request_rate", None)     # what a rate sizes is the model's serving: said below, unused without one
    _build(NO_MODEL, c.parse_batch_size(workload_kwargs.get("batch_size", "32")), kw)
    for name in given_options(workload_kwargs):
        if name not in used_without_model:
            logging.getLogger("gpuwise.cli").warning(
                f"{option_flag(name)} has no effect without --model (the workload options describe the model's job)")
    return None


def given_options(workload_kwargs: dict) -> list[str]:
    """The workload options given a value other than their default, in --help order (a choice's name in any case,
    as the workload reads it: ``--mode TRAIN`` is the default)."""
    def same(value, default) -> bool:
        if isinstance(value, str) and isinstance(default, str):
            return value.strip().casefold() == default.casefold()
        return value == default
    return [n for n in WORKLOAD_OPTIONS if n in workload_kwargs and not same(workload_kwargs[n], WORKLOAD_OPTIONS[n][1])]


def option_flag(name: str) -> str:
    """The flag of a workload option: ``seq_len`` -> ``--seq-len``."""
    info = typing.get_args(WORKLOAD_OPTIONS[name][0])[1]
    return info.default      # typer.Option("--seq-len", ...): its first declaration is held as ``default``
