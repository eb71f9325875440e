"""gpuwise.memory: peak GPU memory of a traced step (caching allocator + CUDA rules + context), and the
closed form for decoder LLMs on the same CUDA tables (``gpuwise.memory.llm``)."""

from gpuwise.memory.estimate import estimate_memory
from gpuwise.memory.model import MemoryError_, MemoryEstimate

__all__ = ["estimate_memory", "MemoryEstimate", "MemoryError_"]
