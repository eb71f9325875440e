"""What the runs on one GPU give evidence for, the one rule the fit and a reloaded calibration file (``store``)
share.

A factor applies only to a class the runs give evidence for (``fitted_classes``): one that carried at least
``MIN_CLASS_SHARE`` (5 %) of at least one run's predicted step time, and ``launch`` also where a run measured less
than the host's side alone allows (``faster_than_host_side``: only a faster host issue reproduces it, however small
the wait for the host was). Every other class, above all one no run exercised (another operator or another
precision: ``conv/fp16`` after fp32 MLP runs), keeps the shipped model (factor 1). Why 5 %: a class below it moves
no run's predicted step by more than 5 % × (f − 1), which the measured medians (a few % apart run to run) cannot
tell from the other classes' factors, so the fit's value for it is only the common scale ``g`` of the classes that
did carry the runs. ``g`` is reported, never applied to an unseen class: a slow 3 ms host-bound MLP says nothing of
a ResNet's convolutions (it once turned a 36 ms ResNet-50 step into 169 ms).

Runs of one workload (``same_workload``) whose measured steps disagree by more than ``SAME_WORKLOAD_TOLERANCE``
are evidence that one of them measured something else (``same_workload_disagreements``). Runs of one job for its
memory are told apart by the job itself (``job_key``), not by the prediction: much that changes memory changes no
step time (vLLM's ``gpu_memory_utilization``, its KV cache's dtype).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from gpuwise.calibrate.step import LAUNCH, OFFLOAD, FitRow, shipped_sides
from gpuwise.workload import Workload

MIN_CLASS_SHARE = 0.05         # a factor needs this share of one run's predicted step (module docstring)
# The parts of a run's stack that set its kernels' speed: runs that differ in them measured two stacks (a torch upgrade
# changes kernels and their launch path; the driver alone seldom does)
KERNEL_STACK = ("torch", "cuda")
# A workload record's fields that say who chose another field (the default rule or the user: ``precision_default``),
# not what the job is: left out of ``job_key``
CHOSEN_BY_SUFFIX = "_default"
# Runs with the same shipped prediction (the same workload on the same GPU, as far as the fit can see) whose
# measured steps differ by more than this share of the faster one disagree: measured medians of one job on one
# GPU are a few % apart run to run; beyond 25 % one of them measured something else, and the fit lands between.
SAME_WORKLOAD_TOLERANCE = 0.25


def faster_than_host_side(row: FitRow) -> bool:
    """Whether ``row`` measured less than its host's side alone allows (the issue time, with the step's excess, and
    what runs in series with it): no device factor reproduces it, only a faster issue (``launch``'s factor)."""
    sides = shipped_sides(row)
    host_side_s = (sides.issue_s * (1 + sides.excess) + row.predicted_other_s
                   + row.predicted_by_class_s.get(OFFLOAD, 0.0))
    return sides.issue_s > 0 and row.measured_step_time_s < host_side_s


def fitted_classes(rows: Sequence[FitRow]) -> set[str]:
    """The classes a fit of ``rows`` gives a factor, the one rule the fit and a reloaded file (``store``) share: those
    with evidence (``supported_classes``), and ``launch`` where some run was faster than its host's side alone."""
    kept = supported_classes(rows)
    if any(faster_than_host_side(r) for r in rows):
        kept.add(LAUNCH)
    return kept


def supported_classes(rows: Sequence[FitRow]) -> set[str]:
    """Classes with evidence: at least ``MIN_CLASS_SHARE`` of some run's predicted step time."""
    out = set()
    for r in rows:
        total = r.predicted_step_time_s
        if total > 0:
            out |= {c for c, s in r.predicted_by_class_s.items() if s >= MIN_CLASS_SHARE * total}
    return out


def same_workload(row: FitRow) -> tuple:
    """What tells runs of one workload apart on one GPU for the fit without its name (never stored): the shipped
    prediction, per class and host issue time (4 significant digits). Two workloads that share it are one point to
    the fit."""
    return (tuple(sorted((c, f"{s:.4g}") for c, s in row.predicted_by_class_s.items())),
            f"{row.predicted_other_s:.4g}", f"{row.predicted_host_s or 0.0:.4g}")


def job_key(workload: Workload) -> str:
    """What tells one job from another for its memory (``FitRow.job_key``): its workload record (``Workload.to_dict``,
    every field, those that change memory and not the step time too: ``gpu_memory_utilization``, ``kv_cache_dtype``,
    ``keep_grads``, ``lora_dropout``) less who chose a field (``CHOSEN_BY_SUFFIX``), hashed (sha256, 16 hex digits:
    a local model file's path is never stored)."""
    record = {k: v for k, v in workload.to_dict().items() if not k.endswith(CHOSEN_BY_SUFFIX)}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:16]


def same_workload_disagreements(rows: Sequence[FitRow]) -> list[tuple[FitRow, ...]]:
    """Each group of runs of one workload (``same_workload``) whose slowest measured step is more than
    ``SAME_WORKLOAD_TOLERANCE`` over its fastest, fastest first."""
    groups: dict[tuple, list[FitRow]] = {}
    for r in rows:
        groups.setdefault(same_workload(r), []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: r.measured_step_time_s)
        fastest_s, slowest_s = group[0].measured_step_time_s, group[-1].measured_step_time_s
        if slowest_s > (1 + SAME_WORKLOAD_TOLERANCE) * fastest_s:
            out.append(tuple(group))
    return out


def stack_parts(row: FitRow) -> dict[str, str]:
    """The parts of ``row``'s stack that set its kernels' speed (``KERNEL_STACK``) that it recorded."""
    return {k: row.stack[k] for k in KERNEL_STACK if row.stack.get(k)}


def stacks_differ(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two stacks (``stack_parts``) are two: only where both recorded a part, with another version (a run
    that recorded CUDA 12.4 alone may have measured torch 2.5.1 with it)."""
    return any(a[k] != b[k] for k in a.keys() & b.keys())


def stack_text(parts: Mapping[str, str]) -> str:
    """A stack (``stack_parts``) as said: "torch 2.5.1, cuda 12.4"; "" where none was recorded."""
    return ", ".join(f"{k} {parts[k]}" for k in KERNEL_STACK if parts.get(k))


def stack_groups(rows: Sequence[FitRow]) -> dict[str, tuple[FitRow, ...]]:
    """The runs by the kernel stack they measured (``stack_text`` of the parts its runs recorded), each group's runs
    oldest first, the groups in the order their first run was seen. The runs that recorded most go first: a run
    joins the one group it does not differ from (``stacks_differ``) and adds what it recorded, starts a group where
    it differs from all, and is in none where it recorded none or too little to tell which of several it measured.
    More than one group: the fit mixes stacks (an upgrade's runs with older ones)."""
    parts = [stack_parts(r) for r in rows]
    groups: list[tuple[dict[str, str], list[int]]] = []
    for i in sorted((i for i, p in enumerate(parts) if p), key=lambda i: -len(parts[i])):   # stable: oldest first
        fits = [g for g in groups if not stacks_differ(g[0], parts[i])]
        if not fits:
            groups.append((dict(parts[i]), [i]))
        elif len(fits) == 1:
            fits[0][0].update(parts[i])
            fits[0][1].append(i)
    groups.sort(key=lambda g: min(g[1]))
    return {stack_text(said): tuple(rows[i] for i in sorted(members)) for said, members in groups}
