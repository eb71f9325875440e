"""trace_workload: two real steps of the real model on fake CPU tensors, recorded.

A training step is: make the batch, forward (under autocast for AMP), loss, drop the outputs (as
the transformers Trainer does: only the loss survives the forward), backward (through GradScaler
for amp-fp16), optimizer step (``Workload.optimizer_impl``: foreach, fused or for-loop),
``zero_grad(set_to_none=not Workload.keep_grads)``, drop the batch. Attention runs as
``Workload.attention`` says (trace/attention.py). The first step
creates the optimizer state; the second is the measured one (``Trace.ops``).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import time
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gpuwise.trace import fake
from gpuwise.trace.collector import older_objects_frozen
from gpuwise.trace.attention import cuda_attention
from gpuwise.trace.rnn import cuda_rnns
from gpuwise.trace.autocast import autocast_dtype, cuda_autocast_lists, pure_dtype
from gpuwise.trace.optimizers import build_optimizer, host_step_tensors, state_tensors
from gpuwise.trace.peft import apply_finetune
from gpuwise.trace.prefill import prefill_kwargs
from gpuwise.trace.recorder import Recorder
from gpuwise.trace.records import ModelCodeError, Trace, TraceError
from gpuwise.workload import Workload, WorkloadError, spec_builders
from gpuwise.workload.deadline import deadline, timeout_from_env
from gpuwise.workload.specs import resolve_model_spec

STEPS = 2
# Limits that stop a trace that would not end (docs/trace.md, "Sizes and the operator budget"). A config past every
# real size is refused before tracing (workload/config_checks.py); these catch the rest:
# - a loop on tensor values (``while h.abs().max() > eps``), which fake tensors answer the same way every time: one
#   line of the model's code, in one module, may read tensor values this many times in the two steps, plus
#   ``VALUE_READS_PER_SAMPLE`` per sample of a step (a mixture of experts reads one per expert and layer, a loop
#   over a batch one per sample, twice over the two steps); the runaway loop stops in seconds;
# - operators: the two steps of the largest real traces dispatch a few hundred thousand (a mixture of experts with
#   every token sent to every expert); a factory that stacks layers from a huge number stops here;
# - wall time, after the factory's own limit (workload/deadline.py): a forward that loops without reading values.
DEFAULT_MAX_TRACE_OPS = 4_000_000
MAX_TRACE_OPS_ENV = "GPUWISE_TRACE_MAX_OPS"
DEFAULT_MAX_VALUE_READS = 5_000
VALUE_READS_PER_SAMPLE = 4     # a per-sample loop reads once a sample in each of the two steps: room for two such
MAX_VALUE_READS_ENV = "GPUWISE_TRACE_MAX_VALUE_READS"
DEFAULT_TRACE_TIMEOUT_S = 600.0
TRACE_TIMEOUT_ENV = "GPUWISE_TRACE_TIMEOUT_S"


def max_trace_ops() -> int:
    """The operator budget: ``GPUWISE_TRACE_MAX_OPS`` when set (a whole number >= 1), else the default."""
    return _count_from_env(MAX_TRACE_OPS_ENV, DEFAULT_MAX_TRACE_OPS, "operators")


def max_value_reads(samples_per_step: int = 0) -> int:
    """Reads of tensor values one line of the model's code may make in one module over the two steps:
    ``GPUWISE_TRACE_MAX_VALUE_READS`` when set (a whole number >= 1), else the default, plus
    ``VALUE_READS_PER_SAMPLE`` per sample of a step (a loop over the batch is bounded by it, however large)."""
    return (_count_from_env(MAX_VALUE_READS_ENV, DEFAULT_MAX_VALUE_READS, "reads")
            + VALUE_READS_PER_SAMPLE * max(0, samples_per_step))


def trace_timeout_s() -> float:
    """The wall time the traced steps may take (after the factory's): ``GPUWISE_TRACE_TIMEOUT_S`` when set."""
    return timeout_from_env(TRACE_TIMEOUT_ENV, DEFAULT_TRACE_TIMEOUT_S)


def _count_from_env(env: str, default: int, what: str) -> int:
    raw = os.environ.get(env)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise WorkloadError(f"{env} is {raw!r}, not a whole number of {what} >= 1")
    return value


def trace_workload(workload: Workload) -> Trace:
    """Traces ``workload`` (raises WorkloadError for a bad spec, TraceError for what cannot be traced).

    ``Trace.ops`` holds the last step's aten ops; ``Trace.events`` every step's storage allocations
    and frees, after the weights' allocation, in program order.
    """
    start_s = time.perf_counter()
    with older_objects_frozen():   # the collector's full passes skip torch's objects (trace/collector.py)
        return _trace(workload, start_s)


def _trace(workload: Workload, start_s: float) -> Trace:
    spec = resolve_model_spec(workload.model)
    with _quiet():
        built = spec.build(workload)
        logging.getLogger("transformers").setLevel(logging.ERROR)   # its first import resets it
        module = built.module
        notes = list(built.notes)
        recorder = Recorder(training=workload.is_training, max_ops=max_trace_ops(), max_value_reads=max_value_reads(workload.batch_size),
                            value_reads_env=MAX_VALUE_READS_ENV)
        try:
            with deadline(f"tracing {spec.name}", trace_timeout_s(), TRACE_TIMEOUT_ENV):
                module, prepared, checkpointed = _prepare(module, workload, built.is_hf)
                notes += prepared
                counts, frames = _run(module, built, workload, recorder)
        except (TraceError, WorkloadError):
            raise
        except Exception as exc:   # the model's own code failed on fake tensors, or gpuwise's
            where = recorder.failed_module or recorder.module or "<top>"
            caller = (__name__, _step.__name__) if recorder.phase == "forward" else None   # _step calls the model
            if (limit := _fake_tensor_limit(exc)) is not None:
                raise TraceError(f"{spec.name}: in module '{where}' during {recorder.phase}, {limit}") from exc
            guessed = (built.guessed_inputs.failure_hint()    # the forward ran on an input gpuwise made up
                       if built.guessed_inputs is not None and recorder.phase == "forward" else "")
            if isinstance(exc, spec_builders.MODEL_ERRORS) and spec_builders.raised_by_model(exc, caller):
                suffix = (f" (in module '{where}' during {recorder.phase}, batch size {workload.batch_size})"
                          + _answered_before(recorder))
                raise ModelCodeError(spec_builders.model_failure(spec, workload, exc, suffix,
                                                                 built.resized_inputs) + guessed) from exc
            raise TraceError(f"tracing {spec.name} failed in module '{where}' during {recorder.phase}: "
                             f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:240]}{guessed}") from exc
        finally:
            recorder.closed = True
    if built.loss_note:
        notes.append(built.loss_note)
    if checkpointed is not None:
        notes.append(checkpointed.note())
    for name, n in sorted(recorder.placeholders.items()):
        if "pack_padded_sequence" in name:
            notes.append(f"{n} x {name}: every sequence taken at its padded length (the lengths are data): memory "
                         "and time are upper bounds for this model")
        elif "upper bound" in name:
            notes.append(f"{n} x {name}: every element assumed selected (a routed mixture of experts runs every "
                         "expert on every token): memory and time are upper bounds for this model")
        elif "random" in name:
            notes.append(f"{n} x {name}")
        else:
            notes.append(f"{n} x {name} on fake data: answered True / 1 (all-ones masks, no overflow)")
    reads = recorder.control_flow_reads
    if reads:
        sites = list(dict.fromkeys(site for _, site in reads))
        notes.append(f"data-dependent control flow: the model's own code read a tensor's value {sum(reads.values())} "
                     f"time(s) to decide what to run ({', '.join(sites[:3])}{', ...' if len(sites) > 3 else ''}); "
                     "fake tensors have no values, so each read was answered True / 1 and the step traced is the one "
                     "those answers take: for a model whose work depends on its data (an early exit, a loop until "
                     "convergence) memory and time may be far off, lower or higher than a real step's")
    rnns = sum(isinstance(m, torch.nn.RNNBase) for m in module.modules())
    if rnns:
        notes.append(f"{rnns} x nn.LSTM/GRU/RNN traced as cuDNN's fused RNN, one call per module: its reserve space "
                     "kept for backward, and its time as the GEMMs and per-step kernels it runs (an input GEMM "
                     "per layer, then the steps one after another), a structure no measured run checks")
    if workload.attention == "eager" and (recorder.attention_calls or built.is_hf):
        notes.append("attention: eager (" + ("the model's own eager code: " if built.is_hf else "")
                     + "the softmax, the dropout mask and the probabilities, batch x heads x seq² each, "
                     "kept for backward)")
    elif recorder.attention_calls or any(op.attrs.get("attention") for op in recorder.ops):
        fused_ops = any(op.attrs.get("attention") for op in recorder.ops)
        if fused_ops or recorder.attention_calls > recorder.attention_math_calls:
            notes.append(f"attention traced as CUDA's fused kernels ({workload.attention}: flash for fp16/bf16, "
                         "else memory-efficient)")
        if recorder.attention_math_calls:
            notes.append("attention: SDPA calls whose inputs are not all 4-D (or all 3-D, which SDPA unsqueezes) ran "
                         "its math path, as on CUDA (the fused kernels take (batch, heads, seq, dim)): their float32 "
                         "seq² scores are kept for backward")
    return Trace(
        workload=workload,
        ops=tuple(recorder.ops),
        events=recorder.memory_events(),
        param_count=counts[0],
        trainable_param_count=counts[1],
        samples_per_step=workload.batch_size,
        upper_bound_ops=sum(n for name, n in recorder.placeholders.items() if "upper bound" in name),
        rnn_modules=rnns,
        control_flow_reads=sum(reads.values()),
        trace_time_s=time.perf_counter() - start_s,
        notes=tuple(notes),
        input_sizes=built.input_sizes,
        frames_per_sample=frames,
    )


# What torch says where code needs a tensor's real memory (NumPy, a data pointer), which a fake tensor has not
_FAKE_TENSOR_LIMITS = ("not supported for tensor subclasses", "Cannot access data pointer")


def _fake_tensor_limit(exc: BaseException) -> str | None:
    """Why the model's code cannot run on fake tensors, where it needs a tensor's values in host memory
    (``.numpy()``, a data pointer): a limit of tracing, not a fault of the model (None: not such an error)."""
    message = (str(exc).strip().splitlines() or [""])[0]
    if not any(m in message for m in _FAKE_TENSOR_LIMITS):
        return None
    return (f"the model's code needs a tensor's values in host memory ({type(exc).__name__}: {message[:120]}): "
            "gpuwise traces on fake tensors, which have shapes but no values, so this is a limit of tracing, not "
            "a fault of the model; keep .numpy() and data pointers out of forward (read sizes from .shape, "
            "numbers with .item())")


def _answered_before(recorder: Recorder) -> str:
    """Where the model refused after reading tensor values, which fake tensors do not have: what the trace
    answered for them (docs/trace.md), so that the refusal is not taken for a fault of the inputs."""
    answered = (sum(n for name, n in recorder.placeholders.items() if "upper bound" not in name)
                + sum(recorder.control_flow_reads.values()))
    if not answered:
        return ""
    return (f"; it read {answered} tensor value(s) (.item(), bool(), .any()) that tracing on fake tensors cannot "
            "know (answered as docs/trace.md says: as for all-ones data, a random draw at its middle): a model "
            "whose step depends on its inputs' values cannot be traced")


@contextlib.contextmanager
def _quiet():
    """transformers and torch warn about things that do not matter on fake data; torch's fake tensors
    also log, as an error with a traceback, every meta kernel that refuses its inputs: the model's
    error reaches the user once, as one line (trace_workload)."""
    quiet = {"transformers": logging.ERROR, "torch._subclasses.fake_tensor": logging.CRITICAL}
    loggers = [logging.getLogger(n) for n in quiet]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(quiet[lg.name])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _prepare(module: torch.nn.Module, workload: Workload,
             is_hf: bool) -> tuple[torch.nn.Module, list[str], fake.CheckpointedBlocks | None]:
    """Fine-tuning method, precision, layout and checkpointing, applied on meta (cheap). The blocks gpuwise
    wrapped in torch.utils.checkpoint, if any, say what ran checkpointed once the steps have run."""
    notes: list[str] = []
    checkpointed = None
    if workload.finetune != "full" or workload.quant != "none":
        with torch.device("meta"):
            module = apply_finetune(module, workload) or module
    if pure_dtype(workload.precision_value) is not None:
        module.to(pure_dtype(workload.precision_value))
    if workload.channels_last:
        module.to(memory_format=torch.channels_last)
    if workload.is_training:
        _refuse_training_without_trainable_parameters(module, workload)
        _refuse_sparse_gradients(module)
    if workload.grad_checkpointing and workload.is_training:
        if is_hf and getattr(module, "supports_gradient_checkpointing", False):
            module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            notes.append("gradient checkpointing: transformers' own (use_reentrant=False)")
        else:
            checkpointed = fake.checkpoint_blocks(module)
    module.train(workload.is_training)
    if workload.optimizer.startswith("paged-") and workload.is_training:
        notes.append(f"{workload.optimizer}: bitsandbytes keeps the state in CUDA unified memory, counted here on "
                     "the GPU (where it stays while it fits); when the GPU runs out it pages to CPU RAM")
    if workload.grad_accum_steps > 1 and workload.is_training:
        notes.append("gradient accumulation: the measured micro-step starts with the previous one's gradients")
    return module, notes, checkpointed


def _refuse_training_without_trainable_parameters(module: torch.nn.Module, workload: Workload) -> None:
    """A training step of a model none of whose parameters requires grad (a parameter-free module, a backbone the
    factory froze whole) has no backward: PyTorch's ``loss.backward()`` refuses it, and so does gpuwise, in one
    line that says why, not as a failure of tracing."""
    if any(p.requires_grad for p in module.parameters()):
        return
    count = sum(1 for _ in module.parameters())
    held = f"all {count} of its parameters are frozen" if count else "it has no parameters"
    raise WorkloadError(f"{workload.model or type(module).__name__} has nothing to train ({held}: no parameter "
                        "requires grad, so a training step has no backward): --mode infer estimates its forward, "
                        "or leave the layers to train with requires_grad=True")


def _refuse_sparse_gradients(module: torch.nn.Module) -> None:
    """An embedding with ``sparse=True`` gets a sparse gradient (the rows the batch touches), which fake
    tensors cannot hold and the memory rules do not describe: refused in one line, not a crash in backward."""
    for name, sub in module.named_modules():
        if (isinstance(sub, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and sub.sparse
                and sub.weight.requires_grad):
            raise TraceError(f"{type(sub).__name__} '{name or '<top>'}' has sparse=True: sparse gradients are not "
                             "supported by gpuwise's trace (sparse=False traces a dense gradient of the whole "
                             "table, an upper bound; --mode infer has no gradient)")


def _run(module, built, workload: Workload, recorder: Recorder) -> tuple[tuple[int, int], int]:
    """The traced steps: ((parameters, trainable parameters), the frames per sample of the measured step's batch)."""
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    amp_dtype = autocast_dtype(workload.precision_value)
    pure = pure_dtype(workload.precision_value)
    training = workload.is_training
    fake.fake_module(module, fake_mode)   # outside the modes: the converter must see meta tensors
    with contextlib.ExitStack() as stack:
        if amp_dtype is not None:
            stack.enter_context(cuda_autocast_lists(amp_dtype))
        stack.enter_context(fake_mode)
        stack.enter_context(recorder)
        attention = stack.enter_context(cuda_attention(recorder, workload.attention))
        stack.enter_context(cuda_rnns(recorder))
        counts = fake.register_state(module, recorder)
        prefill = prefill_kwargs(module, workload, built.is_hf)     # generating: HF generate's prompts' forward
        handles = fake.watch_modules(module, recorder)
        trainable = [p for p in module.parameters() if p.requires_grad]
        optimizer = build_optimizer(workload.optimizer, trainable, workload.optimizer_impl) if training else None
        scaler = None
        if training and workload.precision_value.needs_grad_scaler:
            scaler = torch.amp.GradScaler("cpu")
        try:
            for step in range(STEPS):
                measured = step == STEPS - 1
                # With gradient accumulation the last micro-step of a cycle, the one that steps the
                # optimizer, runs forward and backward while the gradients of the previous exist;
                # with --keep-grads (zero_grad(set_to_none=False)) they are zeroed in place and kept.
                if not measured and workload.grad_accum_steps > 1:
                    grads_after = "keep"
                else:
                    grads_after = "zero" if workload.keep_grads else "none"
                frames = _step(module, built, recorder, optimizer, scaler, training, amp_dtype, pure,
                               workload.channels_last, measured, grads_after, prefill)
                if optimizer is not None and step == 0:
                    for t in host_step_tensors(optimizer):
                        block = recorder.block_of(t)
                        if block is not None:
                            recorder.host_blocks.add(block)
        finally:
            recorder.closed = True   # what dies after the steps (weights, optimizer state) stays allocated
            recorder.attention_calls = attention.calls
            recorder.attention_math_calls = getattr(attention, "math_calls", 0)
            for h in handles:
                h.remove()
    return counts, frames


def _step(module, built, recorder: Recorder, optimizer, scaler, training: bool, amp_dtype, pure_dtype,
          channels_last: bool, measured: bool, grads_after: str = "none", prefill: dict | None = None) -> int:
    """One step; ``grads_after``: "none" (zero_grad(set_to_none=True), torch's default), "zero"
    (set_to_none=False: zeroed in place, still allocated) or "keep" (accumulating); ``prefill``: the keyword
    arguments HF generate adds to the forward of a generating job (``trace.prefill.prefill_kwargs``). Returns the
    frames per sample of the step's batch (``frames_per_sample``)."""
    recorder.measured = measured
    recorder.category = "inputs"
    recorder.phase = "other"
    args, kwargs = built.make_batch(training)
    frames = frames_per_sample(args, kwargs)
    args = tuple(_input(a, pure_dtype, channels_last) for a in args)
    kwargs = {k: _input(v, pure_dtype, channels_last) for k, v in kwargs.items()}
    recorder.category = None
    recorder.recording_ops = measured
    recorder.phase = "forward"
    # no_grad rather than inference_mode: under inference_mode composite ops (conv2d, linear) reach
    # the recorder undecomposed; the kernels and memory are the same.
    grad_mode = torch.enable_grad() if training else torch.no_grad()
    autocast = torch.autocast("cpu", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    model_kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_")} | (prefill or {})
    _refuse_inputs_forward_cannot_take(module, args, model_kwargs, built.guessed_inputs)
    with grad_mode:
        with autocast:
            outputs = module(*args, **model_kwargs)
            loss = _loss(outputs, built, (args, kwargs)) if training else None
        del outputs
        if training:
            recorder.phase = "backward"
            recorder.backward_module = ""
            (scaler.scale(loss) if scaler is not None else loss).backward()
            del loss
            for p in module.parameters():
                if p.grad is not None:
                    recorder.set_category(p.grad, "gradients")
            recorder.phase = "optimizer"
            if optimizer is not None:
                if scaler is not None:
                    # GradScaler.step() would read found_inf with .item(); on fake data nothing overflows.
                    scaler.unscale_(optimizer)
                    optimizer.step()
                    scaler.update()
                else:
                    optimizer.step()
                for t in state_tensors(optimizer):
                    recorder.set_category(t, "optimizer")
                if scaler is not None:   # the loss scale and its growth counter persist across steps
                    for t in (scaler._scale, scaler._growth_tracker):
                        if isinstance(t, torch.Tensor):
                            recorder.set_category(t, "other")
            if grads_after != "keep":
                module.zero_grad(set_to_none=grads_after == "none")
    recorder.phase = "other"
    del args, kwargs, model_kwargs
    recorder.recording_ops = False
    return frames


RGB_CHANNELS = 3     # a clip's frames decode as JPEGs: colour images


def frames_per_sample(args: tuple, kwargs: dict) -> int:
    """The frames one sample of a batch holds: T of its first 5-D floating input of RGB clips, a video model's
    (N, 3, T, H, W) as nn.Conv3d takes them (a factory's own example inputs, or the clip gpuwise guessed); 1 for a
    batch of images, tokens or features, and for other 5-D inputs: a volume (N, 1, D, H, W: CT, MRI) is no D JPEGs,
    and (N, T, C, H, W) clips are not told apart from volumes."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() == 5:
            return int(value.shape[2]) if value.shape[1] == RGB_CHANNELS else 1
    return 1


def _refuse_inputs_forward_cannot_take(module: torch.nn.Module, args: tuple, kwargs: dict,
                                      guessed: spec_builders.GuessedInputs | None = None) -> None:
    """A forward whose parameters cannot take ``args`` and ``kwargs`` (an input too few, a keyword it has no
    parameter for: a factory's example inputs, or the one gpuwise ``guessed`` from the first layer) is the user's
    to fix: a WorkloadError naming forward's parameters, not a failure of tracing."""
    if type(module).__call__ is not torch.nn.Module.__call__:
        return   # a module with its own __call__ need not take what forward takes
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):   # no signature to read (a builtin)
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        given = f"{len(args)} positional" + (f" and keyword(s) {', '.join(kwargs)}" if kwargs else "")
        remedy = (guessed.failure_hint() if guessed is not None else "; return (module, example_inputs) from a "
                  "factory: a tuple of forward's positional inputs or a dict of its keyword inputs")
        raise WorkloadError(f"{type(module).__name__}.forward{signature} cannot take the inputs it was given "
                            f"({given}): {exc}{remedy}") from None


def _input(value, pure_dtype, channels_last: bool):
    if not isinstance(value, torch.Tensor):
        return value
    if pure_dtype is not None and value.is_floating_point():
        value = value.to(pure_dtype)
    if channels_last and value.dim() == 4:
        value = value.contiguous(memory_format=torch.channels_last)
    return value


def _loss(outputs, built, batch) -> torch.Tensor:
    if built.loss_fn is not None:
        return built.loss_fn(outputs, batch)
    loss = getattr(outputs, "loss", None)
    if loss is None and isinstance(outputs, dict):
        loss = outputs.get("loss")
    if loss is None:
        raise TraceError("the model returned no loss; pass labels or give the factory a loss_fn")
    return loss
