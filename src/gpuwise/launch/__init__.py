"""gpuwise.launch: turn a chosen option into what runs it (a SkyPilot task YAML, torchrun lines; for a server, a
SkyServe service).

    from gpuwise.launch import plan_launch, render
    plan = plan_launch(rec.best, catalog.gpu(rec.best.gpu), "python train.py --checkpoint-dir ckpt")
    print(render(plan, "skypilot"))
"""

from __future__ import annotations

from pathlib import Path

from gpuwise.launch.assumptions import JobAssumptions
from gpuwise.launch.command import Command, parse_command
from gpuwise.launch.disk import (DiskNeed, checkpoint_bytes_per_param, checkpoint_optimizer_bytes,
                                 checkpoint_weights_bytes)
from gpuwise.launch.plan import BatchSplit, LaunchError, LaunchPlan, plan_launch
from gpuwise.launch.server import (REMOTE_MODEL_DIR, is_server, local_model_dir, missing_weights_refusal,
                                   server_emit_refusal, skyserve_refusal, vllm_serve_line)
from gpuwise.launch.sharding import ShardingSetup
from gpuwise.launch.skypilot import render_skypilot
from gpuwise.launch.skyserve import render_skyserve
from gpuwise.launch.torchrun import render_torchrun
from gpuwise.launch.wheel import build_wheel
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import model_for, workload_on
from gpuwise.workload.checkpoint import stored_quant
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.llm_config import try_load_decoder_config
from gpuwise.workload.parallelism import effective_sharding, splits_layers
from gpuwise.workload.precision import checkpoint_dtype

EMITTERS = ("skypilot", "torchrun")


def check_emit(emit: str | None, command: str | None, *, server: bool = False) -> None:
    """Refuse a bad ``--emit``/``--command`` pair before any work is done, the command read as the launch will
    read it (``parse_command``: quotes, shell syntax, launchers, a Python with nothing to run). ``server``: the
    job is a server (``is_server``): no command needed, and one given to ``--emit skypilot`` refused, the service
    running the plan's ``vllm serve`` line (``serve_best``; torchrun is refused for a server, naming that line)."""
    if emit is None:
        if command is not None:
            raise LaunchError("--command needs --emit skypilot or --emit torchrun")
        return
    if emit.lower() not in EMITTERS:
        raise LaunchError(f"--emit: unknown target {emit!r} (known: {', '.join(EMITTERS)})")
    if server and command is not None and emit.lower() == "skypilot":
        raise LaunchError("--command is a training command, and a server's SkyServe service runs the plan's own "
                          "`vllm serve` line: drop --command")
    if not server and not (command or "").strip():
        raise LaunchError("--emit needs --command: the training command to launch, e.g. "
                          "--command 'python train.py --checkpoint-dir ckpt'")
    if command is not None and not server:
        parse_command(command)


def launch_best(rec, catalog, emit: str, command: str) -> dict:
    """The launch of a recommendation's best option: ``{"emit", "gpu", "count", "provider", "nodes", "replicas",
    "notes", "env", "files", "disk_size_gb", "job_disk_gb", "wheel", "text"}``, where ``text`` is the YAML or the
    torchrun lines. The notes say first the batch split the option is priced on, which ``env`` carries to the command (``BatchSplit``), then
    the ZeRO/FSDP sharding and offload it is priced on (``ShardingSetup``), whose DeepSpeed config is in
    ``files`` (name -> text) and written by ``text`` beside the command, then the job's assumptions it fits and
    is priced only with (``JobAssumptions``: precision, gradient checkpointing, LoRA/QLoRA, sequence length),
    which ``env`` carries too, then the disk each node needs (``DiskNeed``: ``disk_size_gb``, a SkyPilot task's
    ``disk_size``, None where SkyPilot does not know the provider; ``job_disk_gb``, the job's own files beside the
    system, on any provider)."""
    best = _best_to_launch(rec)
    split = BatchSplit.of(best, training=rec.workload.is_training, per_gpu=rec.method != "closed-form")
    sharding = ShardingSetup.of(rec.workload, best.count, closed_form=rec.method == "closed-form")
    one_process = rec.method == "closed-form" and splits_layers(rec.workload.with_(num_gpus=best.count))
    gpu = catalog.gpu(best.gpu)
    # the job as priced on the best option's GPU (a default bf16 is its fp16 twin where the GPU has no bf16)
    assumptions = JobAssumptions.of(workload_on(rec.workload, gpu), closed_form=rec.method == "closed-form")
    plan = plan_launch(best, gpu, command, batch=split, sharding=sharding, one_process=one_process,
                       assumptions=assumptions, disk=disk_need(rec.workload, best, gpu))
    wheel = launch_wheel()     # the SkyPilot task uploads it; torchrun lines install it where it is copied
    return _launch_dict(plan, emitted_target(plan, emit.lower()), render(plan, emit.lower(), wheel=wheel), wheel)


def serve_best(rec, catalog, emit: str) -> dict:
    """The launch of a server's best option (``is_server``), as ``launch_best``'s, with ``"replicas"``: for
    ``emit`` "skypilot" a SkyServe service (``render_skyserve``) that runs the option's ``vllm serve`` line
    (``vllm_serve_line``) on each of its replicas; a local checkpoint's folder (``local_model_dir``) uploaded to
    each and served from ``REMOTE_MODEL_DIR``. Refused in one line (LaunchError) naming what to run instead
    (``server_emit_refusal``): torchrun (it starts training jobs), and what ``skyserve_refusal`` says no service
    can run (an engine other than vLLM, a provider SkyPilot does not know); and where nothing meets the request.
    A local config without weights is refused in one line saying to serve a Hub id (``missing_weights_refusal``)."""
    emit = emit.lower()
    if emit != "skypilot":
        raise LaunchError(server_emit_refusal(rec, emit))
    best = _best_to_launch(rec)
    if (why := missing_weights_refusal(rec.workload)) is not None:     # no `vllm serve` line to name: none loads it
        raise LaunchError(f"--emit {emit}: {why}")
    if (why := skyserve_refusal(rec.workload, best.provider)) is not None:
        raise LaunchError(server_emit_refusal(rec, emit, why))
    gpu = catalog.gpu(best.gpu)
    model_dir = local_model_dir(rec.workload)
    line = vllm_serve_line(rec, listen=True, model=REMOTE_MODEL_DIR if model_dir is not None else None)
    plan = plan_launch(best, gpu, line, disk=disk_need(rec.workload, best, gpu), server=True, model_dir=model_dir)
    return _launch_dict(plan, emit, render_skyserve(plan), None)


def _best_to_launch(rec):
    """The recommendation's best option; LaunchError saying why nothing meets (no offers, the deadline …), not
    only that nothing does."""
    if rec.best is None:
        see = "; run without --emit to see the options and why each was left out" if rec.options else ""
        raise LaunchError(f"nothing to launch: {rec.nothing_reason or 'no option meets the request'}{see}")
    return rec.best


def _launch_dict(plan: LaunchPlan, emit: str, text: str, wheel: Path | None) -> dict:
    """``--json``'s ``launch``: the plan's machines, notes, environment, files and disk (``disk_size_gb``: a SkyPilot
    task's, ``LaunchPlan.disk_size_gb``; ``job_disk_gb``: the job's own files, ``DiskNeed.job_disk_gb``), and the
    emitted text."""
    return {"emit": emit, "gpu": plan.gpu.id, "count": plan.count, "provider": plan.provider,
            "nodes": plan.nodes, "replicas": plan.replicas, "notes": list(plan.notes), "env": dict(plan.env),
            "files": dict(plan.files), "disk_size_gb": plan.disk_size_gb,
            "job_disk_gb": plan.disk.job_disk_gb if plan.disk is not None else None,
            "wheel": str(wheel) if wheel else None, "text": text}


# shardings whose checkpoints hold every weight, frozen ones too: FSDP's (the guard's DCP save) and DeepSpeed's
# (save_checkpoint keeps frozen parameters unless told exclude_frozen_parameters)
WHOLE_MODEL_CHECKPOINTS = ("fsdp", "zero1", "zero2", "zero3")


def disk_need(workload, option, gpu) -> DiskNeed:
    """The disk each node (a server's replica) of ``option`` needs for ``workload``: the whole model's weights as one
    unsharded GPU holds them (a checkpoint gathers the shards), from the same estimate as the plan (a traced model's
    trace is cached by then), the optimizer state a checkpoint holds for the parameters it trains
    (``checkpoint_optimizer_bytes``, whatever the GPU and batch) with the weights a checkpoint saves (the trained
    ones where a base is frozen: ``checkpoint_weights_bytes``), and the checkpoint it downloads
    (``downloaded_weights_bytes``)."""
    whole = workload.with_(num_gpus=1, sharding="ddp", offload="none")
    model = model_for(whole)
    estimate = model.estimate(gpu, count=1, batch_size=option.batch_size, with_time=False,
                              grad_accum_steps=option.grad_accum_steps)
    if not workload.is_training:
        return DiskNeed.of(estimate.memory.weights_bytes, 0, training=False,
                           downloaded_bytes=downloaded_weights_bytes(workload))
    trained = trained_param_count(model, estimate)
    return DiskNeed.of(estimate.memory.weights_bytes, checkpoint_optimizer_bytes(estimate.workload, trained),
                       training=True, downloaded_bytes=downloaded_weights_bytes(workload),
                       saved_weights_bytes=checkpoint_weights_bytes(
                           estimate.workload, estimate.memory.weights_bytes, trained,
                           sharded=effective_sharding(workload) in WHOLE_MODEL_CHECKPOINTS))


def trained_param_count(model, estimate) -> int:
    """The parameters ``estimate``'s job trains (whose optimizer state its checkpoint holds): its trace's count for a
    traced model (the trace the estimate used, cached), the closed form's split for a decoder LLM."""
    job = estimate.workload
    if model.method == "traced":
        return model.trace(job.batch_size, job.grad_accum_steps, job.precision).trainable_param_count
    return estimate_llm(job, estimate.gpu).trainable_params


def downloaded_weights_bytes(workload) -> int:
    """The weights a decoder LLM's job downloads: its checkpoint's every parameter (``param_counts``) at the dtype
    its config stores (``checkpoint_dtype``: 2 bytes for bf16), whatever the job then holds (a QLoRA base quantized
    to nf4 as it loads: about 0.52 bytes a weight). 0 where not known: a checkpoint stored quantized (AWQ, FP8 …:
    what it downloads is what it holds) or a model that is no decoder LLM."""
    config = try_load_decoder_config(workload.model)
    if config is None or stored_quant(workload.model) != "none":
        return 0
    return load_arch(workload.model).param_counts().total * checkpoint_bytes_per_param(checkpoint_dtype(config))


def launch_wheel() -> Path | None:
    """A wheel of the running gpuwise for the remote machines (``build_wheel``); None where none can be built
    (gpuwise not installed as a package here): torchrun lines then check for gpuwise and say how to install it,
    and a SkyPilot task, which needs it, is refused by ``build_wheel`` itself."""
    try:
        return build_wheel()
    except LaunchError:
        return None


def render(plan: LaunchPlan, emit: str, *, wheel: Path | None = None) -> str:
    """The text of ``emit`` ("skypilot" or "torchrun") for ``plan``. For a provider SkyPilot does not
    know, "skypilot" says so and gives the torchrun lines instead. A SkyPilot task uploads ``wheel``
    (built into the cache when not given); torchrun lines install it on a node that lacks gpuwise (None: they
    check for gpuwise and say how to install it)."""
    if emit not in EMITTERS:
        raise LaunchError(f"--emit: unknown target {emit!r} (known: {', '.join(EMITTERS)})")
    if emitted_target(plan, emit) == "skypilot":
        return render_skypilot(plan, wheel or build_wheel())
    return render_torchrun(plan, wheel)


def emitted_target(plan: LaunchPlan, emit: str) -> str:
    """What ``render`` gives for ``emit``, and so ``--json``'s ``launch.emit``: "skypilot" is torchrun lines where
    SkyPilot does not know the provider (AutoDL), so a script that feeds ``launch.text`` to ``sky launch`` only
    where ``launch.emit`` says skypilot does not hand it shell lines."""
    return "torchrun" if emit == "skypilot" and plan.skypilot_cloud is None else emit


__all__ = ["EMITTERS", "BatchSplit", "Command", "DiskNeed", "JobAssumptions", "LaunchError", "LaunchPlan", "ShardingSetup", "check_emit", "emitted_target", "is_server",
           "launch_best", "parse_command", "plan_launch", "render", "serve_best", "server_emit_refusal"]
