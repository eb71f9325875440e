"""gpuwise: which GPU to rent for a job, what it will cost, and whether the one rented was right.

The parts, each a subpackage with one main entry point (DESIGN.md; every command of the CLI is a thin
client of these)::

    catalog    GPU specs and price offers     load_catalog(), resolve_gpu(catalog, "a100-80gb"), offers_for()
    workload   the job's description          Workload("torchvision:resnet50", batch_size=64),
                                              Workload.with_default_precision() (the CLI's default rule)
    trace      one step on fake tensors       trace_workload(workload) -> Trace
    memory     peak memory of a trace         estimate_memory(trace, gpu) -> MemoryEstimate
    runtime    step time of a trace           predict_step_time(trace, gpu, count=1) -> StepTime
    plan       fits? how long? what cost?     model_for(workload).estimate(gpu) -> Estimate,
                                              recommend(model, catalog, job=JobSize(...)) -> Recommendation,
                                              plan.llm.estimate_llm(workload, gpu) (decoder LLMs, closed form)
    launch     what runs the chosen option    plan_launch(option, gpu, command), render(plan, "skypilot")
    monitor    NVML sampling                  open_backend(), Sampler(backend, interval_s=0.5, runlog=...)
    runlog     the run log's one schema       gpuwise.runlog.RunLog("run.db"), read_train_metrics(path)
    report     what a run really needed       build_report("run.db", catalog) -> Report
    advise     loss curves and noise scale    advise(read_log("run.db"), catalog=catalog) -> AdviceReport
    calibrate  your runs correct the model    calibrate(run_log_paths, catalog), user_calibration_path()
    guard      keep training alive            Guard(checkpoint_dir, model, optimizer), CheckpointStore(dir)

A minimal estimate::

    from gpuwise.catalog import load_catalog, resolve_gpu
    from gpuwise.plan import model_for
    from gpuwise.workload import Workload

    gpu = resolve_gpu(load_catalog(), "rtx-4090")
    job = Workload("hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=2048, batch_size=2).with_default_precision(gpu)
    est = model_for(job).estimate(gpu)       # count: job.num_gpus
    est.memory.total_bytes, est.runs, est.to_dict()

``est.runs`` is whether the job runs on that GPU: False where it cannot run there at all (``est.cannot_run``
says why: bf16 on a GPU without it) or its memory does not fit (``est.fits``, at the default headroom).

Every error of bad input derives from ``gpuwise.errors.GpuwiseError`` (one type per part: CatalogError,
WorkloadError, PlanError, ...), with a one-line message.
"""

__version__ = "0.1.0"
