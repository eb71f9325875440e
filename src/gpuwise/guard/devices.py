"""Sharing a GPU box with other people's jobs: take the freest GPUs, cap this process, give memory back.

On a shared rental box ``cuda:0`` is often the one everybody else uses. ``select_gpus`` asks NVML (which
needs no CUDA context) for free memory and utilisation, takes the GPUs with the most free memory (then
the least busy), and sets ``CUDA_VISIBLE_DEVICES``, which CUDA reads once, when it starts: so this must run
before anything touches ``torch.cuda``. GPUs are named by UUID there, because CUDA numbers devices
fastest-first by default while NVML numbers them by PCI bus: index 1 in one is not index 1 in the other.

An existing ``CUDA_VISIBLE_DEVICES`` (a scheduler's or the user's allocation) is respected: the choice is
made among the GPUs it names (by index or UUID), never outside them.

Under torchrun the GPUs are chosen once, before the workers start, and each worker takes
``cuda:LOCAL_RANK``: ``CUDA_VISIBLE_DEVICES=$(python -m gpuwise.guard.devices 2) torchrun --nproc-per-node 2
train.py``. Workers choosing each on their own would read NVML at different moments (a worker's own CUDA
context already counts) and could take the same GPU; ``select_gpus`` refuses to run inside a torchrun worker.

The NVML queries sit behind :class:`GpuSource` so tests (and machines without a GPU) use a fake.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpuwise.guard.errors import GuardError, check_number
from gpuwise.visible_devices import VisibleEntry, matching_uuids, parse_visible_devices
from gpuwise.runlog import VISIBLE_DEVICES_ENV


@dataclass(frozen=True)
class GpuState:
    index: int                   # NVML index (PCI bus order)
    uuid: str
    name: str
    memory_free_bytes: int
    memory_total_bytes: int
    utilization_pct: float       # share of the last sample period in which a kernel ran


class GpuSource(Protocol):
    def gpus(self) -> list[GpuState]: ...


class NvmlGpuSource:
    """The real source: nvidia-ml-py (``pynvml``)."""

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py
            except ImportError:
                raise GuardError("cannot query GPUs: nvidia-ml-py (pynvml) is not installed") from None
        self._nvml = nvml

    def gpus(self) -> list[GpuState]:
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise GuardError(f"cannot query GPUs through NVML: {exc}") from None
        try:
            out = []
            for i in range(nvml.nvmlDeviceGetCount()):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                mem = nvml.nvmlDeviceGetMemoryInfo(h)
                try:
                    util = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
                except Exception:  # some vGPUs / MIG instances do not report it
                    util = 0.0
                name = nvml.nvmlDeviceGetName(h)
                uuid = nvml.nvmlDeviceGetUUID(h)
                out.append(GpuState(i, uuid.decode() if isinstance(uuid, bytes) else uuid,
                                    name.decode() if isinstance(name, bytes) else name,
                                    int(mem.free), int(mem.total), util))
            return out
        finally:
            nvml.nvmlShutdown()


class FakeGpuSource:
    """A fixed list of GPUs (tests, dry runs)."""

    def __init__(self, gpus: Sequence[GpuState]) -> None:
        self._gpus = list(gpus)

    def gpus(self) -> list[GpuState]:
        return list(self._gpus)


def rank_freest(gpus: Sequence[GpuState], *, min_free_bytes: int = 0) -> list[GpuState]:
    """GPUs with at least ``min_free_bytes`` free, most free memory first, then least utilised, then index."""
    usable = [g for g in gpus if g.memory_free_bytes >= min_free_bytes]
    return sorted(usable, key=lambda g: (-g.memory_free_bytes, g.utilization_pct, g.index))


def select_gpus(count: int = 1, *, min_free_bytes: int = 0, source: GpuSource | None = None,
                env: MutableMapping[str, str] | None = None) -> list[GpuState]:
    """Pick the ``count`` freest GPUs among those visible (all, or those ``CUDA_VISIBLE_DEVICES`` names) and
    make them the only ones CUDA will see (in that order).

    Raises GuardError when ``count`` is not a whole number >= 1, when CUDA has already started in this
    process (too late to change the visible devices), inside a torchrun worker (choose before torchrun
    starts: see the module's doc), when ``CUDA_VISIBLE_DEVICES`` names a GPU NVML does not list, or when
    fewer than ``count`` GPUs have ``min_free_bytes`` free."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise GuardError(f"select_gpus needs a GPU count >= 1, got {count!r}")
    check_number("min_free_bytes", min_free_bytes, 0)
    env = os.environ if env is None else env
    if int(env.get("LOCAL_WORLD_SIZE", "1") or "1") > 1:
        raise GuardError("select_gpus inside a torchrun worker: each worker would choose on its own and two may take "
                         "the same GPU; choose once before torchrun starts: "
                         "CUDA_VISIBLE_DEVICES=$(python -m gpuwise.guard.devices N) torchrun ...")
    if env is os.environ and _cuda_started():
        raise GuardError("select_gpus must run before CUDA starts (before the first torch.cuda call or .cuda())")
    gpus = _visible(list((source or NvmlGpuSource()).gpus()), env)
    chosen = rank_freest(gpus, min_free_bytes=min_free_bytes)[:count]
    if len(chosen) < count:
        among = f" (of those {VISIBLE_DEVICES_ENV}={env[VISIBLE_DEVICES_ENV]} names)" \
            if env.get(VISIBLE_DEVICES_ENV) is not None else ""
        raise GuardError(f"asked for {count} GPU(s) with >= {min_free_bytes / 2**30:.1f} GiB free; "
                         f"{len(chosen)} of {len(gpus)}{among} qualify")
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env[VISIBLE_DEVICES_ENV] = ",".join(g.uuid or str(g.index) for g in chosen)
    return chosen


def _visible(gpus: list[GpuState], env: Mapping[str, str]) -> list[GpuState]:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` lets CUDA see (all when unset), in NVML's terms.

    Entries are read as CUDA reads them (``parse_visible_devices``): CUDA indices or (prefixes of) UUIDs. An index
    counts in CUDA's order: PCI bus order with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (NVML's too), fastest first
    otherwise, which is PCI bus order only on a box of one GPU model: on a mixed box an index there cannot be
    mapped, and GuardError asks for UUIDs. Where CUDA would quietly stop at an entry naming no GPU, GuardError
    names it (``_gpu_named``)."""
    value = env.get(VISIBLE_DEVICES_ENV)
    if value is None:
        return gpus
    entries = parse_visible_devices(value)
    if not any(e.text for e in entries):
        raise GuardError(f"{VISIBLE_DEVICES_ENV} is empty: no GPU is visible to choose from")
    by_pci = sorted(gpus, key=lambda g: g.index)
    pci_order = env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len({g.name for g in gpus}) <= 1
    visible: list[GpuState] = []
    for entry in entries:
        gpu = _gpu_named(entry, by_pci, pci_order=pci_order, value=value)
        if gpu not in visible:
            visible.append(gpu)
    return visible


def _gpu_named(entry: VisibleEntry, by_pci: list[GpuState], *, pci_order: bool, value: str) -> GpuState:
    """The GPU of ``by_pci`` (NVML's, in PCI bus order) that one entry of CUDA_VISIBLE_DEVICES=``value`` names;
    GuardError, one line, when it names none (an empty entry, an index or UUID of no GPU, a MIG instance: NVML lists
    whole GPUs, and choosing among them would widen a MIG slice to its GPU), several, or a CUDA index that counts
    unlike NVML's (``pci_order`` False)."""
    where = f"{VISIBLE_DEVICES_ENV}={value}"
    if entry.index is not None:
        if not 0 <= entry.index < len(by_pci):
            raise GuardError(f"{where}: no GPU {entry.text} ({len(by_pci)} GPU(s) on this machine)")
        if not pci_order:
            raise GuardError(f"{where} names GPUs by CUDA index, which counts fastest first on this box of mixed "
                             "GPUs, not as NVML does: name them by UUID (nvidia-smi -L) or set "
                             "CUDA_DEVICE_ORDER=PCI_BUS_ID")
        return by_pci[entry.index]
    if entry.uuid_prefix is None:
        raise GuardError(f"{where}: an empty entry names no GPU (CUDA ignores it and every entry after it)")
    if entry.names_mig:
        raise GuardError(f"{where}: {entry.text!r} is a MIG instance, and select_gpus chooses among whole GPUs: "
                         "a MIG instance given is already the choice, keep it")
    matches = matching_uuids(entry.uuid_prefix, [g.uuid for g in by_pci])
    if len(matches) != 1:
        raise GuardError(f"{where}: {entry.text!r} "
                         f"{'names no GPU NVML lists' if not matches else 'matches several GPUs'}")
    return next(g for g in by_pci if g.uuid == matches[0])


def cap_memory(fraction: float | None = None, *, max_bytes: int | None = None, device: int = 0) -> float:
    """Cap PyTorch's caching allocator on ``device`` to a share of the GPU (or a byte budget).

    An allocation beyond the cap raises OutOfMemoryError in *this* process, which the guard's OOM recovery
    handles, instead of starving a neighbour's job. It caps only PyTorch's allocator: the CUDA context
    (~300-600 MiB) and other libraries' memory come on top. Returns the fraction set."""
    import torch

    if not torch.cuda.is_available():
        raise GuardError("cap_memory needs a CUDA GPU")
    total = torch.cuda.get_device_properties(device).total_memory
    if max_bytes is not None:
        fraction = max_bytes / total
    if fraction is None or not 0.0 < fraction <= 1.0:
        raise GuardError(f"memory cap must be a fraction in (0, 1] of the GPU's memory, got {fraction}")
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction


def release_cached_memory() -> int:
    """Between phases (train -> eval, before a big allocation): return cached, unused blocks to the GPU
    so that other processes (and nvidia-smi) see them free. Returns the bytes released (0 without CUDA)."""
    gc.collect()
    try:
        import torch
    except ImportError:  # pragma: no cover
        return 0
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return 0
    before = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    return max(0, before - torch.cuda.memory_reserved())


def _cuda_started() -> bool:
    import sys

    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def _gib_to_bytes(name: str, gib: float) -> int:
    """``gib`` GiB in bytes; GuardError naming ``name`` unless it is a finite number >= 0 (``nan``, ``inf`` and
    ``-3`` parse as floats)."""
    if not math.isfinite(gib) or gib < 0:
        raise GuardError(f"{name} must be a finite number of GiB >= 0, got {gib!r}")
    return int(gib * 2**30)


def main(argv: Sequence[str] | None = None, *, source: GpuSource | None = None) -> int:
    """``python -m gpuwise.guard.devices COUNT [--min-free-gib G]``: the chosen GPUs' UUIDs, comma-separated,
    for ``CUDA_VISIBLE_DEVICES=$(...)`` before torchrun. A GuardError is one line on stderr, exit code 2."""
    p = argparse.ArgumentParser(prog="python -m gpuwise.guard.devices",
                                description="Print the UUIDs of the COUNT freest GPUs (among those visible).")
    p.add_argument("count", type=int)
    p.add_argument("--min-free-gib", type=float, default=0.0, help="GiB of free memory each GPU must have")
    args = p.parse_args(argv)
    env = dict(os.environ)
    try:
        select_gpus(args.count, min_free_bytes=_gib_to_bytes("--min-free-gib", args.min_free_gib), source=source,
                    env=env)
    except GuardError as exc:
        sys.stderr.write(f"gpuwise.guard: error: {exc}\n")
        return 2
    sys.stdout.write(env[VISIBLE_DEVICES_ENV] + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
