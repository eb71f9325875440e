"""Step time of a traced workload on ``count`` GPUs of one kind.

Eager PyTorch issues kernels from one host thread into a queue the GPU drains. A micro-step
therefore takes about the larger of the GPU's work and the host's issue time (a smooth maximum:
near the crossover neither side hides the other fully). The optimizer runs once per step, after
``grad_accum_steps`` micro-steps; data-parallel collectives add what backward does not hide.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from gpuwise.catalog.model import GPU, not_a_gpu
from gpuwise.catalog.resolve import is_mig_slice
from gpuwise.catalog.topology import Topology, topology_for
from gpuwise.runtime.calibration import Calibration, load_calibration
from gpuwise.runtime.classify import CLASSES, VIEW
from gpuwise.runtime.comm import data_parallel_comm, gradients_from_trace, weak_scaling_parts
from gpuwise.runtime.host import COMPILED_KERNEL_S
from gpuwise.runtime.input_pipeline import decoding_warning
from gpuwise.runtime.kernels import TENSOR_CLASSES, OpTime, op_features, op_times
from gpuwise.runtime.model import RuntimeError_, StepPace, StepTime
from gpuwise.runtime.rates import fallback_warning
from gpuwise.runtime.stack import Stack
from gpuwise.trace.records import Trace
from gpuwise.workload import Workload
from gpuwise.workload.parallelism import effective_sharding
from gpuwise.workload.precision import parse
from gpuwise.workload.specs import image_side

SMOOTH_MAX_P = 4.0     # the smooth maximum's exponent (``smooth_max``); calibration fits against the same rule
# A step whose host issue time is at least this share of the GPU's busy time is a small-batch step: the
# launch cost (priors and CPU-side measurements, runtime/host.py) shapes it, which no big-batch run tests.
SMALL_BATCH_HOST_SHARE = 0.5
# Classes Inductor fuses into one kernel when they follow each other (not into cuBLAS/cuDNN calls).
FUSIBLE = ("elementwise", "norm", "reduction", "copy")


def smooth_max(a, b, p: float = SMOOTH_MAX_P):
    """The step model's smooth maximum of two times: (a^p + b^p)^(1/p), or the larger where either is not
    positive. The one home of the rule: floats give a float; where either side is a numpy array, it is
    taken elementwise and an array comes back (gpuwise.calibrate.fit fits against it)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        both = (a > 0) & (b > 0)
        safe = np.where(both, (np.where(both, a, 1.0) ** p + np.where(both, b, 1.0) ** p) ** (1.0 / p), 0.0)
        return np.where(both, safe, np.maximum(a, b))
    if a <= 0 or b <= 0:
        return max(a, b)
    return (a**p + b**p) ** (1.0 / p)


@dataclass(frozen=True)
class PhaseTimes:
    device_s: float
    host_s: float
    compute_bound_s: float
    memory_bound_s: float
    kernels: int
    by_class_s: dict


def roofline_step_s(trace: Trace, gpu, *, stack: Stack | None = None, accum_steps: int = 1,
                    optimizer_shards: int = 1, compiled_fusion: bool = True) -> float:
    """The plain roofline of one step of ``trace`` on ``gpu``: per traced op, the larger of its FLOPs at the
    datasheet peak of the rate it runs at and its bytes at the datasheet bandwidth (``OpFeatures.roofline_s``),
    no efficiency, latency or host time; the micro-step's ops ``accum_steps`` times, the optimizer's over
    ``optimizer_shards`` ranks. ``compiled_fusion``: under torch.compile only matmul, convolution and attention
    count (their FLOPs stay; fusion removes the other kernels' bytes); False sums every traced op as traced."""
    stack = stack or Stack.from_workload(trace.workload, trace.frames_per_sample)
    precision = trace.workload.precision
    micro_s = optimizer_s = 0.0
    for op in trace.ops:
        f = op_features(op, gpu, precision, stack)
        if compiled_fusion and stack.compile and f.cls not in TENSOR_CLASSES:
            continue
        if op.phase == "optimizer":
            optimizer_s += f.roofline_s
        else:
            micro_s += f.roofline_s
    return micro_s * accum_steps + optimizer_s / optimizer_shards


def _phase(times: list[OpTime]) -> PhaseTimes:
    by_class: dict[str, float] = defaultdict(float)
    comp = mem = 0.0
    for t in times:
        if t.cls == VIEW:
            continue
        by_class[t.cls] += t.device_s
        if t.compute_s >= t.memory_s:
            comp += t.device_s
        else:
            mem += t.device_s
    return PhaseTimes(
        device_s=sum(t.device_s for t in times), host_s=sum(t.host_s for t in times),
        compute_bound_s=comp, memory_bound_s=mem, kernels=sum(t.kernels for t in times),
        by_class_s=dict(by_class),
    )


def fuse_for_compile(times: list[OpTime], rest: float = 0.0) -> list[OpTime]:
    """torch.compile fuses each run of consecutive memory-bound ops into one kernel that reads the
    run's inputs and writes its outputs once: the run costs its largest member plus ``rest`` x the
    others (the calibration's ``compile_fusion_rest``), one launch. The list keeps one entry per op
    (the others become empty) so per-op consumers stay aligned."""
    out = list(times)
    i = 0
    while i < len(out):
        if out[i].cls not in FUSIBLE:
            i += 1
            continue
        j = i
        while j < len(out) and (out[j].cls in FUSIBLE or out[j].cls == VIEW):
            j += 1
        run = [k for k in range(i, j) if out[k].cls != VIEW]
        if len(run) > 1:
            big = max(run, key=lambda k: out[k].device_s)
            others_s = sum(out[k].device_s for k in run if k != big)
            for k in run:
                if k != big:
                    out[k] = replace(out[k], device_s=0.0, host_s=0.0, compute_s=0.0, memory_s=0.0, kernels=0)
            out[big] = replace(out[big], kernels=1, host_s=COMPILED_KERNEL_S,
                               device_s=out[big].device_s + rest * others_s)
        i = j
    return out


def multi_gpu_regime(sharding: str, count: int, gpus_per_node: int) -> str:
    """The regime of a training step on ``count`` > 1 GPUs whose one-GPU step is big-batch eager
    (runtime/accuracy.py): data parallel within one node
    (``multi-gpu``, what Lambda's held-out multi-GPU runs measure), sharded (ZeRO / FSDP: the gathers of the
    weights, no held-out run) or over several nodes (the network, no held-out run). An inference step on N GPUs
    is N replicas of one GPU's step and keeps the single-GPU regime."""
    if count > gpus_per_node:
        return "multi-node"
    return "multi-gpu" if sharding == "ddp" else "multi-gpu-sharded"


def predict_step_time(
    trace: Trace, gpu: GPU, *, count: int = 1, calibration: Calibration | None = None,
    topology: Topology | None = None, workload: Workload | None = None,
) -> StepTime:
    """Predicted time of one optimizer step of ``trace.workload`` on ``count`` GPUs like ``gpu``.

    ``count`` GPUs run data parallel (``workload.sharding``), each with the traced micro-batch;
    ``samples_per_s`` counts all of them. ``topology``: how they are linked (the provider's machines,
    ``gpuwise.catalog.topology.topology_for``); None: the GPU's usual machine, no provider. ``by_class_s`` sums to ``compute_s`` (one GPU, all
    micro-steps and the optimizer; a "launch" entry holds the time the GPU waits for the host).
    ``workload``: the job (accumulation, sharding, stack) when it is not the trace's own (a trace is one
    micro-step, shared by every job that traces alike); None: ``trace.workload``.
    """
    if (why := not_a_gpu(gpu)) is not None:
        raise RuntimeError_(why)
    if count < 1:
        raise RuntimeError_(f"GPU count must be at least 1, got {count}")
    cal = calibration or load_calibration()
    wl = workload or trace.workload
    precision = wl.precision
    warnings: list[str] = []
    stack = Stack.from_workload(wl, trace.frames_per_sample)

    phases: dict[str, list[OpTime]] = defaultdict(list)
    for op, t in zip(trace.ops, op_times(trace.ops, gpu, precision, cal, stack)):
        phases[op.phase].append(t)
    if stack.compile:
        for name in ("forward", "other", "backward"):
            phases[name] = fuse_for_compile(phases[name], cal.p("compile_fusion_rest"))
    fwd = _phase(phases["forward"] + phases["other"])
    bwd = _phase(phases["backward"])
    opt = _phase(phases["optimizer"])

    micro_device_s = fwd.device_s + bwd.device_s
    micro_host_s = fwd.host_s + bwd.host_s
    micro_s = smooth_max(micro_device_s, micro_host_s)
    opt_device_s = opt.device_s
    sharded = count > 1 and wl.sharding != "ddp"
    if sharded:
        opt_device_s /= count     # each rank updates its shard of the optimizer state
    opt_s = smooth_max(opt_device_s, opt.host_s)
    accum = wl.grad_accum_steps if wl.is_training else 1
    compute_s = micro_s * accum + opt_s

    by_class: dict[str, float] = {c: 0.0 for c in CLASSES}
    for ph in (fwd, bwd):
        for cls, s in ph.by_class_s.items():
            by_class[cls] += s * accum
    for cls, s in opt.by_class_s.items():
        by_class[cls] += s * (opt_device_s / opt.device_s if opt.device_s else 1.0)
    launch_wait_s = (micro_s - micro_device_s) * accum + (opt_s - opt_device_s)
    by_class["launch"] = launch_wait_s

    comm_s = overhead_s = 0.0
    if count > 1 and wl.is_training and trace.trainable_param_count > 0:
        # Gradients are all-reduced once per step (no_sync on the other micro-steps). The collectives overlap
        # each phase's wall time: a launch-bound backward lasts as long as the host takes to issue it, and NCCL's
        # stream runs in its gaps. The forward's wall is its GPU time and issue time composed as the micro-step
        # composes them (no longer than the micro-step), the backward the rest of the micro-step: the
        # collectives end no later on a faster GPU, and the step (forward, the later of the backward and its
        # collectives, the optimizer) is never longer.
        forward_wall_s = min(smooth_max(fwd.device_s, fwd.host_s), micro_s)
        comm = data_parallel_comm(
            sharding=wl.sharding, count=count, gpu=gpu,
            grad_bytes=trace.trainable_param_count * wl.precision_value.master_bytes,
            param_bytes=trace.param_count * wl.precision_value.activation_bytes,
            forward_s=forward_wall_s, backward_s=micro_s - forward_wall_s, micro_steps=accum,
            gradients=gradients_from_trace(trace, [max(t.device_s, t.host_s) for t in phases["backward"]]),
            topology=topology,
        )
        one_gpu_compute_s = micro_s * accum + smooth_max(opt.device_s, opt.host_s)
        parts = weak_scaling_parts(comm.exposed_s, compute_s, one_gpu_compute_s)
        comm_s, overhead_s = parts.communication_s, parts.sharding_overhead_s
        warnings.extend(comm.notes)

    samples = trace.samples_per_step * accum * count
    host_total = micro_host_s * accum + opt.host_s
    device_total = micro_device_s * accum + opt_device_s
    pace = StepPace(
        gpus_s=compute_s + comm_s + overhead_s, communication_s=comm_s, host_s=host_total, device_s=device_total,
        kernels=fwd.kernels + bwd.kernels + opt.kernels, compiled=stack.compile,
        device_bound=("compute" if fwd.compute_bound_s + bwd.compute_bound_s >= fwd.memory_bound_s + bwd.memory_bound_s
                      else "memory"),
        data_s=trace.samples_per_step * accum / stack.input_rate if stack.input_rate else None,
        input_words=stack.describe_input() if stack.input_rate else "",
        samples_per_step=trace.samples_per_step * accum,
        image_side_px=image_side(wl) if wl.is_training and not stack.input_rate else None,
        frames_per_sample=trace.frames_per_sample,
    )
    bound, step_s, pace_warnings = step_pace(pace)
    warnings.extend(pace_warnings)
    warnings.extend(_precision_warnings(precision, gpu))
    if getattr(trace, "control_flow_reads", 0):     # the model's own branches read tensor values (an early exit):
        regime = "data-dependent"                    # the traced path may be far from a real one, on any GPU count
    elif getattr(trace, "upper_bound_ops", 0):     # data-dependent ops traced at their upper bound
        regime = "data-dependent"
    elif getattr(trace, "rnn_modules", 0):          # LSTM / GRU: cuDNN's fused RNN, no measured run
        regime = "rnn"
    elif is_mig_slice(gpu):                          # a slice's rates scaled from the whole GPU's: no measured run
        regime = "mig"
    elif host_total >= SMALL_BATCH_HOST_SHARE * device_total:     # compiled or not: the host shapes the step
        regime = "small-batch"
    elif stack.compile:     # timm's -dynamo runs: big-batch compiled inference of CNNs / ViTs on whole GPUs
        regime = "compiled-train" if wl.is_training else "compiled"
    else:
        regime = "large-batch"
    if regime == "large-batch" and count > 1 and wl.is_training:
        # only a step that is big-batch eager on one GPU is what the multi-GPU runs measure; a compiled, small-batch,
        # RNN, MIG or data-dependent one keeps its own regime (no range) on any count
        regime = multi_gpu_regime(effective_sharding(wl), count, (topology or topology_for(gpu)).gpus_per_node)
    return StepTime(
        gpu=gpu.id, count=count, step_time_s=step_s, samples_per_s=samples / step_s if step_s else 0.0,
        by_class_s=by_class, bound=bound, compute_s=compute_s, communication_s=comm_s,
        sharding_overhead_s=overhead_s, warnings=tuple(warnings), micro_step_s=micro_s, optimizer_s=opt_s,
        kernel_launches=(fwd.kernels + bwd.kernels) * accum + opt.kernels, stack=stack.describe(),
        host_s=host_total, device_s=device_total, regime=regime, pace=pace,
    )


def step_pace(pace: StepPace) -> tuple[str, float, list[str]]:
    """(bound, step time, pace warnings) of a step: the one home of the rule, for the shipped step
    (``predict_step_time``) and a calibrated one (``gpuwise.calibrate.apply``). Loader workers prefetch while the
    GPU computes, so the step takes the longer of the two ("input"); else "communication" where the collectives
    are most of it; else the host's side where it is longer than the GPU's busy time ("host" where a calibrated
    host term is most of it, "launch" where the issue time is); else what the kernels lean on. A vision training
    job on synthetic data is told what real JPEGs would take where that is more than a rented GPU's cores."""
    warnings: list[str] = []
    step_s = pace.gpus_s
    input_bound = pace.data_s is not None and pace.data_s > pace.gpus_s
    if input_bound:
        warnings.append(
            f"data-bound: the {pace.input_words} per GPU, {pace.data_s * 1e3:.1f} ms per step where the GPU needs "
            f"{pace.gpus_s * 1e3:.1f} ms; more loader workers or faster decoding would help more than a faster GPU")
        step_s = pace.data_s
    elif pace.image_side_px is not None and pace.data_s is None and step_s > 0:
        warning = decoding_warning(pace.samples_per_step / step_s, pace.image_side_px, pace.frames_per_sample)
        if warning:
            warnings.append(warning)
    issue_s = pace.host_s - pace.host_term_s
    if input_bound:
        bound = "input"
    elif pace.communication_s > 0.5 * step_s:
        bound = "communication"
    elif pace.host_s > pace.device_s and pace.host_term_s > issue_s:
        bound = "host"
        warnings.append(
            f"host-bound: your runs' host time beside the kernels' issue (data loading, Python between steps: "
            f"~{pace.host_term_s * 1e3:.1f} ms per step, with ~{issue_s * 1e3:.1f} ms to issue the kernels) is more "
            f"than the {pace.device_s * 1e3:.1f} ms the GPU is busy; a faster host loop would help more than a "
            f"faster GPU")
    elif pace.host_s > pace.device_s:
        bound = "launch"
        remedies = "a bigger batch or CUDA graphs" if pace.compiled else "a bigger batch, CUDA graphs or torch.compile"
        beside = (f" (and ~{pace.host_term_s * 1e3:.1f} ms of your runs' other host time)"
                  if pace.host_term_s * 1e3 >= 0.05 else "")
        warnings.append(
            f"launch-bound: {'the compiled step' if pace.compiled else 'eager PyTorch'} needs "
            f"~{issue_s * 1e3:.1f} ms of host time to issue {pace.kernels} kernels per step{beside}, more than the "
            f"{pace.device_s * 1e3:.1f} ms the GPU is busy; {remedies} would help more than a faster GPU"
        )
    else:
        bound = pace.device_bound
    return bound, step_s, warnings


def _precision_warnings(precision: str, gpu) -> list[str]:
    warning = fallback_warning(gpu, precision)
    if warning and parse(precision).needs_bf16:
        warning += f"; use --precision {parse(precision).fp16_twin.name} on this GPU"
    return [warning] if warning else []
