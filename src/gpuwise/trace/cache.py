"""An on-disk cache of traces, so that asking again (another GPU, deadline or provider) costs no trace.

Where: ``$GPUWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuwise/traces``, else ``~/.cache/gpuwise/traces``.
Every file there is safe to delete at any time; a damaged or unreadable one is a miss and is removed.

The key holds everything a trace depends on: the workload fields the tracer reads (``TRACED_FIELDS``:
not the GPU count, sharding or the stack's input rate, engine or compile, which only ``runtime``,
``memory`` and ``plan`` read), the model's source (the
torchvision/timm version, the transformers config's content and transformers' version, or the bytes
of the user's ``file.py``), the torch version and the source of gpuwise's own tracing code. It is
computed without importing torch, so a hit never imports it. A user factory's trace also keeps the hash of
every module of the user's that tracing it loaded (``user_sources``: the factory's file and the files it
imports, outside the Python installation and gpuwise) and of every file it opened for reading while it was
imported, built and traced (``opened_files``: a JSON or YAML config beside it, a vocabulary; never /proc, /sys,
/dev or /run): an edit to one of those is a miss too. A file over ``HASHED_FILE_MAX_BYTES`` (a dataset whose
header the factory reads) is compared by size and modification time, so a hit never reads gigabytes. A module
loaded before (earlier in a notebook's process) is not among them: a process that traced once re-imports
nothing anyway.

Entries are pickles written by this user into this user's cache directory (the same trust as the
user's own code, which the tracer runs anyway).
"""

from __future__ import annotations

import contextlib
import contextvars
import copyreg
import dataclasses
import hashlib
import json
import logging
import os
import pickle
import sys
import tempfile
import types
from collections.abc import Iterator
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import gpuwise
from gpuwise.trace.prefill import generates
from gpuwise.trace.records import Trace

log = logging.getLogger(__name__)

FORMAT = 5   # bump when Trace's fields or an entry's shape change
HASHED_FILE_MAX_BYTES = 64 * 2**20   # a larger user file is compared by size and modification time
_PSEUDO_FILE_ROOTS = ("/proc/", "/sys/", "/dev/", "/run/")   # read, but not sources: they change by themselves
_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("gpuwise_trace_cache", default=True)
_opened: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("gpuwise_opened_files", default=None)
_audit_hook_installed = False
_TRACING_SOURCES = ("trace", "workload")   # gpuwise subpackages whose code decides what a trace holds
# The Workload fields a trace depends on (tests/trace/test_cache_key.py holds the tracer to them): the
# first step towards the issue-23 ``Step`` value (micro-batch, lengths, precision, optimizer, mode, PEFT).
TRACED_FIELDS = ("model", "batch_size", "seq_len", "image_size", "precision", "optimizer", "mode",
                 "grad_checkpointing", "channels_last", "grad_accum_steps", "finetune", "lora_rank",
                 "lora_targets", "quant", "attention", "optimizer_impl", "keep_grads", "lora_dropout",
                 "max_new_tokens")
# Fields the tracer reads only through a rule, keyed by what the rule says: the number of new tokens only decides
# whether the forward is HF generate's prefill (trace/prefill.py), so every N > 0 shares one trace
_KEYED_BY_RULE = {"max_new_tokens": generates}


def set_enabled(enabled: bool) -> None:
    """Turns the cache on or off for this context (the CLI's ``--no-cache``)."""
    _enabled.set(enabled)


def enabled() -> bool:
    return _enabled.get() and os.environ.get("GPUWISE_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    if os.environ.get("GPUWISE_CACHE_DIR"):
        return Path(os.environ["GPUWISE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "gpuwise" / "traces"


def trace_key(workload, spec) -> str:
    """A hex digest naming the trace of ``workload`` (its model resolved to ``spec``)."""
    parts = {
        "format": FORMAT,
        "workload": {name: _KEYED_BY_RULE[name](workload) if name in _KEYED_BY_RULE else getattr(workload, name)
                     for name in TRACED_FIELDS},
        "model": _model_source(spec),
        "torch": _version("torch"),
        "gpuwise": _code_digest(),
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Entry:
    """What a cache file holds: the trace, and the (path, sha256) of the user's source files it was made with."""

    trace: Trace
    sources: tuple[tuple[str, str], ...] = ()


def load(key: str, workload=None) -> Trace | None:
    """The trace stored under ``key``; ``workload``: the job asking, which the trace then carries (it
    may differ from the one that made the entry in fields the trace does not read). An entry whose user
    source files changed since is a miss."""
    path = cache_dir() / f"{key}.pickle"
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as exc:   # damaged, truncated, or from an incompatible gpuwise: a miss
        log.info("trace cache entry %s unreadable (%s): removed", path, exc)
        path.unlink(missing_ok=True)
        return None
    if not isinstance(entry, Entry) or not isinstance(entry.trace, Trace):
        return None
    changed = next((p for p, digest in entry.sources if _file_digest(Path(p)) != digest), None)
    if changed is not None:
        log.info("trace cache entry %s made with another %s: traced again", path, changed)
        return None
    trace = entry.trace
    return dataclasses.replace(trace, workload=workload) if workload is not None else trace


def user_sources(modules, opened: set[str] | frozenset[str] = frozenset()) -> tuple[tuple[str, str], ...]:
    """(path, digest) of the user's modules among ``modules`` (name -> module: those that importing and
    building a factory loaded) and of the user's files among ``opened`` (paths opened for reading meanwhile,
    ``opened_files``): files given by an absolute path, outside the Python installation (its prefixes and
    every ``site-packages`` / ``dist-packages`` folder, user installs included), outside gpuwise and outside
    /proc, /sys, /dev and /run; never ``__main__`` (the script asking) nor a compiled ``.pyc``."""
    files = {getattr(module, "__file__", None) for name, module in list(modules.items()) if name != "__main__"}
    candidates = {f for f in files if f and f.endswith(".py")} | {f for f in opened if not f.endswith(".pyc")}
    found = {}
    for file in candidates:
        path = _user_file(file)
        if path is None or str(path) in found:
            continue
        digest = _file_digest(path)
        if digest is not None:
            found[str(path)] = digest
    return tuple(sorted(found.items()))


def _user_file(file: str) -> Path | None:
    """``file`` resolved, where it is one of the user's own regular files (see ``user_sources``); else None."""
    if not os.path.isabs(file) or file.startswith(_PSEUDO_FILE_ROOTS):
        return None
    path = Path(file).resolve()
    installed = tuple(str(Path(p).resolve()) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    own = str(Path(gpuwise.__file__).parent.resolve()) + os.sep
    text = str(path)
    if ({"site-packages", "dist-packages"} & set(path.parts) or text.startswith(installed) or text.startswith(own)
            or text.startswith(_PSEUDO_FILE_ROOTS) or not path.is_file()):
        return None
    return path


@contextlib.contextmanager
def opened_files() -> Iterator[set[str]]:
    """The paths this thread opens for reading (Python's ``open`` audit event: ``open``, ``io.open_code``,
    ``os.open``) while the block runs, made absolute; filtered by ``user_sources``. Audit hooks cannot be removed, so
    one is installed for the process and does nothing outside such a block."""
    global _audit_hook_installed
    if not _audit_hook_installed:
        sys.addaudithook(_on_audit)
        _audit_hook_installed = True
    paths: set[str] = set()
    token = _opened.set(paths)
    try:
        yield paths
    finally:
        _opened.reset(token)


def _on_audit(event: str, args: tuple) -> None:
    # Runs for every audited event in the process, and must never raise into the code that opened a file.
    if event != "open":
        return
    paths = _opened.get()
    if paths is None:
        return
    try:
        file, mode, flags = args
        if isinstance(file, int):
            return
        reading = (flags & os.O_ACCMODE) == os.O_RDONLY if mode is None else not set("wax+") & set(mode)
        if reading:
            paths.add(os.path.abspath(os.fsdecode(file)))   # as the factory's working folder resolves it
    except (TypeError, ValueError):
        return


def _file_digest(path: Path) -> str | None:
    """sha256 of the file's bytes; size and modification time for a file over ``HASHED_FILE_MAX_BYTES``;
    None when it cannot be read."""
    try:
        stat = path.stat()
        if stat.st_size > HASHED_FILE_MAX_BYTES:
            return f"size {stat.st_size}, mtime_ns {stat.st_mtime_ns}"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def store(key: str, trace: Trace, sources: tuple[tuple[str, str], ...] = ()) -> None:
    """Writes atomically (temp file + rename); a cache that cannot be written is only logged. ``sources``:
    the user's files the trace was made with (``user_sources``)."""
    directory = cache_dir()
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickler = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.dispatch_table = {**copyreg.dispatch_table, types.MappingProxyType: _reduce_mapping_proxy}
            pickler.dump(Entry(trace, tuple(sources)))
        os.replace(tmp, directory / f"{key}.pickle")
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
        log.info("trace cache not written to %s: %s", directory, exc)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _reduce_mapping_proxy(proxy: types.MappingProxyType):
    # Op attributes are read-only mappings; they load back as the same.
    return read_only_mapping, (dict(proxy),)


def read_only_mapping(items: dict) -> types.MappingProxyType:
    return types.MappingProxyType(items)


def _model_source(spec) -> dict:
    source = {"name": spec.name, "task": spec.task, "source": spec.source}
    if spec.source in ("torchvision", "timm"):
        source["version"] = _version(spec.source)
    elif spec.source == "hf":
        source["config"] = spec.hf_config
        source["transformers"] = _version("transformers")
        source["peft"] = _version("peft")
    elif spec.source == "file":
        path = Path(spec.target.rpartition(":")[0])
        source["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return source


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """The gpuwise version and the source of the code that makes a trace: an edit there is a miss."""
    digest = hashlib.sha256(str(getattr(gpuwise, "__version__", "")).encode())
    root = Path(gpuwise.__file__).parent
    for sub in _TRACING_SOURCES:
        for path in sorted((root / sub).glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
