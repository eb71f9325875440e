"""A calibration in words, as ``gpuwise calibrate`` prints it: what was fitted (``describe``) and the runs it was
fitted on, newest last, each with its fingerprint (what ``--forget`` takes) and how far the fit is from it
(``describe_runs``)."""

from __future__ import annotations

from gpuwise.calibrate.calibration import (
    SHOWN_HOST_S,
    UNREPRODUCED_RATIO,
    GpuCalibration,
    duration_text,
    error_text,
    factor_text,
)
from gpuwise.calibrate.evidence import MIN_CLASS_SHARE
from gpuwise.calibrate.step import MEMORY_FIGURES


def host_text(cal: GpuCalibration) -> str:
    """The host term, and where it shows: only in a step whose kernels take less than the host's side (a
    GPU-bound step hides it), so never "hidden" without saying behind what. A term that set the pace of none of
    its runs is not what explains them (their kernels did: the fit's smooth maximum left it a sliver), so it is
    said as no host time, with its size beside."""
    if cal.host_s < SHOWN_HOST_S:
        return "no host time beside the kernels' issue"
    steps = [cal.compose(r.predicted_by_class_s, r.predicted_host_s) for r in cal.runs]
    paced = sum(1 for s in steps if s.host_side_s > s.device_s)
    if paced == 0:
        return (f"no host time beside the kernels' issue that set the pace of any of its {len(steps)} run(s) (a host "
                f"term of {duration_text(cal.host_s)} per step, hidden behind their kernels)")
    return (f"host +{cal.host_s * 1e3:.2f} ms per step beside the kernels' issue (hidden in a step whose kernels "
            f"take longer than the host's side; it set the pace of {paced} of its {len(steps)} run(s))")


# How a run records each memory figure (step.MEMORY_FIGURES; docs/calibrate.md, section 1)
RECORD_MEMORY = {"peak_reserved_bytes": "`gpuwise run --torch-hook` or the guard on CUDA records it",
                 "process_memory_bytes": "`gpuwise run` records it, sampling the GPU through the NVIDIA driver"}


def memory_text(cal: GpuCalibration) -> str:
    """The memory offset, or why there is none: which figure the runs lacked and how to record it."""
    if cal.memory_offset_bytes is not None:
        return f"{cal.memory_offset_bytes / 2**20:+.0f} MiB"
    lacked = {k for r in cal.runs for k in r.unmeasured_memory}
    if len(lacked) == 1:
        [missing] = lacked
        [had] = [MEMORY_FIGURES[k] for k in MEMORY_FIGURES if k != missing]
        return (f"not measured: your runs recorded {had} but not {MEMORY_FIGURES[missing]}, which the offset needs: "
                f"{RECORD_MEMORY[missing]} (docs/calibrate.md, section 1)")
    return (f"not measured (no run recorded both {' and '.join(MEMORY_FIGURES.values())}: `gpuwise run "
            "--torch-hook` on a GPU records both)")


def describe(cal: GpuCalibration) -> str:
    """One paragraph: the factors, the host term, the memory offset, and the runs the fit does not reproduce."""
    memory = memory_text(cal)
    off = cal.unreproduced
    caveat = (f"; {len(off)} of its runs not reproduced (calibrated more than {UNREPRODUCED_RATIO:g}x off): "
              f"{', '.join(off)}" if off else "")
    unchanged = (f"{', '.join(cal.unchanged_classes)} fitted at {factor_text(1.0)}: as shipped; "
                 if cal.unchanged_classes else "")
    mixed = (f"; its runs measured {len(cal.stacks)} stacks ({'; '.join(cal.stacks)}), mixed in one fit: "
             "--forget the runs of one you left behind" if cal.stacks else "")
    return (f"{cal.label}: step time factors {cal.scaled_text or 'none'} ({unchanged}classes under "
            f"{MIN_CLASS_SHARE:.0%} of every run's predicted step, and classes no run exercised: the shipped model), "
            f"{host_text(cal)}, memory outside the allocator {memory}{caveat}{mixed}")


def describe_runs(cal: GpuCalibration) -> list[str]:
    """One line per run, newest last: fingerprint, measured, calibrated and shipped step time."""
    return [f"  run {r['fingerprint']}: measured {duration_text(r['measured_step_time_s'])}, calibrated "
            f"{duration_text(r['calibrated_step_time_s'])} ({error_text(r['error'])}"
            f"{'' if r['reproduced'] else ', not reproduced'}), shipped {duration_text(r['shipped_step_time_s'])}"
            for r in cal.run_step_times()]
