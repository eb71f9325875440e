"""gpuwise: which GPU to rent for a job, what it will cost, and whether the one rented was right."""

__version__ = "0.1.0"
