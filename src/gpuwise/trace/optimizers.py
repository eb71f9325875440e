"""The optimizer a workload names, as CUDA would run it: torch's own, in the implementation the
workload names (foreach by default, fused or for-loop); small stand-ins with the same state and
memory traffic where torch has none (Lion, bitsandbytes' 8-bit and paged AdamW).

bitsandbytes' paged optimizers (``paged-adamw``: 32-bit states, ``paged-adamw-8bit``) keep their state in
CUDA unified memory: on the GPU while it has room, paged to CPU RAM when it runs out. Traced, their state
is counted on the GPU (what they hold while it fits), with the same kernels as the unpaged ones.
"""

from __future__ import annotations

import math

import torch
from torch.optim import Optimizer

from gpuwise.trace.records import TraceError
from gpuwise.workload.storage import FUSED_IMPL_OPTIMIZERS

BLOCK_8BIT = 2048   # bitsandbytes' blockwise quantisation block for optimizer states


class Lion(Optimizer):
    """Lion (Chen et al. 2023): one momentum buffer, sign update; foreach ops like torch's optimizers."""

    def __init__(self, params, lr: float = 1e-4, betas=(0.9, 0.99), weight_decay: float = 0.0) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for p in params:
                if "exp_avg" not in self.state[p]:
                    self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            exp_avgs = [self.state[p]["exp_avg"] for p in params]
            beta1, beta2 = group["betas"]
            torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
            updates = torch._foreach_lerp(exp_avgs, grads, 1 - beta1)
            torch._foreach_sign_(updates)
            torch._foreach_add_(params, updates, alpha=-group["lr"])
            del updates
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta2)


class _FusedAdamW(Optimizer):
    """bitsandbytes' AdamW, emulated for memory and traffic: its states (``_new_state``), updated in place by one
    fused kernel per parameter that reads the gradient and every state and writes them all (no temporaries)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), weight_decay: float = 0.01) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    def _new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(self._new_state(p))
                # Stand-in for the fused kernel: in-place ops reading grad and states, writing all.
                p.add_(p.grad, alpha=-group["lr"])
                for t in state.values():
                    t.add_(1)


class AdamW8bit(_FusedAdamW):
    """Blockwise 8-bit AdamW: each state is uint8 plus one fp32 absmax per 2048-element block (the states are
    dequantised in registers, so no temporaries)."""

    def _new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        blocks = math.ceil(p.numel() / BLOCK_8BIT)
        return {"state1": torch.zeros(p.shape, dtype=torch.uint8),
                "state2": torch.zeros(p.shape, dtype=torch.uint8),
                "absmax1": torch.zeros(blocks, dtype=torch.float32),
                "absmax2": torch.zeros(blocks, dtype=torch.float32)}


class AdamW32bit(_FusedAdamW):
    """32-bit AdamW (the state of ``paged-adamw``): two float32 states the size of the parameter."""

    def _new_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"state1": torch.zeros(p.shape, dtype=torch.float32),
                "state2": torch.zeros(p.shape, dtype=torch.float32)}


# torch.optim's implementation switches: foreach (multi-tensor: one kernel over all tensors, with
# whole-model temporaries such as Adam's sqrt(exp_avg_sq)), fused (one kernel per step, no
# temporaries; Adam, AdamW, SGD, Adagrad) and for-loop (one tensor at a time: temporaries of one
# parameter's size).
_IMPL_FLAGS = {"foreach": {"foreach": True}, "fused": {"fused": True}, "for-loop": {"foreach": False}}
_FUSED_CAPABLE = FUSED_IMPL_OPTIMIZERS     # torch.optim has a fused kernel for these


def build_optimizer(name: str, params: list[torch.nn.Parameter], impl: str = "foreach") -> Optimizer | None:
    """The optimizer for the trainable ``params``; None for "none" or when nothing is trainable.

    ``impl`` ("foreach", "fused", "for-loop") picks torch's implementation; optimizers without a
    fused kernel in torch (Adafactor) run their foreach version under "fused". Lion and 8-bit AdamW
    are stand-ins whose memory does not depend on it (bitsandbytes' kernels are fused).
    """
    if name == "none" or not params:
        return None
    if impl not in _IMPL_FLAGS:
        raise TraceError(f"--optimizer-impl {impl}: valid: {', '.join(_IMPL_FLAGS)}")
    flags = dict(_IMPL_FLAGS[impl])
    if impl == "fused" and name not in _FUSED_CAPABLE:
        flags = {"foreach": True}
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, **flags)
    if name == "momentum":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, **flags)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, **flags)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, **flags)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-2, **flags)
    if name == "lion":
        return Lion(params)
    if name in ("adamw-8bit", "paged-adamw-8bit"):
        return AdamW8bit(params)
    if name == "paged-adamw":
        return AdamW32bit(params)
    raise TraceError(f"--optimizer {name}: the tracer does not know this optimizer")


def state_tensors(optimizer: Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def host_step_tensors(optimizer: Optimizer) -> list[torch.Tensor]:
    """Step counters that live on the CPU in a CUDA run (non-capturable, non-fused torch optimizers)."""
    capturable = any(g.get("capturable") or g.get("fused") for g in optimizer.param_groups)
    if capturable:
        return []
    return [s["step"] for s in optimizer.state.values() if isinstance(s.get("step"), torch.Tensor)]
