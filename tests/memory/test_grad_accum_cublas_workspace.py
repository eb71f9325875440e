"""With gradient accumulation the warm-up micro-step keeps its gradients, so only its forward lines up with the
measured step's: the backward thread's cuBLAS workspace must still be allocated at the first backward GEMM,
where the real one is, and not after the step has ended (where it never counts at the peak)."""

from functools import lru_cache
from pathlib import Path

from gpuwise.memory.adjust import cuda_events
from gpuwise.memory.cuda import CudaStack
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

TRANSFORMER = f"{Path(__file__).parent / 'tiny_models.py'}:transformer"
CUBLAS_WORKSPACE = "cuBLAS workspace"


@lru_cache(maxsize=None)
def _trace(grad_accum_steps: int):
    return trace_workload(Workload(model=TRANSFORMER, batch_size=4, seq_len=32, optimizer="sgd",
                                   grad_accum_steps=grad_accum_steps))


def test_accumulating_step_allocates_the_backward_cublas_workspace_during_backward():
    events = cuda_events(_trace(2), CudaStack.for_gpu(None)).events
    backward_ws = [i for i, e in enumerate(events) if e.module == CUBLAS_WORKSPACE and e.phase == "backward"]
    assert len(backward_ws) == 1
    assert any(e.phase == "backward" for e in events[backward_ws[0] + 1:])

