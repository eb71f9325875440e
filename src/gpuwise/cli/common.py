"""What every command shares: output (rich or JSON), and the workload options with their names."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload, WorkloadError

if TYPE_CHECKING:
    from gpuwise.plan.spot import SpotRisk

# Human output goes to stdout through rich; with --json, stdout carries one JSON object and nothing else.
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def size_to_terminal() -> None:
    """Size both consoles to the terminal as it is now: rich reads ``COLUMNS`` once, when a console is made, and a
    notebook or a test runs many commands in one process (``app.main`` calls this before each but the first)."""
    for con in (console, err_console):
        con.width = Console(stderr=con.stderr).width


def natural_width(renderable: Any) -> int:
    """Columns ``renderable`` takes on one line per cell (nothing wrapped), whatever the console's width."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(10_000), renderable).maximum


ID_HEADERS = ("gpu", "GPU")   # columns of GPU ids: an id is read whole ("a100-80gb-s / xm4" is two words)


def fit_to_console(table: Any) -> Any:
    """``table``, every column but the GPU ids allowed to wrap (folding long words) when it is wider than the
    console.

    Piped, rich lays out 80 columns (or $COLUMNS) and crops a no-wrap cell silently; a cell that wraps
    takes two lines instead, so no value is ever cut. An id column keeps its width: the others give way.
    """
    if natural_width(table) > console.width:
        for column in table.columns:
            column.no_wrap, column.overflow = str(column.header).strip() in ID_HEADERS, "fold"
    return table


def job_words(workload: Workload) -> str:
    """What a header says of the job's numbers: in serving, the weights' quantization before the precision
    (``--quant nf4`` serves nf4 weights, whatever the compute precision) and, at a request rate, the engine."""
    from gpuwise.workload.precision import described

    words = described(workload.precision, workload.precision_default)
    if workload.is_training:
        return words
    if workload.quant != "none":
        words = f"{workload.quant} weights, compute {words}"
    if workload.request_rate_per_s is not None:
        words += (", engine vllm (the default at --request-rate: a rate is served by a server; --engine hf for "
                  "HF generate's static batches)" if workload.engine_default else f", engine {workload.engine}")
    return words


def batch_words(workload: Workload, *, defaulted: bool = False) -> str:
    """What a header says of a job's batch: the micro-batch, per GPU where a training job has several, and, where
    accumulation or GPUs multiply it, the effective batch (samples per optimizer step, ``effective_batch_size``):
    ``batch 32 per GPU × 8 GPUs = effective batch 256``. Serving's batch is said as it is. ``defaulted``: the batch
    size was not given (said beside it, as a precision's default is)."""
    per_gpu = " per GPU" if workload.is_training and workload.num_gpus > 1 else ""
    batch = f"batch {workload.batch_size}{per_gpu}" + (" (the default; --batch-size to choose)" if defaulted else "")
    if not workload.is_training or workload.effective_batch_size == workload.batch_size:
        return batch
    factors = [batch]
    if workload.grad_accum_steps > 1:
        factors.append(f"{workload.grad_accum_steps} accumulation steps")
    if workload.num_gpus > 1:
        factors.append(f"{workload.num_gpus} GPUs")
    return f"{' × '.join(factors)} = effective batch {workload.effective_batch_size}"


def print_json(obj: Any) -> None:
    """``obj`` as one strict JSON object on stdout: a NaN or infinity is no JSON (``Infinity`` breaks every strict
    parser), so one is refused (``refuse_non_finite``) before anything is written; a number that is unknown is null."""
    try:
        text = json.dumps(obj, indent=2, default=_json_default, ensure_ascii=False, allow_nan=False)
    except ValueError:
        refuse_non_finite(obj)
        raise
    sys.stdout.write(text + "\n")


def refuse_non_finite(obj: Any, inputs: str = "the inputs") -> None:
    """One line and exit 2, nothing printed, when an answer holds a NaN or infinity (``inf years``, ``¥nan`` are no
    answer): ``inputs``, the options that scale it, name what made it too large to compute."""
    where = _non_finite_path(obj)
    if where:
        raise GpuwiseError(f"the answer is too large to compute with {inputs} ({where} is not a finite number): "
                           "nothing printed")


def _non_finite_path(obj: Any, path: str = "") -> str | None:
    """Where in ``obj`` the first NaN or infinity is (``plan.cost``), for the refusal; None: nowhere."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path or "the value"
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite_path(value, (f"{path}.{key}" if path else key) if isinstance(key, str) else f"{path}[{key}]")
        if found:
            return found
    return None


def _json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout and nothing else.")]
# One meaning on every command (gpuwise.plan.fit): a share of the GPU's memory as the driver reports it.
HeadroomOpt = Annotated[Optional[str], typer.Option(
    "--headroom", help="Share of the GPU's memory (as nvidia-smi reports it) kept free: 5% or 0.05 (default 5%).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Trace again instead of reusing a cached trace (the cache: $GPUWISE_CACHE_DIR or ~/.cache/gpuwise; safe to delete).")]


def usable_words(gpu_memory_bytes: int, headroom_fraction: float) -> str:
    """'12.0 GiB usable with 50% of its 24.0 GiB kept free': the memory a need on a GPU of ``gpu_memory_bytes`` (as
    the driver reports it) is judged against (``plan.fit.usable_of``), not the whole card, in the words every fit
    line shares (``memory.uncertainty.usable_words``)."""
    from gpuwise.memory.uncertainty import usable_words as words
    from gpuwise.plan.fit import usable_of

    return words(usable_of(gpu_memory_bytes, headroom_fraction), gpu_memory_bytes, headroom_fraction)


# Spot (recommend, advise): the assumption a spot price is read with. Left out (None), each is plan.spot's default
# (``spot_risk``), which the help states: gpuwise.plan is not imported to say it (every command reads this module).
PreemptionsPerHourOpt = Annotated[Optional[float], typer.Option(
    "--preemptions-per-hour", help="Spot: preemptions assumed per hour of running, on each machine (default 0.05, "
    "one in 20 h).")]
CheckpointEveryOpt = Annotated[Optional[str], typer.Option(
    "--checkpoint-every", help="Spot: the run's checkpoint interval; a preemption loses half of it (default 30m).")]


def spot_risk(preemptions_per_hour: float | None, checkpoint_every: str | None) -> SpotRisk:
    """The ``plan.spot.SpotRisk`` of ``--preemptions-per-hour`` and ``--checkpoint-every`` (each None: its default
    there); a value out of range is refused in one line naming its option."""
    from gpuwise.plan.spot import DEFAULT_CHECKPOINT_INTERVAL_S, DEFAULT_PREEMPTIONS_PER_HOUR, SpotRisk

    return SpotRisk(
        DEFAULT_PREEMPTIONS_PER_HOUR if preemptions_per_hour is None else preemptions_per_hour,
        DEFAULT_CHECKPOINT_INTERVAL_S if checkpoint_every is None else duration_option("--checkpoint-every",
                                                                                       checkpoint_every))


def use_trace_cache(enabled: bool) -> None:
    """--no-cache: this command traces again (and does not store what it traced)."""
    from gpuwise.trace.cache import set_enabled

    set_enabled(enabled)
CatalogOpt = Annotated[
    Optional[str], typer.Option("--catalog", help="A catalog TOML file adding or overriding GPUs and offers.")
]
LiveOpt = Annotated[bool, typer.Option("--live", help="Add the clouds' offers of now (gpuhunt: AWS, GCP, Azure, RunPod, "
                                       "Vast.ai, Lambda, ...; cached 6 h; the shipped ones when offline).")]


def load_catalog_for(catalog: str | None, live: bool):
    """The catalog (shipped + user + ``--catalog``), with ``--live`` the clouds' offers of now added; what
    happened to the live ones is said on stderr."""
    from gpuwise.catalog import load_catalog

    cat = load_catalog(catalog)
    if not live:
        return cat
    from gpuwise.catalog.live import live_offers, with_live_offers

    found = live_offers(cat)
    say = logging.getLogger("gpuwise.cli")
    if found.note:
        say.warning(found.note)
    if found.offers:
        say.warning(f"--live: {len(found.offers)} offers fetched {found.fetched_iso}"
                    f"{' (cached)' if found.from_cache else ''} by gpuhunt"
                    + (f"; {found.left_out} of GPUs the catalog cannot tell apart left out" if found.left_out else ""))
    return with_live_offers(cat, found)
# Where the GPUs are (gpuwise.catalog.topology): the provider's machines set the links a multi-GPU job runs over.
WhereProviderOpt = Annotated[Optional[str], typer.Option(
    "--provider", help="Whose machines the --num-gpus GPUs are in (a catalog provider: aws, gcp, autodl, ...): "
    "its links inside a node and its network between nodes set the communication time and NCCL's buffers "
    "(default: the GPU's usual machine; several machines linked by an assumed ethernet).")]

# Workload options: the same names on every command that takes a workload (DESIGN.md).
BatchSizeOpt = Annotated[str, typer.Option("--batch-size", "-b", help="Micro-batch per GPU (recommend also takes 'auto', with --effective-batch).")]
SeqLenOpt = Annotated[Optional[int], typer.Option("--seq-len", help="Tokens per sample (text models).")]
ImageSizeOpt = Annotated[Optional[int], typer.Option("--image-size", help="Image side in pixels (vision models).")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="fp32, tf32, amp-fp16, amp-bf16, fp16, bf16 (default: chosen per job and GPU, and said in the output: docs/precision.md).")]
OptimizerOpt = Annotated[
    Optional[str], typer.Option("--optimizer", help="none, sgd, momentum, adam, adamw, adamw-8bit, paged-adamw, paged-adamw-8bit, adafactor, lion (default: adamw).")
]
ModeOpt = Annotated[str, typer.Option("--mode", help="train or infer.")]
GradCkptOpt = Annotated[bool, typer.Option("--grad-checkpointing", help="Recompute activations in backward.")]
ChannelsLastOpt = Annotated[bool, typer.Option("--channels-last", help="NHWC memory format for convolutions.")]
GradAccumOpt = Annotated[int, typer.Option("--grad-accum", help="Micro-batches per optimizer step.")]
FinetuneOpt = Annotated[str, typer.Option("--finetune", help="full, freeze, lora, qlora.")]
LoraRankOpt = Annotated[int, typer.Option("--lora-rank", help="LoRA rank r.")]
LoraTargetsOpt = Annotated[
    Optional[str], typer.Option("--lora-targets", help="Comma-separated module names (default: all linear layers).")
]
QuantOpt = Annotated[str, typer.Option("--quant", help="Base weights: none, int8, nf4 (bitsandbytes); fp8 (serving "
                                                           "only); w4a16 / w8a16 (AWQ, GPTQ: serving only). A "
                                                           "checkpoint stored quantized is served as stored by default.")]
MaxNewTokensOpt = Annotated[int, typer.Option("--max-new-tokens", help="Tokens to generate (--mode infer).")]
NumGpusOpt = Annotated[int, typer.Option("--num-gpus", help="GPUs the job is spread over.")]
ShardingOpt = Annotated[str, typer.Option("--sharding", help="ddp, zero1, zero2, zero3, fsdp.")]
OffloadOpt = Annotated[str, typer.Option("--offload", help="none, optimizer, params (to CPU memory).")]
# The software stack (DESIGN.md): each default is what the prediction assumes, and it says so.
AttentionOpt = Annotated[str, typer.Option("--attention", help="sdpa (default: transformers' SDPA), eager (materialises batch × heads × seq² scores), flash2.")]
CompileOpt = Annotated[bool, typer.Option("--compile", help="torch.compile: fewer kernels, fused elementwise work (default: eager).")]
OptimizerImplOpt = Annotated[str, typer.Option("--optimizer-impl", help="foreach (PyTorch's default), fused, for-loop.")]
KeepGradsOpt = Annotated[bool, typer.Option("--keep-grads", help="zero_grad(set_to_none=False): gradients stay allocated between steps.")]
InputRateOpt = Annotated[Optional[float], typer.Option("--input-rate", help="Samples/s the input pipeline delivers to each GPU (each GPU's own loader; a machine's rate / its GPUs) (default: synthetic data, no limit).")]
CpuWorkersOpt = Annotated[Optional[int], typer.Option("--cpu-workers", help="DataLoader workers decoding JPEGs per GPU (vision models): sets the input rate from torchvision's transforms as measured on one core (default: synthetic data).")]
RequestRateOpt = Annotated[Optional[float], typer.Option("--request-rate", help="LLM serving (--mode infer): requests a second, arriving as a Poisson stream; sizes the deployment by load (replicas, concurrency, cost per hour and per million tokens) instead of one batch.")]
EngineOpt = Annotated[Optional[str], typer.Option("--engine", help="LLM inference engine: hf (generate, eager; the default) or vllm (the default at --request-rate).")]
LogitsOpt = Annotated[str, typer.Option("--logits", help="LLM loss: fp32 (default: transformers upcasts the logits), chunked (LitGPT's chunked cross-entropy), fused (Liger).")]
LoraDropoutOpt = Annotated[float, typer.Option("--lora-dropout", help="LoRA dropout (default 0.05, as LitGPT/QLoRA/TRL recipes; 0 keeps no mask or copy).")]


def build_workload(
    model: str,
    *,
    batch_size: int,
    seq_len: int | None = None,
    image_size: int | None = None,
    precision: str = "fp32",
    optimizer: str = "adamw",
    mode: str = "train",
    grad_checkpointing: bool = False,
    channels_last: bool = False,
    grad_accum: int = 1,
    finetune: str = "full",
    lora_rank: int = 16,
    lora_targets: str | None = None,
    quant: str = "none",
    max_new_tokens: int = 0,
    num_gpus: int = 1,
    sharding: str = "ddp",
    offload: str = "none",
    attention: str = "sdpa",
    compile: bool = False,
    optimizer_impl: str = "foreach",
    keep_grads: bool = False,
    input_rate: float | None = None,
    cpu_workers: int | None = None,
    engine: str | None = None,
    request_rate: float | None = None,
    logits: str = "fp32",
    lora_dropout: float = 0.05,
    precision_default: bool = False,
    optimizer_default: bool = False,
) -> Workload:
    return Workload(
        model=model, batch_size=batch_size, seq_len=seq_len, image_size=image_size, precision=precision,
        optimizer=optimizer, mode=mode, grad_checkpointing=grad_checkpointing, channels_last=channels_last,
        grad_accum_steps=grad_accum, finetune=finetune, lora_rank=lora_rank, lora_targets=lora_targets or (), quant=quant,
        max_new_tokens=max_new_tokens, num_gpus=num_gpus, sharding=sharding, offload=offload,
        attention=attention, compile=compile, optimizer_impl=optimizer_impl, keep_grads=keep_grads,
        input_rate=input_rate, cpu_workers=cpu_workers, engine=engine, request_rate_per_s=request_rate,
        logits=logits, lora_dropout=lora_dropout,
        precision_default=precision_default, optimizer_default=optimizer_default,
    )


def parse_batch_size(text: str, *, allow_auto: bool = False) -> int | None:
    """An int >= 1, or None for 'auto' where the command allows it."""
    if allow_auto and text.strip().lower() == "auto":
        return None
    hint = " or 'auto'" if allow_auto else ""
    try:
        value = int(text)
    except ValueError:
        raise WorkloadError(f"--batch-size must be a whole number{hint}, got {text!r}") from None
    check_option(value >= 1, "--batch-size", text, f"a whole number >= 1{hint}")
    return value


def check_option(ok: bool, option: str, value: object, rule: str) -> None:
    """One line and exit 2 when an option's value is out of range:
    ``check_option(count >= 1, "--count", count, "a whole number >= 1")``."""
    if not ok:
        raise GpuwiseError(f"{option} must be {rule}, got {value!r}")


def size_option(option: str, text: str) -> int:
    """Bytes of a size option (``--min-memory 80GB``), a unit required; one line naming the option if not."""
    from gpuwise.units import UnitError, parse_bytes

    try:
        return parse_bytes(text, unit_required=True)
    except UnitError as e:
        raise UnitError(f"{option}: {e}") from None


def option_defaulted(param: str) -> bool:
    """Whether the running command's option ``param`` (its Python name: ``batch_size``) took its default, not
    typed; False where that is not known (no command running: a library call). What the output says "(the
    default; --batch-size to choose)" after, as it does for the precision and the optimizer."""
    try:     # typer runs its own copy of click; plain click where an older typer uses that
        from typer._click.core import ParameterSource
        from typer._click.globals import get_current_context
    except ImportError:     # pragma: no cover - depends on the typer installed
        from click.core import ParameterSource
        from click.globals import get_current_context
    ctx = get_current_context(silent=True)
    source = ctx.get_parameter_source(param) if ctx is not None else None
    return source in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def money_option(option: str, text: str, *, ranking_currency: str | None = None) -> tuple[float, str | None]:
    """(amount, currency or None) of a money option (``--budget ¥300``): a finite amount > 0, in a currency
    gpuwise has a rate for; one line naming the option if not. ``ranking_currency``: the currency costs are
    ranked in, where known (JPY: a ¥ amount is refused as yuan or yen, ``plan.money.yuan_or_yen``)."""
    from gpuwise.plan.money import MoneyError, parse_price
    from gpuwise.units import UnitError

    try:
        return parse_price(text, ranking_currency=ranking_currency)
    except (UnitError, MoneyError) as e:
        raise type(e)(f"{option}: {e}") from None


def currency_option(option: str, text: str) -> str:
    """The ISO code of a currency option (``--currency usd`` -> USD), one gpuwise has an exchange rate for; one
    line naming the option, with the known ones, if not."""
    from gpuwise.plan.money import MoneyError, rates_in
    from gpuwise.units import currency_code

    code = currency_code(text)      # "RMB" is CNY, as in prices
    try:
        rates_in(code)
    except MoneyError as e:
        raise MoneyError(f"{option}: {e}") from None
    return code


# What a refused duration option gives as examples: each with its unit, as every duration option's refusal does
# (recommend refuses a bare --deadline 12: which unit was meant is a guess), never a bare number such as 3600.
DURATION_EXAMPLES = "30m, 12h, 1d12h"


def duration_option(option: str, text: str, *, examples: str = DURATION_EXAMPLES) -> float:
    """Seconds of a duration option (``--restart-time 15m``), > 0 and finite; one line naming the option, with
    ``examples`` (each with a unit), if not."""
    from gpuwise.units import UnitError, parse_duration_s

    try:
        return parse_duration_s(text, examples=examples)
    except UnitError as e:
        raise UnitError(f"{option}: {e}") from None


def text_option(option: str, text: str | None, *, names: str = "value", give: str = "one",
                unset: str | None = "its default") -> str | None:
    """A name, path or list option as given (None: not given). An empty one (or only commas: a list of nothing) is
    refused naming the option, never read as "not given" (``Path('')`` is the current directory):
    ``--gpus '' names no GPU: give names, … (leave --gpus out for every GPU)``. ``unset`` None: a required
    argument (LOG), which cannot be left out."""
    if text is not None and not text.replace(",", "").strip():
        leave = f" (leave {option} out for {unset})" if unset else ""
        raise GpuwiseError(f"{option} {text!r} names no {names}: give {give}{leave}")
    return text


def warn_epochs_unused(samples: int | None, epochs: float) -> None:
    """--epochs counts passes over --samples: given without them it changes nothing, and is said to (as
    ``Workload.inert_settings`` says of a workload option), not dropped in silence. Estimate's and recommend's."""
    if samples is None and epochs != 1.0:
        logging.getLogger("gpuwise.cli").warning("--epochs has no effect without --samples (it counts passes over "
                                                 "them; --steps S sizes a job in optimizer steps)")


@contextlib.contextmanager
def progress(enabled: bool, first: str):
    """A spinner on stderr for long work (tracing), updated through the callable it yields; silent when
    ``enabled`` is False (``--json``) or stderr is not a terminal."""
    if not enabled or not err_console.is_terminal:
        yield None
        return
    with err_console.status(first) as status:
        yield status.update
