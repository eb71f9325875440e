"""gpuwise's PyTorch hook, imported by Python at start-up in the children of ``gpuwise run --torch-hook``.

At exit, if the process used CUDA through PyTorch, it records per device ``torch.cuda.max_memory_allocated``
(what tensors needed) and ``max_memory_reserved`` (what the caching allocator held) as one ``torch_memory``
event in the run log named by $GPUWISE_RUNLOG, with the torch and CUDA versions and the GPU's name.
Stdlib only (the child's Python may lack gpuwise); never imports torch itself, never raises; a process
killed by a signal records nothing. Afterwards it runs the ``sitecustomize`` it shadows, if any (Debian's,
a virtualenv's).
"""

import atexit
import json
import os
import sys
import time

TORCH_MEMORY_EVENT = "torch_memory"   # gpuwise.runlog.TORCH_MEMORY_EVENT's copy: this hook imports no gpuwise


def _record() -> None:
    path = os.environ.get("GPUWISE_RUNLOG")
    torch = sys.modules.get("torch")
    if not path or torch is None:
        return
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return
        devices = []
        for d in range(cuda.device_count()):
            reserved = int(cuda.max_memory_reserved(d))
            if reserved > 0:
                devices.append({"device": d, "max_allocated_bytes": int(cuda.max_memory_allocated(d)),
                                "max_reserved_bytes": reserved})
        if not devices:
            return
        import sqlite3

        conn = sqlite3.connect(path, timeout=10.0)
        try:
            conn.execute("INSERT INTO events VALUES (?, ?, ?)",
                         (time.time(), TORCH_MEMORY_EVENT, json.dumps({"pid": os.getpid(), "devices": devices,
                                                                       **_stack(torch, devices[0]["device"])})))
            conn.commit()
        finally:
            conn.close()
    except Exception as exc:  # the job's exit must never fail because of us
        print(f"gpuwise torch hook: not recorded: {exc}", file=sys.stderr)


def _stack(torch, device: int) -> dict:
    """torch and CUDA versions and the GPU's name, where this torch tells (gpuwise calibrate keys on them)."""
    out = {}
    for key, read in (("torch_version", lambda: torch.__version__), ("cuda_version", lambda: torch.version.cuda),
                      ("gpu_name", lambda: torch.cuda.get_device_name(device))):
        try:
            value = read()
        except Exception:
            continue
        if isinstance(value, str) and value:
            out[key] = value
    return out


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import importlib.machinery
        import importlib.util

        others = [p for p in sys.path if os.path.abspath(p or ".") != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
        if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as exc:
        print(f"gpuwise torch hook: the shadowed sitecustomize failed: {exc}", file=sys.stderr)


atexit.register(_record)
_chain()
