"""Turning a model built on ``meta`` into one on fake CPU tensors, and watching its modules.

Building on ``meta`` skips parameter initialisation entirely (init that samples or inspects values
fails on fake tensors); each parameter and buffer is then swapped for a fake tensor with the same
shape, dtype and ``requires_grad``, keeping tied parameters tied.
"""

from __future__ import annotations

import sys
from functools import partial

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from gpuwise.trace.recorder import Recorder

_CPU = torch.device("cpu")


def to_fake(t: torch.Tensor, fake_mode: FakeTensorMode) -> torch.Tensor:
    if isinstance(t, FakeTensor):
        return t
    if t.is_meta:
        return fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, t, _CPU)
    return fake_mode.from_tensor(t)


def fake_module(module: nn.Module, fake_mode: FakeTensorMode) -> None:
    """Replaces every parameter and buffer (meta or real) by a fake CPU tensor, in place."""
    done: dict[int, torch.Tensor] = {}
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is None:
                continue
            if id(p) not in done:
                fake = to_fake(p.detach(), fake_mode)
                done[id(p)] = nn.Parameter(fake, requires_grad=p.requires_grad)
            sub._parameters[name] = done[id(p)]
        for name, b in list(sub._buffers.items()):
            if b is None:
                continue
            if id(b) not in done:
                done[id(b)] = to_fake(b, fake_mode)
            sub._buffers[name] = done[id(b)]
        # Plain tensor attributes (e.g. precomputed tables) would mix meta and fake tensors.
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and value.is_meta:
                if id(value) not in done:
                    done[id(value)] = to_fake(value, fake_mode)
                object.__setattr__(sub, name, done[id(value)])


def register_state(module: nn.Module, recorder: Recorder) -> tuple[int, int]:
    """Adds every parameter/buffer storage to the recorder as weights; returns (params, trainable)."""
    params = trainable = 0
    for p in module.parameters():
        recorder.track(p, "weights")
        params += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    for b in module.buffers():
        recorder.track(b, "weights")
    return params, trainable


# --- module paths -------------------------------------------------------------------------------

def _tensors_in(value, limit: int = 8) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [v for v in value[:limit] if isinstance(v, torch.Tensor)]
    return []


def watch_modules(module: nn.Module, recorder: Recorder) -> list:
    """Hooks that keep ``recorder.module_stack`` (forward) and ``recorder.backward_module`` current.

    In backward, a module is entered when the gradient of its output arrives: a tensor hook on the
    output names it. That attributes backward ops to the innermost module most recently entered.
    """
    def pre(name, mod, args):
        recorder.module_stack.append(name)

    def enter_backward(name, grad):
        recorder.backward_module = name

    def post(name, mod, args, output):
        if sys.exc_info()[0] is not None and recorder.failed_module is None:
            recorder.failed_module = name   # always_call hooks run while the exception unwinds
        if recorder.module_stack:
            recorder.module_stack.pop()
        if recorder.training and torch.is_grad_enabled():
            for t in _tensors_in(output):
                # An inner module's output passed up unchanged keeps the inner (more precise) name.
                if t.requires_grad and not getattr(t, "_gpuwise_module", None):
                    t._gpuwise_module = name
                    t.register_hook(partial(enter_backward, name))

    handles = []
    for name, sub in module.named_modules():
        handles.append(sub.register_forward_pre_hook(partial(pre, name)))
        handles.append(sub.register_forward_hook(partial(post, name), always_call=True))
    return handles


# --- gradient checkpointing for non-transformers models ------------------------------------------

def _block_list(container: nn.Module) -> bool:
    """A Sequential/ModuleList whose most common child type repeats and has children of its own, or a
    ModuleList of repeated layers with parameters (``for layer in self.layers: x = f(layer(x))``: a
    ModuleList is never called, its elements are the blocks)."""
    if not isinstance(container, (nn.Sequential, nn.ModuleList)):
        return False
    kinds: dict[type, int] = {}
    for child in container.children():
        kinds[type(child)] = kinds.get(type(child), 0) + 1
    if not kinds:
        return False
    kind, count = max(kinds.items(), key=lambda kv: kv[1])
    sample = next(c for c in container.children() if type(c) is kind)
    if isinstance(container, nn.ModuleList) and any(True for _ in sample.parameters()):
        return count >= 2
    return count >= 2 and any(True for _ in sample.children())


class CheckpointedBlocks:
    """The blocks ``checkpoint_blocks`` wrapped, and those that ran under ``torch.utils.checkpoint`` since (a
    wrapped module the model never calls checkpoints nothing: the note counts the blocks that ran)."""

    def __init__(self) -> None:
        self.wrapped = 0
        self.ran: set[int] = set()

    def note(self) -> str:
        if self.ran:
            return f"gradient checkpointing: torch.utils.checkpoint around {len(self.ran)} blocks"
        return ("gradient checkpointing: nothing checkpointed (no repeated block or layer of this model ran "
                "through a wrapped forward); checkpoint it in the model's own code to trace it")


def checkpoint_blocks(module: nn.Module) -> CheckpointedBlocks:
    """Wraps each block of the outermost repeated-block lists in ``torch.utils.checkpoint``
    (use_reentrant=False), as one would by hand (where a block is itself a ModuleList, as a UNet's
    ``for resblock, attn, down in self.downs``, the elements holding parameters); without such lists, the
    top-level children that hold parameters (the elements of a ModuleList or ModuleDict, which is never
    called itself)."""
    from torch.utils.checkpoint import checkpoint

    blocks = CheckpointedBlocks()

    def wrap(block: nn.Module) -> None:
        inner = block.forward

        def forward(*args, **kwargs):
            blocks.ran.add(id(block))
            return checkpoint(inner, *args, use_reentrant=False, **kwargs)
        block.forward = forward
        blocks.wrapped += 1

    def visit(m: nn.Module) -> None:
        for child in m.children():
            if _block_list(child):
                for block in child.children():
                    if isinstance(block, (nn.ModuleList, nn.ModuleDict)):
                        wrap_top(block)   # a list of lists (a UNet's levels): the inner lists are never called
                    else:
                        wrap(block)
            else:
                visit(child)

    def wrap_top(m: nn.Module) -> None:
        for child in m.children():
            if isinstance(child, (nn.ModuleList, nn.ModuleDict)):
                wrap_top(child)
            elif any(True for _ in child.parameters()):
                wrap(child)

    visit(module)
    if not blocks.wrapped:   # no repeated blocks: checkpoint the top-level children that hold parameters
        wrap_top(module)
    return blocks
