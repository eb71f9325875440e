"""Which GPU a run calibrates when its job's GPUs differ in kind (a machine with an A100 and an RTX 4090, NVML
samples of both): the one the training process ran on, as its torch record names it, else the one ``--gpu`` names;
neither is a one-line refusal that names the kinds and how to pick one. A job whose GPUs are of several kinds
calibrates none: its step is paced by the slowest, which no one GPU's factors stand for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.catalog import GPU, Catalog
from gpuwise.report.rightsize import resolve_rented
from gpuwise.report.usage import GpuKind, UsageSummary


def catalog_id(kind: GpuKind, catalog: Catalog) -> str | None:
    """The catalog GPU a kind is (None: no name, or one the catalog does not know)."""
    gpu, _note = resolve_rented(catalog, kind.name)
    return gpu.id if gpu is not None else None


def trained_kind(usage: UsageSummary, recorded_gpu_name: str | None, chosen: GPU | None, catalog: Catalog,
                 source: str) -> GpuKind:
    """The kind of ``usage``'s GPUs the job trained on: the one ``recorded_gpu_name`` (the torch record's: the
    training process's own device) is, else the one ``chosen`` (``--gpu``) is; CalibrateError (one line) when
    neither picks one of them."""
    kinds = usage.gpu_kinds
    ids = [catalog_id(k, catalog) for k in kinds]
    named, _note = resolve_rented(catalog, recorded_gpu_name)
    for want in (named, chosen):
        found = [k for k, gpu_id in zip(kinds, ids) if want is not None and gpu_id == want.id]
        if found:
            return found[0]
    known = ", ".join(i for i in ids if i) or "none the catalog knows"
    said = f"{source}: the job ran on GPUs of {len(kinds)} kinds ({usage.gpu_kinds_words})"
    if chosen is not None:
        raise CalibrateError(f"{said}, none of them {chosen.id}: pass --gpu with one of them ({known})")
    if not recorded_gpu_name:
        record = "no torch record says which it trained on"
    elif named is None:    # a kind the catalog cannot name is not told apart from the others by its catalog id
        record = f"its torch record's GPU, {recorded_gpu_name}, is not in the catalog (docs/catalog.md: add it)"
    else:
        record = f"its torch record's GPU, {recorded_gpu_name}, is none of them"
    raise CalibrateError(f"{said} and {record}: pass --gpu with the one to calibrate ({known})")


def on_trained_kind(usage: UsageSummary, workload: Mapping[str, object] | None, recorded_gpu_name: str | None,
                    chosen: GPU | None, catalog: Catalog, source: str) -> UsageSummary:
    """``usage`` of a job whose GPUs differ in kind, narrowed to the kind it trained on (``trained_kind``): the
    measurement then names that GPU and takes its process memory from those GPUs only. CalibrateError when the
    workload's GPUs (``num_gpus``) outnumber that kind's: the job's step spanned kinds."""
    kind = trained_kind(usage, recorded_gpu_name, chosen, catalog, source)
    num_gpus = (workload or {}).get("num_gpus", 1)
    if isinstance(num_gpus, int) and num_gpus > kind.count:
        raise CalibrateError(f"{source}: the job's {num_gpus} GPUs are of {len(usage.gpu_kinds)} kinds "
                             f"({usage.gpu_kinds_words}): its step is paced by the slowest, not one GPU's: "
                             "calibrate on runs whose GPUs are all of one kind")
    return replace(usage, job_labels=kind.labels)
