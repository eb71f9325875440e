"""Applying a calibration to an estimate: the one place a prediction is corrected by measured runs.

The step's device classes are multiplied by that GPU's class factors, its host issue time by the ``launch``
factor, the host term joins the host's side, and the two sides compose as the step model composes them
(``step.compose``: a smooth maximum, so a GPU-bound step hides the host term behind its kernels). The host
term's visible share is its own class ("host"), the wait for the host is "launch"; step time and
throughput follow (``by_class_s`` still sums to ``compute_s``). The memory total (what nvidia-smi shows)
moves by the stack's offset when one was measured, and is never under what a run of that very job (``job_key``)
measured of its own memory on that GPU. Only classes the runs gave evidence for are scaled
(``evidence`` module docstring); ``describe`` says which, from how many runs, and warns when most of the job's
step lies in classes the runs never carried. ``correction`` is what the CLI passes to
``plan.profile.model_for``: every estimate of that model is corrected, no other.

A GPU without a calibration of its own carries the step-time correction of the closest calibrated GPU (one chip,
then one architecture), then the one with the most runs (``carried_calibration``): a comparison across GPUs (recommend's ranking, estimate ``--gpu all``, report's
right-sizing) would otherwise set the user's stack, measured on one GPU, against the shipped model on every
other, and rank a cut-down card ahead of the one measured. Memory is not carried (a CUDA context is the GPU's
and the driver's). How far a carried calibration helps is measured, not assumed: benchmarks/README.md,
fifteenth session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from gpuwise.calibrate.calibration import SHOWN_HOST_S, GpuCalibration, duration_text, factor_text
from gpuwise.calibrate.evidence import MIN_CLASS_SHARE, job_key
from gpuwise.calibrate.step import HOST, OFFLOAD, CalibratedStep, class_key, on_device
from gpuwise.catalog import GPU, Catalog, load_catalog
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan.profile import Estimate
from gpuwise.runtime.model import StepPace, StepTime
from gpuwise.runtime.predict import step_pace
from gpuwise.workload import Workload

HOST_CLASS = HOST


def corrected_time(step: StepTime, cal: GpuCalibration, precision, gpu) -> StepTime:
    """``precision`` on ``gpu``: each class is scaled by its factor at the peak it runs at (``class_key``). The bound
    and the pace warnings (launch-, host-, data-bound, JPEG decoding) follow from the calibrated figures by the
    shipped step's own rule (``runtime.predict.step_pace``); the other warnings stay as they were."""
    new = cal.compose(step.by_class_s, step.host_s, lambda c: class_key(c, precision, gpu))
    old_classes_s = sum(step.by_class_s.values())
    micro_step_s, optimizer_s = _calibrated_phases_s(step, new)
    old_device_s = sum(s for c, s in step.by_class_s.items() if on_device(c))
    device_s = step.device_s * (new.device_s / old_device_s) if old_device_s > 0 else step.device_s
    host_s = new.host_side_s if step.host_s > 0 or cal.host_s > 0 else step.host_s
    compute_s = step.compute_s - old_classes_s + new.compute_s
    pace = (replace(step.pace, gpus_s=compute_s + step.communication_s + step.sharding_overhead_s, host_s=host_s,
                    device_s=device_s, host_term_s=max(cal.host_s, 0.0)) if step.pace is not None else None)
    bound, step_s, warnings = _calibrated_pace(step, pace, new.compute_s)
    samples_per_step = step.samples_per_s * step.step_time_s
    return replace(
        step, by_class_s=new.by_class_s, step_time_s=step_s, bound=bound, compute_s=compute_s, warnings=warnings,
        samples_per_s=samples_per_step / step_s if step_s > 0 else 0.0,
        micro_step_s=micro_step_s, optimizer_s=optimizer_s, host_s=host_s, device_s=device_s,
        stack=f"{step.stack}; {cal.label}" if step.stack else cal.label, pace=pace,
    )


def _calibrated_phases_s(step: StepTime, new: CalibratedStep) -> tuple[float, float]:
    """(micro_step_s, optimizer_s) of ``step`` calibrated to ``new``: each phase's seconds in the offload part (an
    offloaded step's CPU optimizer step, all of it, and the weights' PCIe copies of the micro-steps) follow that
    part's calibration, its other seconds the GPU's part (the device classes, the wait for the host, the host term)."""
    old_offload_s = float(step.by_class_s.get(OFFLOAD, 0.0))
    old_gpu_s = sum(step.by_class_s.values()) - old_offload_s
    gpu_ratio = _ratio(new.compute_s - new.by_class_s.get(OFFLOAD, 0.0), old_gpu_s)
    offload_ratio = _ratio(new.by_class_s.get(OFFLOAD, 0.0), old_offload_s)
    optimizer_offload_s = step.optimizer_s if old_offload_s > 0 else 0.0   # offloaded: the CPU's (runtime.llm)
    optimizer_gpu_s = step.optimizer_s - optimizer_offload_s
    micro_offload_s = max(0.0, old_offload_s - optimizer_offload_s)          # every micro-step's, together
    micro_gpu_s = max(0.0, old_gpu_s - optimizer_gpu_s)
    micro_ratio = _ratio(micro_gpu_s * gpu_ratio + micro_offload_s * offload_ratio, micro_gpu_s + micro_offload_s)
    return (step.micro_step_s * micro_ratio,
            optimizer_gpu_s * gpu_ratio + optimizer_offload_s * offload_ratio)


def _ratio(new_s: float, old_s: float) -> float:
    """``new_s / old_s``; 1 (as shipped) where there was nothing."""
    return new_s / old_s if old_s > 0 else 1.0


def _calibrated_pace(step: StepTime, pace: StepPace | None,
                     new_classes_s: float) -> tuple[str, float, tuple[str, ...]]:
    """(bound, step time, warnings) of ``step`` calibrated to ``pace`` (its classes at ``new_classes_s``): the shipped
    step's pace rule on the calibrated figures, its pace warnings replaced in place (the others kept), and a bound
    the step's own model set beyond that rule (the LLM closed form's offload and links) kept. A step that keeps no
    pace (a serving request batch, whose phases no run calibrates) keeps its bound and warnings; its loader's pace
    holds unless the GPU is slower."""
    if pace is None:
        other_s = step.step_time_s - sum(step.by_class_s.values())   # communication, input wait: not corrected
        step_s = new_classes_s + other_s
        if step.bound == "input":
            step_s = max(step.step_time_s, new_classes_s + step.communication_s + step.sharding_overhead_s)
        return step.bound, step_s, tuple(step.warnings)
    bound, step_s, fresh = step_pace(pace)
    old_bound, _old_s, stale = step_pace(step.pace)
    kept = [w for w in step.warnings if w not in stale]
    at = next((i for i, w in enumerate(step.warnings) if w in stale), len(step.warnings))   # where the pace's were
    return (step.bound if step.bound != old_bound else bound), step_s, tuple(kept[:at] + fresh + kept[at:])


def corrected_memory(memory: MemoryEstimate, cal: GpuCalibration, measured_peak_bytes: int | None = None) -> MemoryEstimate:
    """The nvidia-smi total moved by the stack's offset (when measured), and never below ``measured_peak_bytes``, the
    most a run of this very job measured of its own memory on this GPU (``same_job_peak_bytes``): the offset covers
    only what the allocator does not hold, so a job whose allocator held more than predicted would otherwise be
    estimated under what it was seen to take (and a negative offset pushed it further under)."""
    notes = list(memory.notes)
    total = memory.total_bytes
    if cal.memory_offset_bytes:                            # None: not measured; 0: nothing to move
        offset = cal.memory_offset_bytes
        total = max(memory.peak_reserved_bytes, total + offset)
        notes.append(f"CUDA context and workspaces {offset / 2**20:+.0f} MiB as measured on your stack ({cal.label})")
    if measured_peak_bytes is not None and measured_peak_bytes > total:
        total = measured_peak_bytes
        notes.append(f"total raised to {measured_peak_bytes / 2**30:.2f} GiB, the most a run of this job measured on "
                     f"{cal.gpu} ({cal.label})")
    return memory if total == memory.total_bytes else replace(memory, total_bytes=total, notes=tuple(notes))


def same_job_peak_bytes(workload: Workload, cal: GpuCalibration) -> int | None:
    """The most memory of its own (``FitRow.measured_peak_bytes``) a run of ``cal`` measured whose job is ``workload``
    (``evidence.job_key``: the same workload record, memory-only fields included); None when no such run measured
    memory (a run stored without its job's key is none)."""
    key = job_key(workload)
    peaks = [r.measured_peak_bytes for r in cal.runs if r.measured_peak_bytes is not None and r.job_key == key]
    return max(peaks) if peaks else None


def describe(step: StepTime | None, cal: GpuCalibration, precision, gpu) -> str:
    """What the calibration did to this job, in words (estimate's and report's calibration line):
    "calibrated with 1 of your runs on X: scaled launch ×1.03 (<1% of this step), host +2.54 ms beside the
    kernels' issue (adds 0.17 ms to this step: the GPU's work hides the rest); this step 36.2 ms shipped → 36.4 ms
    calibrated; conv/fp16, norm/fp16, elementwise/fp16 (91% of this step) never seen in that run: the shipped model
    there"."""
    runs = "that run" if len(cal.runs) == 1 else f"those {len(cal.runs)} runs"
    if step is None:
        return cal.label
    total = sum(step.by_class_s.values())
    keyed = {class_key(c, precision, gpu): s for c, s in step.by_class_s.items() if s > 0}
    scaled = {k: s for k, s in keyed.items() if k in cal.scaled_factors}      # one fitted at ×1.00 is as shipped
    unseen = {k: s for k, s in keyed.items() if k not in cal.class_factors}
    def share(d: dict) -> str:
        x = sum(d.values()) / total if total > 0 else 0.0
        return "<1%" if 0 < x < 0.005 else f"{x:.0%}"

    parts = [f"{k} {factor_text(cal.factor(k))}" for k in sorted(scaled, key=lambda k: -scaled[k])]
    text = f"{cal.label}: scaled " + (", ".join(parts) + f" ({share(scaled)} of this step)" if parts else "no class of this job")
    # the host term is said where what it adds to this step shows at the printed precision (0.01 ms and up): a
    # 5 µs term read "host +0.01 ms … (adds 0.00 ms to this step …)", noise in both figures
    visible_s = cal.compose(step.by_class_s, step.host_s, lambda c: class_key(c, precision, gpu)).by_class_s.get(HOST, 0.0)
    if visible_s >= SHOWN_HOST_S:                        # never more than the term itself
        hidden = ": the GPU's work hides the rest" if visible_s < 0.5 * cal.host_s else ""
        text += f", host +{cal.host_s * 1e3:.2f} ms beside the kernels' issue (adds {visible_s * 1e3:.2f} ms to this step{hidden})"
    text += f"; {net_change_text(step.step_time_s, corrected_time(step, cal, precision, gpu).step_time_s)}"
    dominant = [k for k in sorted(unseen, key=lambda k: -unseen[k]) if total > 0 and unseen[k] >= MIN_CLASS_SHARE * total]
    if dominant:
        text += (f"; {', '.join(dominant)} ({share({k: unseen[k] for k in dominant})} of this step) never seen in {runs}: "
                 "the shipped model there")
    return text + disagreement_text(cal)


def net_change_text(shipped_s: float, calibrated_s: float) -> str:
    """What a calibration did to a step in all, as said: "this step 19.3 ms shipped → 36.1 ms calibrated"."""
    return f"this step {duration_text(shipped_s)} shipped → {duration_text(calibrated_s)} calibrated"


def disagreement_text(cal: GpuCalibration) -> str:
    """"; runs of one workload measured 36 ms and 68 ms (1.89x apart): the fit lands between them (…)" where the
    calibration's runs disagree (``GpuCalibration.disagreeing``); "" where they do not."""
    groups = cal.disagreeing
    if not groups:
        return ""
    said = "; ".join(" and ".join(duration_text(r.measured_step_time_s) for r in group)
                     + f" ({group[-1].measured_step_time_s / group[0].measured_step_time_s:.2f}x apart)"
                     for group in groups)
    return (f"; runs of one workload measured {said}: the fit lands between them (`gpuwise calibrate` lists them, "
            "--forget FINGERPRINT drops the wrong one)")


def corrected(est: Estimate, cal: GpuCalibration) -> Estimate:
    on = (est.workload.precision, est.gpu)
    time = corrected_time(est.time, cal, *on) if est.time is not None else None
    return replace(est, time=time, memory=corrected_memory(est.memory, cal, same_job_peak_bytes(est.workload, cal)),
                   calibration=describe(est.time, cal, *on))


def carried(est: Estimate, cal: GpuCalibration) -> Estimate:
    """``est`` on a GPU with no calibration of its own under ``cal``'s step-time correction (memory as shipped)."""
    if est.time is None:
        return est
    on = (est.workload.precision, est.gpu)
    text = f"carried to {est.gpu.id}, which none of your runs measured: {describe(est.time, cal, *on)}"
    return replace(est, time=corrected_time(est.time, cal, *on), calibration=text,
                   calibration_carried_from=cal.gpu)


def chip(gpu: GPU, gpus: Mapping[str, GPU]) -> str:
    """The GPU a variant is of (``based_on``, followed to the GPU of its own), else the GPU itself: its catalog id."""
    seen = {gpu.id}
    while gpu.based_on and gpu.based_on in gpus and gpu.based_on not in seen:
        gpu = gpus[gpu.based_on]
        seen.add(gpu.id)
    return gpu.id


def closeness(gpu: GPU | None, calibrated: GPU | None, gpus: Mapping[str, GPU]) -> int:
    """How near a calibrated GPU is to ``gpu``, for what it carries: 3 one chip (a variant of it, or its base), 2 one
    architecture at one compute capability (the A100s' forms and memory sizes, H100 and H800), 1 one architecture,
    0 another (or either unknown)."""
    if gpu is None or calibrated is None:
        return 0
    if chip(gpu, gpus) == chip(calibrated, gpus):
        return 3
    if gpu.arch != calibrated.arch:
        return 0
    return 2 if gpu.compute_capability == calibrated.compute_capability else 1


def carried_calibration(calibrations: Mapping[str, GpuCalibration], gpu: GPU | None = None,
                        catalog: Catalog | None = None) -> GpuCalibration | None:
    """The calibration ``gpu`` (one without its own) carries: the one of the closest calibrated GPU (``closeness``:
    one chip, then one architecture), then the one fitted on the most runs, then the newest fit, then the GPU id,
    so the choice never depends on the file's order; None without any. ``gpu`` None: the closest to none (runs,
    then the newest). ``catalog`` names the calibrated GPUs (None: the shipped one)."""
    if not calibrations:
        return None
    gpus = {g.id: g for g in (catalog or load_catalog(None)).gpus} if gpu is not None else {}
    return max(calibrations.values(),
               key=lambda c: (closeness(gpu, gpus.get(c.gpu), gpus), len(c.runs), c.fitted, c.gpu))


def correction(calibrations: Mapping[str, GpuCalibration],
               catalog: Catalog | None = None) -> Callable[[Estimate], Estimate] | None:
    """Estimate -> Estimate: corrected by the GPU's own calibration, or carrying ``carried_calibration``'s where
    it has none (None when there is no calibration at all). ``catalog``: the one the calibrated GPUs are in (None:
    the shipped one)."""
    if not calibrations:
        return None
    cat = catalog or load_catalog(None)

    def correct(est: Estimate) -> Estimate:
        if est.gpu is None:
            return est
        own = calibrations.get(est.gpu.id)
        return corrected(est, own) if own is not None else carried(est, carried_calibration(calibrations, est.gpu, cat))

    return correct


class Refusing:
    """The correction of a calibration file that cannot be read: it raises ``error`` where a command applies it (an
    estimate), so a command that never does (a report of a log without a workload) goes on; ``applied`` says whether
    one did (the CLI then says the error alone, not a warning as well)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.applied = False

    def __call__(self, est: Estimate) -> Estimate:
        self.applied = True
        raise self.error
