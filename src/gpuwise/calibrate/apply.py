"""Applying a calibration to an estimate: the one place a prediction is corrected by measured runs.

The step's device classes are multiplied by that GPU's class factors, its host issue time by the ``launch``
factor, the host term joins the host's side, and the two sides compose as the step model composes them
(``fit.compose``: a smooth maximum, so a GPU-bound step hides the host term behind its kernels). The host
term's visible share is its own class ("host"), the wait for the host is "launch"; step time and
throughput follow (``by_class_s`` still sums to ``compute_s``). The memory total (what nvidia-smi shows)
moves by the stack's offset when one was measured. Only classes the runs gave evidence for are scaled
(``fit`` module docstring); ``describe`` says which, from how many runs, and warns when most of the job's
step lies in classes the runs never carried. ``correction`` is what the CLI passes to
``plan.profile.model_for``: every estimate of that model is corrected, no other.

A GPU without a calibration of its own carries the step-time correction of the one with the most runs
(``carried_calibration``): a comparison across GPUs (recommend's ranking, estimate ``--gpu all``, report's
right-sizing) would otherwise set the user's stack, measured on one GPU, against the shipped model on every
other, and rank a cut-down card ahead of the one measured. Memory is not carried (a CUDA context is the GPU's
and the driver's). How far a carried calibration helps is measured, not assumed: benchmarks/README.md,
fifteenth session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from gpuwise.calibrate.fit import HOST, LAUNCH, MIN_CLASS_SHARE, SHOWN_HOST_S, GpuCalibration, class_key
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan.profile import Estimate
from gpuwise.runtime.model import StepTime

HOST_CLASS = HOST


def corrected_time(step: StepTime, cal: GpuCalibration, precision, gpu) -> StepTime:
    """``precision`` on ``gpu``: each class is scaled by its factor at the peak it runs at (``class_key``)."""
    new = cal.compose(step.by_class_s, step.host_s, lambda c: class_key(c, precision, gpu))
    by_class = new.by_class_s
    old_classes_s = sum(step.by_class_s.values())
    new_classes_s = new.compute_s
    other_s = step.step_time_s - old_classes_s            # communication, input wait: not corrected
    step_s = new_classes_s + other_s
    if step.bound == "input":                            # the loader's pace holds unless the GPU is slower
        step_s = max(step.step_time_s, new_classes_s + step.communication_s + step.sharding_overhead_s)
    ratio = new_classes_s / old_classes_s if old_classes_s > 0 else 1.0
    old_device_s = sum(s for c, s in step.by_class_s.items() if c not in (LAUNCH, HOST))
    samples_per_step = step.samples_per_s * step.step_time_s
    bound = step.bound
    if step.bound not in ("input", "communication") and new.host_side_s > new.device_s:
        # the host paces the step; "host" where your runs' host term is most of the host's side, else the issue
        issue_s = new.host_side_s - max(cal.host_s, 0.0)
        bound = "host" if cal.host_s > issue_s else "launch"
    return replace(
        step, by_class_s=by_class, step_time_s=step_s, bound=bound, compute_s=step.compute_s - old_classes_s + new_classes_s,
        samples_per_s=samples_per_step / step_s if step_s > 0 else 0.0,
        micro_step_s=step.micro_step_s * ratio, optimizer_s=step.optimizer_s * ratio,
        host_s=new.host_side_s if step.host_s > 0 or cal.host_s > 0 else step.host_s,
        device_s=step.device_s * (new.device_s / old_device_s) if old_device_s > 0 else step.device_s,
        stack=f"{step.stack}; {cal.label}" if step.stack else cal.label,
    )


def corrected_memory(memory: MemoryEstimate, cal: GpuCalibration) -> MemoryEstimate:
    if not cal.memory_offset_bytes:                        # None: not measured; 0: nothing to move
        return memory
    offset = cal.memory_offset_bytes
    total = max(memory.peak_reserved_bytes, memory.total_bytes + offset)
    note = f"CUDA context and workspaces {offset / 2**20:+.0f} MiB as measured on your stack ({cal.label})"
    return replace(memory, total_bytes=total, notes=(*memory.notes, note))


def describe(step: StepTime | None, cal: GpuCalibration, precision, gpu) -> str:
    """What the calibration did to this job, in words (estimate's and report's calibration line):
    "calibrated with 1 of your runs on X: scaled launch ×1.02 (1% of this step), host +9.30 ms beside the
    kernels' issue (adds 0.46 ms to this step: the GPU's work hides the rest); conv/fp16, norm/fp16,
    elementwise/fp16 (93% of this step) never seen in that run: the shipped model there"."""
    runs = "that run" if len(cal.runs) == 1 else f"those {len(cal.runs)} runs"
    if step is None:
        return cal.label
    total = sum(step.by_class_s.values())
    keyed = {class_key(c, precision, gpu): s for c, s in step.by_class_s.items() if s > 0}
    scaled = {k: s for k, s in keyed.items() if k in cal.class_factors}
    unseen = {k: s for k, s in keyed.items() if k not in cal.class_factors}
    def share(d: dict) -> str:
        x = sum(d.values()) / total if total > 0 else 0.0
        return "<1%" if 0 < x < 0.005 else f"{x:.0%}"

    parts = [f"{k} ×{cal.factor(k):.2f}" for k in sorted(scaled, key=lambda k: -scaled[k])]
    text = f"{cal.label}: scaled " + (", ".join(parts) + f" ({share(scaled)} of this step)" if parts else "no class of this job")
    # the host term is said where what it adds to this step shows at the printed precision (0.01 ms and up): a
    # 5 µs term read "host +0.01 ms … (adds 0.00 ms to this step …)", noise in both figures
    visible_s = cal.compose(step.by_class_s, step.host_s, lambda c: class_key(c, precision, gpu)).by_class_s.get(HOST, 0.0)
    if visible_s >= SHOWN_HOST_S:                        # never more than the term itself
        hidden = ": the GPU's work hides the rest" if visible_s < 0.5 * cal.host_s else ""
        text += f", host +{cal.host_s * 1e3:.2f} ms beside the kernels' issue (adds {visible_s * 1e3:.2f} ms to this step{hidden})"
    dominant = [k for k in sorted(unseen, key=lambda k: -unseen[k]) if total > 0 and unseen[k] >= MIN_CLASS_SHARE * total]
    if dominant:
        text += (f"; {', '.join(dominant)} ({share(unseen)} of this step) never seen in {runs}: "
                 "the shipped model there")
    return text


def corrected(est: Estimate, cal: GpuCalibration) -> Estimate:
    on = (est.workload.precision, est.gpu)
    time = corrected_time(est.time, cal, *on) if est.time is not None else None
    return replace(est, time=time, memory=corrected_memory(est.memory, cal), calibration=describe(est.time, cal, *on))


def carried(est: Estimate, cal: GpuCalibration) -> Estimate:
    """``est`` on a GPU with no calibration of its own under ``cal``'s step-time correction (memory as shipped)."""
    if est.time is None:
        return est
    on = (est.workload.precision, est.gpu)
    text = f"carried to {est.gpu.id}, which none of your runs measured: {describe(est.time, cal, *on)}"
    return replace(est, time=corrected_time(est.time, cal, *on), calibration=text,
                   calibration_carried_from=cal.gpu)


def carried_calibration(calibrations: Mapping[str, GpuCalibration]) -> GpuCalibration | None:
    """The calibration a GPU without one carries: the one fitted on the most runs (then the newest fit, then the
    GPU id, so the choice never depends on the file's order); None without any."""
    if not calibrations:
        return None
    return max(calibrations.values(), key=lambda c: (len(c.runs), c.fitted, c.gpu))


def correction(calibrations: Mapping[str, GpuCalibration]) -> Callable[[Estimate], Estimate] | None:
    """Estimate -> Estimate: corrected by the GPU's own calibration, or carrying ``carried_calibration``'s where
    it has none (None when there is no calibration at all)."""
    fallback = carried_calibration(calibrations)
    if fallback is None:
        return None

    def correct(est: Estimate) -> Estimate:
        if est.gpu is None:
            return est
        own = calibrations.get(est.gpu.id)
        return corrected(est, own) if own is not None else carried(est, fallback)

    return correct
