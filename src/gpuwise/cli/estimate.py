"""`gpuwise estimate`: peak memory (and, with --gpu, step time) of one step of a job."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from gpuwise.cli import common as c
from gpuwise.units import format_bytes, format_duration


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate)


def estimate(
    model: Annotated[str, typer.Argument(help="torchvision:NAME, timm:NAME, hf:NAME, hf:config.json or file.py:factory.")],
    batch_size: c.BatchSizeOpt = "32",
    seq_len: c.SeqLenOpt = None,
    image_size: c.ImageSizeOpt = None,
    precision: c.PrecisionOpt = "fp32",
    optimizer: c.OptimizerOpt = "adamw",
    mode: c.ModeOpt = "train",
    grad_checkpointing: c.GradCkptOpt = False,
    channels_last: c.ChannelsLastOpt = False,
    grad_accum: c.GradAccumOpt = 1,
    finetune: c.FinetuneOpt = "full",
    lora_rank: c.LoraRankOpt = 16,
    lora_targets: c.LoraTargetsOpt = None,
    quant: c.QuantOpt = "none",
    max_new_tokens: c.MaxNewTokensOpt = 0,
    num_gpus: c.NumGpusOpt = 1,
    sharding: c.ShardingOpt = "ddp",
    offload: c.OffloadOpt = "none",
    attention: c.AttentionOpt = "sdpa",
    compile: c.CompileOpt = False,
    optimizer_impl: c.OptimizerImplOpt = "foreach",
    keep_grads: c.KeepGradsOpt = False,
    input_rate: c.InputRateOpt = None,
    engine: c.EngineOpt = "hf",
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="A catalog GPU (name, alias or NVML name), or 'all'.")] = None,
    max_batch: Annotated[bool, typer.Option("--max-batch", help="The largest batch that fits --gpu.")] = False,
    samples: Annotated[Optional[int], typer.Option("--samples", help="Samples per epoch, for epoch/job time.")] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Epochs, with --samples.")] = 1.0,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Optimizer steps of the job.")] = None,
    headroom: Annotated[float, typer.Option("--headroom", help="Share of GPU memory kept free (0.05 = 5%).")] = 0.05,
    catalog: c.CatalogOpt = None,
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write a PNG of memory over the step.")] = None,
    json_out: c.JsonOpt = False,
) -> None:
    """Peak GPU memory of one real step of the job, traced on this CPU; with --gpu, fit and step time.

    Memory: what torch.cuda.max_memory_allocated/reserved would report, plus the CUDA context: the
    number nvidia-smi shows. Predictions assume PyTorch 2.x eager mode with cuDNN.
    """
    from gpuwise.catalog import load_catalog, resolve_gpu
    from gpuwise.plan import JobSize, largest_fitting_batch, model_for

    workload = c.build_workload(
        model, batch_size=c.parse_batch_size(batch_size), seq_len=seq_len, image_size=image_size,
        precision=precision, optimizer=optimizer, mode=mode, grad_checkpointing=grad_checkpointing,
        channels_last=channels_last, grad_accum=grad_accum, finetune=finetune, lora_rank=lora_rank,
        lora_targets=lora_targets, quant=quant, max_new_tokens=max_new_tokens, num_gpus=num_gpus,
        sharding=sharding, offload=offload,
        attention=attention, compile=compile, optimizer_impl=optimizer_impl, keep_grads=keep_grads,
        input_rate=input_rate, engine=engine,
    )
    if not 0 <= headroom < 1:
        raise c.WorkloadError(f"--headroom must be a fraction in [0, 1), got {headroom}")
    job = JobSize(samples=samples, epochs=epochs, steps=steps) if (samples or steps) else None
    cat = load_catalog(catalog)
    gpus = list(cat.gpus) if gpu and gpu.lower() == "all" else ([resolve_gpu(cat, gpu)] if gpu else [])
    if max_batch and len(gpus) != 1:
        raise c.WorkloadError("--max-batch needs one --gpu NAME")

    status = c.err_console.status("tracing…") if not json_out else None
    progress = (lambda msg: status.update(msg)) if status else None
    if status:
        status.start()
    try:
        wm = model_for(workload, progress)
        count = workload.num_gpus
        main_gpu = gpus[0] if len(gpus) == 1 else None
        est = wm.estimate(main_gpu, count=count)
        largest = largest_fitting_batch(wm, main_gpu, count=count, headroom_fraction=headroom) if max_batch else None
        per_gpu = [wm.estimate(g, count=count) for g in gpus] if len(gpus) > 1 else []
    finally:
        if status:
            status.stop()

    out = _result(wm, est, main_gpu, headroom, job, largest, per_gpu)
    if plot:
        _plot_timeline(est, plot)
    if json_out:
        c.print_json(out)
        return
    _render(out, est, per_gpu)


def _job_time(step_time_s: float, workload, job) -> dict | None:
    if job is None:
        return None
    steps = job.optimizer_steps(workload.effective_batch_size)
    epoch_s = None
    if job.samples is not None:
        epoch_s = step_time_s * (job.samples / workload.effective_batch_size)
    return {"optimizer_steps": steps, "epoch_time_s": epoch_s, "total_time_s": steps * step_time_s}


def _result(wm, est, gpu, headroom, job, largest, per_gpu) -> dict:
    from gpuwise.plan import fits, usable_bytes

    trace_info = None
    if wm.method == "traced":
        t = wm.trace()
        trace_info = {"ops": len(t.ops), "flops": t.flops, "param_count": t.param_count,
                      "trainable_param_count": t.trainable_param_count, "trace_time_s": t.trace_time_s,
                      "notes": list(t.notes)}
    time = None
    if est.time is not None:
        time = est.time.to_dict()
        job_time = _job_time(est.time.step_time_s, est.workload, job)
        if job_time:
            time.update(job_time)
    inference = est.inference
    if inference is not None and hasattr(inference, "to_dict"):
        inference = inference.to_dict()
    elif inference is not None:
        import dataclasses

        inference = dataclasses.asdict(inference)
    return {
        "workload": est.workload.to_dict(),
        "method": wm.method,
        "memory": est.memory.to_dict(),
        "time": time,
        "gpu": gpu.id if gpu else None,
        "fits": fits(est, headroom) if gpu else None,
        "headroom_bytes": usable_bytes(gpu, headroom) - est.memory.total_bytes if gpu else None,
        "max_batch_size": largest,
        "inference": inference,
        "trace": trace_info,
        "per_gpu": [
            {"gpu": e.gpu.id, "memory_bytes": e.gpu.memory_bytes, "peak_total_bytes": e.memory.total_bytes,
             "fits": fits(e, headroom), "step_time_s": e.time.step_time_s if e.time else None,
             "samples_per_s": e.time.samples_per_s if e.time else None, "bound": e.time.bound if e.time else None}
            for e in per_gpu
        ],
    }


def _render(out: dict, est, per_gpu) -> None:
    con = c.console
    w = est.workload
    optimizer = f", optimizer {w.optimizer}" if w.is_training else ""
    con.print(f"[bold]{w.model}[/]  {w.mode}, batch {w.batch_size}, {w.precision}{optimizer}"
              f"  [dim]({out['method']})[/]")
    mem = out["memory"]
    table = Table(title="Peak memory of one step" + (f" on {out['gpu']}" if out["gpu"] else ""), title_justify="left")
    table.add_column("part")
    table.add_column("bytes", justify="right")
    for key in ("weights", "gradients", "optimizer", "activations", "workspace", "other"):
        table.add_row(key, format_bytes(mem[f"{key}_bytes"]))
    table.add_row("[bold]peak allocated[/]", f"[bold]{format_bytes(mem['peak_allocated_bytes'])}[/]")
    table.add_row("peak reserved (allocator cache)", format_bytes(mem["peak_reserved_bytes"]))
    table.add_row("CUDA context", format_bytes(mem["cuda_context_bytes"]))
    table.add_row("[bold]total (nvidia-smi)[/]", f"[bold]{format_bytes(mem['total_bytes'])}[/]")
    con.print(table)
    if mem["top_modules"]:
        con.print("Top modules by activation memory: " + ", ".join(
            f"{m['module'] or '(top)'} {format_bytes(m['bytes'])}" for m in mem["top_modules"][:5]))
    if out["gpu"]:
        verdict = "[green]fits[/]" if out["fits"] else "[red]does not fit[/]"
        con.print(f"On {out['gpu']}: {verdict}, headroom {format_bytes(out['headroom_bytes'])}")
    if out["max_batch_size"] is not None:
        con.print(f"Largest batch that fits: [bold]{out['max_batch_size']}[/]")
    t = out["time"]
    if t:
        con.print(f"Step time {format_duration(t['step_time_s'])}, {t['samples_per_s']:.1f} samples/s, "
                  f"bound by {t['bound']}")
        parts = sorted(t["by_class_s"].items(), key=lambda kv: -kv[1])
        con.print("  by operator class: " + ", ".join(f"{k} {format_duration(v)}" for k, v in parts if v > 0))
        if t.get("total_time_s"):
            epoch = f"epoch {format_duration(t['epoch_time_s'])}, " if t.get("epoch_time_s") else ""
            con.print(f"  {epoch}job {format_duration(t['total_time_s'])} ({t['optimizer_steps']} steps)")
        for warning in t["warnings"]:
            con.print(f"  [yellow]warning:[/] {warning}")
    if out["inference"]:
        _render_inference(out["inference"])
    if per_gpu:
        grid = Table(title="Every GPU in the catalog", title_justify="left")
        for col in ("gpu", "memory", "needs", "fits", "step", "samples/s", "bound"):
            grid.add_column(col, justify="left" if col in ("gpu", "bound") else "right")
        for row in sorted(out["per_gpu"], key=lambda r: (not r["fits"], r["step_time_s"] or 1e18)):
            grid.add_row(row["gpu"], format_bytes(row["memory_bytes"]), format_bytes(row["peak_total_bytes"]),
                         "yes" if row["fits"] else "[red]no[/]",
                         format_duration(row["step_time_s"]) if row["step_time_s"] else "-",
                         f"{row['samples_per_s']:.1f}" if row["samples_per_s"] else "-", row["bound"] or "-")
        con.print(grid)
    notes = (out["trace"] or {}).get("notes", []) + list(mem.get("notes", []))
    for note in notes:
        con.print(f"[dim]note: {note}[/]")
    con.print("[dim]Assumes PyTorch 2.x eager mode with cuDNN, channels-first unless --channels-last.[/]")


def _render_inference(inf: dict) -> None:
    """Serving figures in words; the JSON has every field."""
    parts = []
    if inf.get("ttft_s") is not None:
        parts.append(f"time to first token {format_duration(inf['ttft_s'])}")
    if inf.get("decode_tokens_per_s") is not None:
        parts.append(f"decode {inf['decode_tokens_per_s']:.1f} tokens/s (all sequences together)")
    if inf.get("kv_cache_bytes") is not None:
        parts.append(f"KV cache {format_bytes(inf['kv_cache_bytes'])}")
    if inf.get("max_context_tokens") is not None:
        parts.append(f"longest context that fits {inf['max_context_tokens']:,} tokens")
    if inf.get("max_batch_size") is not None:
        parts.append(f"largest batch that fits {inf['max_batch_size']}")
    c.console.print("Inference: " + ", ".join(parts))


def _plot_timeline(est, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = est.memory.timeline
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    if timeline:
        seq, allocated, reserved = zip(*timeline)
        ax.plot(seq, [b / 1e9 for b in allocated], label="allocated")
        ax.plot(seq, [b / 1e9 for b in reserved], label="reserved (caching allocator)")
        ax.axhline(est.memory.total_bytes / 1e9, color="tab:red", linestyle="--", linewidth=1,
                   label="total incl. CUDA context")
        if est.gpu is not None:
            ax.axhline(est.gpu.visible_memory_bytes / 1e9, color="black", linewidth=1,
                       label=f"{est.gpu.id} memory (as the driver reports it)")
    ax.set_xlabel("allocator event (two steps: warm-up, then measured)")
    ax.set_ylabel("GB")
    ax.set_title(f"{est.workload.model}: GPU memory over the step")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
