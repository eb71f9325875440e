"""gpuwise.memory: peak GPU memory of a traced step (caching allocator + CUDA rules + context)."""

from gpuwise.memory.estimate import estimate_memory, max_batch_size, memory_at_batches
from gpuwise.memory.model import MemoryError_, MemoryEstimate

__all__ = ["estimate_memory", "max_batch_size", "memory_at_batches", "MemoryEstimate", "MemoryError_"]
