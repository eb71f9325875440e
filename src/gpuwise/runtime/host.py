"""The host side of an eager PyTorch step: CPU time to issue each operator and its kernels.

Eager PyTorch issues every kernel from one Python thread; when that takes longer than the GPU
needs to run them (small batches, small models, fast GPUs) the host sets the pace. Per operator:

* forward ops are called from Python through ``nn.Module``/functional layers, the dispatcher, the
  library (cuBLAS, cuDNN) and the CUDA launch path: ``FORWARD_CALL_S`` per class, the host cost of one
  eager call with its first kernel as measured on GPU machines (NeuSight's lone event-timed calls on
  five GPU servers, median over machines; ``benchmarks/launch_floor.py``, ``results/time_launch.md``).
  A lone timed operator is therefore this cost + its kernel. Classes the data has no call of take the
  nearest one (attention: the linear call; batch and group norm: layer norm);
* backward ops are issued by autograd's C++ engine: ``AUTOGRAD_OP_S`` each (measured on the build
  machine: a bare in-place aten call; not measured on a GPU machine);
* every further CUDA kernel of an op adds ``CUDA_LAUNCH_S``: ``cudaLaunchKernel`` and PyTorch's CUDA
  path (a prior, from NVIDIA's CUDA Graphs post, developer.nvidia.com/blog/cuda-graphs, 2019: launch
  overhead of a few microseconds each);
* views cost ``VIEW_S`` (measured: a dispatcher call that launches nothing).

``PYTHON_FORWARD_*`` are the build machine's Python-side figures (``benchmarks/host_overhead.py``, no
GPU: 2-5x below a GPU server's whole call); the LLM decode host model uses them.

torch.compile (default mode) replaces the per-op dispatch by Inductor's generated wrapper: each
kernel costs ``COMPILED_KERNEL_S`` (launch + wrapper), views nothing.
"""

from __future__ import annotations

from gpuwise.runtime.stack import DEFAULT_STACK, Stack

# Measured 2026-12-03 on the build machine (benchmarks/results/time_host.md), seconds per call.
PYTHON_FORWARD_S = {"conv": 16e-6, "norm": 23e-6, "matmul": 6.3e-6, "attention": 6.5e-6}  # norm: BatchNorm2d
PYTHON_FORWARD_DEFAULT_S = 6.1e-6   # an activation module / tensor method (relu, add, ...)
AUTOGRAD_OP_S = 1.2e-6
VIEW_S = 2.9e-6
OPTIMIZER_OP_S = 4e-6               # a foreach call from torch.optim's Python step
# Priors (no GPU here).
CUDA_LAUNCH_S = 5e-6
CUDNN_CALL_S = 10e-6
COMPILED_KERNEL_S = 7e-6
# Measured on GPU machines (benchmarks/results/time_launch.md): one eager forward call incl. its first
# kernel's launch, seconds. Softmax and log-softmax: the reduction class's calls.
FORWARD_CALL_S = {"conv": 68e-6, "matmul": 52e-6, "attention": 52e-6, "norm": 46e-6, "reduction": 33e-6,
                  "elementwise": 26e-6}
FORWARD_CALL_DEFAULT_S = FORWARD_CALL_S["elementwise"]
# Classes the data has no call of: a fused RNN is a module call into cuDNN (descriptors set up per call), as a
# convolution is.
FORWARD_CALL_S["rnn"] = FORWARD_CALL_S["conv"]
_CUDNN_CLASSES = ("conv", "rnn")


def host_s(cls: str, kernels: int, phase: str, stack: Stack) -> float:
    """CPU time to issue one traced operator (``kernels`` CUDA launches; 0: a view)."""
    if stack.compile and phase != "optimizer":
        if cls == "rnn":   # one call from Inductor's wrapper; cuDNN launches its steps' kernels itself
            return COMPILED_KERNEL_S + max(0, kernels - 1) * CUDA_LAUNCH_S
        return kernels * COMPILED_KERNEL_S
    if kernels == 0:
        return VIEW_S
    if phase == "backward":
        return AUTOGRAD_OP_S + (CUDNN_CALL_S if cls in _CUDNN_CLASSES else 0.0) + kernels * CUDA_LAUNCH_S
    if phase == "optimizer":
        return OPTIMIZER_OP_S + kernels * CUDA_LAUNCH_S
    return FORWARD_CALL_S.get(cls, FORWARD_CALL_DEFAULT_S) + (kernels - 1) * CUDA_LAUNCH_S


def listed_step_host_s(forward_calls: int, backward_kernels: int) -> float:
    """Host time to issue a step given as counts of kernels rather than traced ops (the decoder-LLM closed
    form): each forward kernel one eager call of the cheapest kind (an elementwise module or tensor
    method: a lower bound, views and module calls not counted), each backward kernel one autograd node."""
    return (forward_calls * host_s("elementwise", 1, "forward", DEFAULT_STACK)
            + backward_kernels * host_s("elementwise", 1, "backward", DEFAULT_STACK))
