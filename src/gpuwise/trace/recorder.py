"""The dispatch mode that watches one step on fake tensors: every aten op and every storage's life.

It sits above FakeTensorMode, so it sees each op before the fake kernel runs it. Memory follows
storages, the unit the CUDA caching allocator hands out: an op output whose storage is new is an
allocation (views and in-place ops reuse their input's storage, so they allocate nothing, as on
CUDA); the storage's death (a weakref callback, fired synchronously by CPython's refcounting, in
the order a CUDA run would free) is the free. The hot path is kept to dict lookups and tuples.
"""

from __future__ import annotations

import math
import operator
import os
import sys
import weakref
from collections import Counter
from types import MappingProxyType

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch.utils._python_dispatch import TorchDispatchMode

from gpuwise.trace.costs import foreach_kernel_count, op_attrs, op_flops
from gpuwise.trace.records import MemoryEvent, OpRecord, TraceError

aten = torch.ops.aten
Tensor = torch.Tensor
_NO_ATTRS = MappingProxyType({})
_DTYPE_NAMES = {d: str(d).removeprefix("torch.") for d in (
    torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2)}
# Ops that launch no kernel on CUDA: they only make a tensor header or an uninitialised block.
_NO_KERNEL = {aten.empty, aten.empty_strided, aten.new_empty, aten.new_empty_strided, aten.empty_like,
              aten.lift_fresh, aten._local_scalar_dense}
_PRIM_DEVICE = torch.ops.prim.device.default
_allocates: dict = {}   # op overload -> may its outputs be new storages (not a view, not in-place)
# Random draws and comparisons on them: `torch.rand([]) < layerdrop` decides whether a layer is
# skipped; on fake data the answer must keep every layer (False), unlike all-ones mask checks (True). A
# draw's `.item()` is the middle of its range (torchvision's `int(torch.empty(1).uniform_(0, n).item())`
# picks an index below n), carried through the arithmetic of _VALUE_OPS.
_RANDOM_PACKETS = {aten.rand, aten.rand_like, aten.uniform, aten.uniform_, aten.randn, aten.randn_like, aten.normal_,
                   aten.randint, aten.randint_like, aten.random_}
_COMPARE_PACKETS = {aten.lt, aten.le, aten.gt, aten.ge}


def _div(a, b, *, rounding_mode=None):
    q = a / b
    return math.floor(q) if rounding_mode == "floor" else math.trunc(q) if rounding_mode == "trunc" else q


# Elementwise arithmetic that carries a draw's value: op packet -> the same on Python numbers
_VALUE_OPS = {
    aten.mul: operator.mul, aten.mul_: operator.mul,
    aten.add: lambda a, b, *, alpha=1: a + alpha * b, aten.add_: lambda a, b, *, alpha=1: a + alpha * b,
    aten.sub: lambda a, b, *, alpha=1: a - alpha * b, aten.sub_: lambda a, b, *, alpha=1: a - alpha * b,
    aten.rsub: lambda a, b, *, alpha=1: b - alpha * a,
    aten.div: _div, aten.div_: _div, aten.floor_divide: lambda a, b: a // b, aten.remainder: operator.mod,
    aten.neg: operator.neg, aten.floor: math.floor, aten.ceil: math.ceil, aten.trunc: math.trunc,
    aten.round: round, aten.abs: abs, aten.pow: operator.pow,
    aten._to_copy: lambda a, **_: a, aten.clone: lambda a, **_: a, aten.copy_: lambda src, *_: src,
}


def _draw_middle(packet, args, kwargs) -> float:
    """The middle of a random draw's range: uniform(a, b) (a + b) / 2, rand 0.5, randn / normal the mean,
    randint(low, high) the middle integer."""
    def arg(i, name, default):
        return kwargs.get(name, args[i] if len(args) > i and not isinstance(args[i], (list, tuple)) else default)

    if packet in (aten.uniform, aten.uniform_):
        return (float(arg(1, "from", 0.0)) + float(arg(2, "to", 1.0))) / 2
    if packet is aten.normal_:
        return float(arg(1, "mean", 0.0))
    if packet in (aten.randn, aten.randn_like):
        return 0.0
    if packet is aten.randint:      # randint(high, size) or randint(low, high, size)
        ints = [a for a in args if isinstance(a, int)]
        low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1])
        return float((low + high - 1) // 2)
    if packet is aten.randint_like:
        ints = [a for a in args[1:] if isinstance(a, int)]
        low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1]) if ints else (0, 2)
        return float((low + high - 1) // 2)
    if packet is aten.random_:
        ints = [a for a in args[1:] if isinstance(a, int)]
        return float((ints[0] + ints[1] - 1) // 2) if len(ints) == 2 else float((ints[0] - 1) // 2) if ints else 0.0
    return 0.5
_SCALAR_PACKETS = {aten._local_scalar_dense, aten.is_nonzero, aten.equal}
_COMPARED = object()     # a comparison on a random draw


def _dtype_name(dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def _tensors(values, acc: list) -> list:
    for v in values:
        if isinstance(v, Tensor):
            acc.append(v)
        elif isinstance(v, (list, tuple)):
            acc.extend(x for x in v if isinstance(x, Tensor))
    return acc


class OpBudgetExceeded(TraceError):
    """More ops were dispatched than the trace's budget allows (``tracer.max_trace_ops``)."""

    def __init__(self, max_ops: int, module: str) -> None:
        super().__init__(f"the trace dispatched more than {max_ops:,} operators (in module '{module or '<top>'}' "
                         "at the limit): far more than any real model's two steps; check the model's sizes, or "
                         "raise the limit with GPUWISE_TRACE_MAX_OPS")
        self.max_ops = max_ops


class ValueReadLimitExceeded(TraceError):
    """One line of the model's code read tensor values more often than the trace allows
    (``tracer.max_value_reads``): a loop on values that fake tensors answer the same way every time."""

    def __init__(self, limit: int, site: str, module: str, env: str) -> None:
        super().__init__(f"the model's code at {site} (module '{module or '<top>'}') read a tensor's value more than "
                         f"{limit:,} times: a loop whose condition reads tensor values (while x.abs().max() > eps) "
                         "never ends on fake tensors, which have no values (every such read is answered True / 1); "
                         f"bound the loop with a largest number of iterations, or raise the limit with {env}")


# Frames between a value read and the code that asked for it: torch's dispatch machinery and the recorder.
_DISPATCH_MODULES = ("torch._dynamo", "torch._compile", "torch.utils._python_dispatch", "torch._ops",
                     "torch._subclasses", "gpuwise.trace.recorder")
# Library code whose value reads are shortcuts taken the same way for every real unpadded batch (transformers'
# "is the mask all ones?"), not the model's own control flow; torch's and gpuwise's own code too.
_LIBRARY_CHECKS = ("transformers.masking_utils", "transformers.modeling_attn_mask_utils", "transformers.modeling_utils",
                   "transformers.utils", "transformers.integrations", "transformers.pytorch_utils")


def _control_flow_site() -> str | None:
    """``file.py:line`` of the model's code that read a tensor's value (an ``if``, a ``while``, a ``break`` on a
    tensor), or None when the reader is torch, gpuwise or a library check of _LIBRARY_CHECKS."""
    frame = sys._getframe(2)
    module = ""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not module.startswith(_DISPATCH_MODULES):
            break
        frame = frame.f_back
    if frame is None or module.partition(".")[0] in ("torch", "gpuwise") or module.startswith(_LIBRARY_CHECKS):
        return None
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class Recorder(TorchDispatchMode):
    """Records ops (while ``recording_ops``) and storage allocations/frees (always)."""

    def __init__(self, training: bool = True, max_ops: int | None = None, max_value_reads: int | None = None,
                 value_reads_env: str = "") -> None:
        super().__init__()
        self.training = training
        self.max_ops = max_ops               # dispatched ops allowed in all (None: no limit)
        self.dispatched_ops = 0
        # reads of tensor values by one line of the model's own code in one module allowed (None: no limit)
        self.max_value_reads = max_value_reads
        self.value_reads_env = value_reads_env   # the variable that raises it, for the error
        # (module, "file.py:line") -> reads of a tensor's value by the model's own control flow (answered True / 1)
        self.control_flow_reads: Counter = Counter()
        self.phase = "other"
        self.category: str | None = None     # forces the category of new allocations (weights, inputs)
        self.recording_ops = False
        self.measured = False                # events of the measured step carry op indices
        self.module_stack: list[str] = []
        self.backward_module = ""
        self.ops: list[OpRecord] = []
        self.events: list[tuple] = []        # (kind, block_id, size_bytes, phase, module, op_index)
        self.block_category: dict[int, str] = {}
        self.host_blocks: set[int] = set()   # CPU-side tensors on a CUDA run (optimizer step counters)
        self.placeholders: Counter = Counter()
        self.attention_calls = 0             # attention calls the trace's SDPA stand-in served
        self.attention_math_calls = 0        # of those, the ones run on SDPA's math path (inputs not all 3-D or all 4-D)
        self.closed = False
        self.failed_module: str | None = None   # where the first failing op ran (hooks unwind the stack)
        self._live: dict[int, tuple[int, weakref.ref]] = {}   # id(storage) -> (block id, weakref)
        # id(storage) of live random draws -> the value `.item()` answers (the middle of the draw's range),
        # or _COMPARED for a comparison on one
        self._random: dict[int, float | object] = {}
        self._next_block = 0

    # --- where we are ---------------------------------------------------------------------------

    @property
    def module(self) -> str:
        if self.phase == "backward" and not self.module_stack:
            return self.backward_module
        return self.module_stack[-1] if self.module_stack else ""

    def _default_category(self) -> str:
        if not self.training:
            return "activations"
        return {"forward": "activations", "backward": "activations", "optimizer": "optimizer"}.get(self.phase, "other")

    # --- storages -------------------------------------------------------------------------------

    def track(self, t: Tensor, category: str | None = None) -> int | None:
        """Registers ``t``'s storage if new; returns its block id (None for empty storages)."""
        st = t.untyped_storage()
        key = id(st)
        entry = self._live.get(key)
        if entry is not None:
            return entry[0]
        size = st.nbytes()
        if size == 0:
            return None
        block = self._next_block
        self._next_block += 1
        self._live[key] = (block, weakref.ref(st, lambda _ref, b=block, k=key: self._on_free(b, k)))
        self.block_category[block] = category or self.category or self._default_category()
        self.events.append(("alloc", block, size, self.phase, self.module, len(self.ops) if self.measured else -1))
        return block

    def block_of(self, t: Tensor) -> int | None:
        entry = self._live.get(id(t.untyped_storage()))
        return entry[0] if entry else None

    def set_category(self, t: Tensor, category: str) -> None:
        block = self.block_of(t)
        if block is not None:
            self.block_category[block] = category

    def _on_free(self, block: int, key: int) -> None:
        if self.closed:
            return
        entry = self._live.get(key)
        if entry is not None and entry[0] == block:
            del self._live[key]
            self._random.pop(key, None)
        size = 0
        self.events.append(("free", block, size, self.phase, self.module, len(self.ops) - 1 if self.measured else -1))

    def live_blocks(self) -> set[int]:
        return {block for block, _ in self._live.values()}

    # --- ops ------------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE:   # tensor.device on a fake tensor: asked thousands of times, no kernel
            return func(*args)
        kwargs = kwargs or {}
        packet = func._overloadpacket
        self.dispatched_ops += 1
        if self.max_ops is not None and self.dispatched_ops > self.max_ops:
            raise OpBudgetExceeded(self.max_ops, self.module)
        try:
            out = func(*args, **kwargs)
        except DataDependentOutputException:
            out = self._placeholder(packet, args)
        except DynamicOutputShapeException:
            out = self._upper_bound(func, packet, args)
        except (UnsupportedOperatorException, NotImplementedError) as exc:
            raise TraceError(f"cannot trace operator {func} in module '{self.module or '<top>'}': "
                             f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}") from None
        except Exception:
            if self.failed_module is None:
                self.failed_module = self.module
            raise
        allocates = _allocates.get(func)
        if allocates is None:
            allocates = _allocates[func] = not (func.is_view or func._schema.is_mutable and packet.__name__.endswith("_"))
        if isinstance(out, Tensor):
            outs = (out,)
        elif isinstance(out, (tuple, list)):
            outs = _tensors(out, [])
        else:
            outs = ()
        if allocates:
            for t in outs:
                self.track(t)
        if packet in _RANDOM_PACKETS:       # in place too: torch.empty(1).uniform_(0, n)
            self._note_draw(packet, args, kwargs, outs)
        elif self._random and (packet in _COMPARE_PACKETS or packet in _VALUE_OPS):
            self._note_random(packet, args, kwargs, outs)
        if self.recording_ops:
            self._record(func, packet, args, kwargs, out, outs)
        return out

    def _record(self, func, packet, args, kwargs, out, outs) -> None:
        inputs = _tensors(args, [])
        if kwargs:
            _tensors(kwargs.values(), inputs)
        no_kernel = func.is_view or packet in _NO_KERNEL
        if no_kernel:
            kernels, read, written = 0, 0, 0
        else:
            read = sum(_stored_bytes(t) for t in inputs)
            written = sum(_stored_bytes(t) for t in outs)
            kernels = 1
            if packet.__name__.startswith("_foreach_"):
                lists = [a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor)]
                kernels = foreach_kernel_count(lists)
            if func._schema.is_mutable and not outs:
                written = _mutated_bytes(func, args, kwargs)
            if self.host_blocks and self.phase == "optimizer" and inputs and all(
                    self.block_of(t) in self.host_blocks for t in inputs):
                kernels = 0
        attrs = op_attrs(packet, args, kwargs)
        self.ops.append(OpRecord(
            index=len(self.ops),
            op=str(func),
            phase=self.phase,
            module=self.module,
            input_shapes=tuple(tuple(t.shape) for t in inputs),
            input_dtypes=tuple(_dtype_name(t.dtype) for t in inputs),
            output_shapes=tuple(tuple(t.shape) for t in outs),
            output_dtypes=tuple(_dtype_name(t.dtype) for t in outs),
            flops=op_flops(packet, args, kwargs, out) if not no_kernel else 0,
            bytes_read=read,
            bytes_written=written,
            attrs=attrs or _NO_ATTRS,
            kernel_count=kernels,
        ))

    # --- data-dependent ops ---------------------------------------------------------------------

    def _note_draw(self, packet, args, kwargs, outs) -> None:
        """A random draw: every element of it answers the middle of its range (in-place draws return self)."""
        target = outs[0] if len(outs) == 1 else (args[0] if args and isinstance(args[0], Tensor) else None)
        if target is not None:
            self._random[id(target.untyped_storage())] = _draw_middle(packet, args, kwargs)

    def _note_random(self, packet, args, kwargs, outs) -> None:
        """A comparison on a random scalar (answered False), or arithmetic on draws and numbers (its value)."""
        values = []
        for a in (args[1:2] if packet is aten.copy_ else args):     # copy_(dst, src): src's value
            if isinstance(a, Tensor):
                v = self._random.get(id(a.untyped_storage()))
                if v is None:
                    if packet in _VALUE_OPS:
                        return          # a tensor of unknown value: the result is unknown too
                    continue
                values.append(v)
            elif isinstance(a, (int, float, bool)):
                values.append(a)
        target = outs[0] if len(outs) == 1 else (args[0] if packet.__name__.endswith("_") else None)
        if target is None or not values:
            return
        key = id(target.untyped_storage())
        if packet in _COMPARE_PACKETS:
            if target.numel() == 1 and any(v is not _COMPARED for v in values):
                self._random[key] = _COMPARED
            return
        if any(v is _COMPARED for v in values):
            return
        try:
            self._random[key] = float(_VALUE_OPS[packet](*values, **{k: v for k, v in kwargs.items()
                                                                     if k in ("alpha", "rounding_mode")}))
        except (TypeError, ValueError, ArithmeticError):
            self._random.pop(key, None)

    def _placeholder(self, packet, args):
        """What ``.item()`` and friends return on fake data: the answer for real, unpadded, finite data
        (all-ones attention masks are all ones, no inf was found), and for a random draw the middle of its
        range; counted in the trace's notes."""
        if packet not in _SCALAR_PACKETS:
            raise TraceError(f"cannot trace data-dependent operator {packet.__name__} in module "
                             f"'{self.module or '<top>'}'")
        random = self._random.get(id(args[0].untyped_storage())) if isinstance(args[0], Tensor) else None
        if random is not None:
            self.placeholders[f"{packet.__name__} of a random draw: answered at the middle of its range "
                              "(False for a comparison on one: no layer dropped)"] += 1
            if random is _COMPARED or args[0].dtype == torch.bool or packet is aten.equal:
                return False
            if packet is aten.is_nonzero:
                return bool(random)
            return random if args[0].dtype.is_floating_point else int(random)
        site = _control_flow_site()
        if site is None:
            self.placeholders[packet.__name__] += 1
        else:
            key = (self.module, site)
            self.control_flow_reads[key] += 1
            if self.max_value_reads is not None and self.control_flow_reads[key] > self.max_value_reads:
                raise ValueReadLimitExceeded(self.max_value_reads, site, self.module, self.value_reads_env)
        if packet is not aten._local_scalar_dense:
            return True
        dtype = args[0].dtype
        if dtype == torch.bool:
            return True
        return 1.0 if dtype.is_floating_point else 1

    def _upper_bound(self, func, packet, args):
        """Ops whose output size depends on values: assume every element selected (worst case)."""
        x = args[0]
        self.placeholders[f"{packet.__name__} (upper bound)"] += 1
        if packet is aten.nonzero:
            return torch.empty((x.numel(), x.dim()), dtype=torch.long, device=x.device)
        if packet is aten.masked_select:
            return torch.empty((x.numel(),), dtype=x.dtype, device=x.device)
        if packet is aten.index and len(args) > 1:
            masks = [i for i in args[1] if i is not None]
            if len(masks) == 1 and masks[0].dtype == torch.bool:
                mask = masks[0]
                return torch.empty((mask.numel(), *x.shape[mask.dim():]), dtype=x.dtype, device=x.device)
        raise TraceError(f"cannot trace operator {func} in module '{self.module or '<top>'}': "
                         "its output size depends on tensor values, which tracing on fake tensors does not have "
                         "(no upper bound is known for it)")

    # --- results --------------------------------------------------------------------------------

    def memory_events(self) -> tuple[MemoryEvent, ...]:
        """Events in order, without host-side blocks, with each block's final category."""
        sizes: dict[int, int] = {}
        result = []
        category = self.block_category
        for kind, block, size, phase, module, op_index in self.events:
            if block in self.host_blocks:
                continue
            if kind == "alloc":
                sizes[block] = size
            else:
                size = sizes.get(block, 0)
            result.append(MemoryEvent(seq=len(result), kind=kind, block_id=block, size_bytes=size,
                                      category=category[block], phase=phase, module=module, op_index=op_index))
        return tuple(result)


def _mutated_bytes(func, args, kwargs) -> int:
    """Bytes an in-place op that returns nothing writes: every argument its schema marks written (``Tensor(a!)``,
    lists included). The fused optimizers (``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``) mark their
    gradients written but store them only when a ``grad_scale`` is passed (fused_adam_utils.cuh: the unscaled
    gradient is written back); without one they only read them."""
    schema = func._schema
    bound = {a.name: (args[i] if i < len(args) else kwargs.get(a.name)) for i, a in enumerate(schema.arguments)}
    skip_grads = schema.name.startswith("aten::_fused_") and bound.get("grad_scale") is None
    total = 0
    for a in schema.arguments:
        if a.alias_info is None or not a.alias_info.is_write or (skip_grads and a.name == "grads"):
            continue
        total += sum(_stored_bytes(t) for t in _tensors([bound.get(a.name)], []))
    return total


def _stored_bytes(t: Tensor) -> int:
    """Bytes the op touches for ``t``: its elements, but never more than its storage (broadcasts)."""
    n = t.numel() * t.element_size()
    if n and not t.is_contiguous():
        return min(n, t.untyped_storage().nbytes())
    return n
