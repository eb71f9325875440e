"""Defaults of the data-parallel implementations a workload's ``sharding`` names, shared by the memory
and the time of data parallelism (``gpuwise.memory.parallel``, ``gpuwise.runtime.comm``)."""

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000   # DeepSpeed zero_optimization.reduce_bucket_size default
PREFETCH_DEPTH = 1                               # FSDP BACKWARD_PRE / FSDP2 / ZeRO-3: one unit ahead


def splits_layers(workload) -> bool:
    """Serving on several GPUs with HF generate (``--engine hf``): transformers' ``device_map="auto"``
    (accelerate's balanced map) places consecutive decoder layers on each GPU and runs them one GPU after
    another, a pipeline with one batch in it, so no GPU works while another does. Serving engines (vLLM) split
    every layer over the GPUs by tensor parallelism instead. The memory (``gpuwise.memory.llm``) and the
    time (``gpuwise.runtime.llm``) of serving both follow this."""
    return not workload.is_training and workload.engine == "hf" and workload.num_gpus > 1


def serving_split_words(workload) -> str:
    """How ``workload``'s GPUs share the model when it serves, in words."""
    if splits_layers(workload):
        return ('HF generate\'s device_map="auto": the layers split over the GPUs, which run them one after another '
                "(weights and KV cache by layer)")
    return "tensor parallelism (weights and KV heads split across GPUs)"
