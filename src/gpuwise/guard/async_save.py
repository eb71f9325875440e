"""Saving in the background: training is blocked only while the state is copied to host memory.

The copy has to happen on the caller's thread, before the next optimizer step changes the tensors in
place; the slow part (serialising, hashing, writing, fsync) then runs on one background thread. At most one
save is in flight: a second request waits for the first, so host memory holds at most one extra copy.
An error in the background is raised by the next call (``submit``, ``wait`` or ``check``), never lost; a
warning the background save has for the user (a disk filling up) waits for the caller's thread in the same
way (``defer_warning``, ``take_warnings``), where ``warnings.warn`` can point at the caller's line.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import torch


def snapshot_to_cpu(obj: Any) -> Any:
    """A deep copy of ``obj`` in which every tensor is a fresh CPU tensor (``clone`` for CPU tensors)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        return t.to("cpu", copy=True) if t.device.type != "cpu" else t.clone()
    if isinstance(obj, dict):
        copied = {k: snapshot_to_cpu(v) for k, v in obj.items()}
        return copied if type(obj) is dict else type(obj)(copied)  # keeps OrderedDict (state_dict)
    if isinstance(obj, list):
        return [snapshot_to_cpu(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(snapshot_to_cpu(v) for v in obj)
    return obj


class HostStaging:
    """Reusable host buffers for snapshots: the second and later saves copy into memory that is already
    mapped (pinned, for GPU tensors) instead of allocating the whole state again.

    Why: a fresh multi-GB allocation is paid page by page on first touch (measured on this project's 2-core
    VM: ~0.4 GB/s, slower than the copy itself), and device-to-host copies run at full PCIe speed only into
    pinned memory. Only safe with one save in flight: the caller waits for the previous write first.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}
        self.bytes = 0

    def copy(self, obj: Any) -> Any:
        """Like :func:`snapshot_to_cpu`, but into the buffers of the previous call where shapes match."""
        used: set[tuple] = set()
        out = self._copy(obj, (), used)
        for key in [k for k in self._buffers if k not in used]:  # state that disappeared
            del self._buffers[key]
        self.bytes = sum(b.numel() * b.element_size() for b in self._buffers.values())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # the non_blocking device-to-host copies must land before the write
        return out

    def _copy(self, obj: Any, path: tuple, used: set[tuple]) -> Any:
        if isinstance(obj, torch.Tensor):
            t = obj.detach()
            buf = self._buffers.get(path)
            if buf is None or buf.shape != t.shape or buf.dtype != t.dtype or buf.layout != t.layout or t.is_sparse:
                if t.is_sparse or t.layout != torch.strided:
                    return snapshot_to_cpu(t)
                buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=t.is_cuda)
                self._buffers[path] = buf
            used.add(path)
            buf.copy_(t, non_blocking=t.is_cuda)
            return buf
        if isinstance(obj, dict):
            copied = {k: self._copy(v, path + (k,), used) for k, v in obj.items()}
            return copied if type(obj) is dict else type(obj)(copied)
        if isinstance(obj, (list, tuple)):
            items = [self._copy(v, path + (i,), used) for i, v in enumerate(obj)]
            return items if isinstance(obj, list) else tuple(items)
        return obj


class AsyncSaver:
    """Runs one save function at a time on a background thread and reports its outcome later."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._result: Any = None
        self._warnings: collections.deque[str] = collections.deque()
        self.last_result: Any = None

    @property
    def in_flight(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def in_background(self) -> bool:
        """Whether the calling code runs on the background save's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def defer_warning(self, message: str) -> None:
        """From the background save: a warning for the caller's thread (``take_warnings``)."""
        self._warnings.append(message)

    def take_warnings(self) -> list[str]:
        """The warnings deferred since the last call, oldest first, each once."""
        taken = []
        while self._warnings:
            taken.append(self._warnings.popleft())
        return taken

    def submit(self, fn: Callable[[], Any]) -> None:
        """Start ``fn`` after the previous save finished; raises that save's error if it failed."""
        self.wait()

        def run() -> None:
            try:
                self._result = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                self._error = exc

        # Not a daemon: the interpreter waits for a save in flight rather than cutting it off at exit.
        self._thread = threading.Thread(target=run, name="gpuwise-guard-save", daemon=False)
        self._thread.start()

    def wait(self) -> Any:
        """Block until the save in flight (if any) is done; raise its error, else return its result."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self.last_result = self._result
            self._result = None
        self.check()
        return self.last_result

    def check(self) -> None:
        """Raise the error of a finished background save, once."""
        if self._error is not None and not self.in_flight:
            err, self._error = self._error, None
            raise err
