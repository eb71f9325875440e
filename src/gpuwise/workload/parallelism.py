"""Defaults of the data-parallel implementations a workload's ``sharding`` names, shared by the memory
and the time of data parallelism (``gpuwise.memory.parallel``, ``gpuwise.runtime.comm``)."""

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000   # DeepSpeed zero_optimization.reduce_bucket_size default
PREFETCH_DEPTH = 1                               # FSDP BACKWARD_PRE / FSDP2 / ZeRO-3: one unit ahead
