"""``Guard``: the few lines a plain PyTorch loop adds to survive kills, preemption and out-of-memory.

    guard = Guard("ckpt/", model, optimizer, scheduler=sched, every_steps=200, run_log="run.db")
    loader = guard.loader(dataset, batch_size=64, seed=0)
    guard.resume()                                   # no-op on the first run
    for batch in guard.batches(max_steps=10_000):    # epochs, resumed mid-epoch
        guard.step(batch, lambda b: loss_fn(model(b[0]), b[1]))

``step`` runs forward+backward through ``loss_fn`` (which returns the *mean* loss of the samples it got),
the optimizer, scheduler and GradScaler steps, logs the metrics, and checkpoints when due. The pieces it is
made of (CheckpointStore, ResumableDataLoader, PreemptionHandler, the OOM helpers) work on their own for
loops that need more control.
"""

from __future__ import annotations

import logging

import collections
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from gpuwise.guard import distributed as gdist
from gpuwise.guard.accumulate import LossFn, accumulate_gradients, apply_update
from gpuwise.guard.async_save import AsyncSaver, HostStaging
from gpuwise.guard.checkpoint import Checkpoint, CheckpointStore
from gpuwise.guard.errors import GuardError
from gpuwise.guard.gradnoise import GradNoiseSample, MicroGradTracker
from gpuwise.guard.oom import agree_on_micro_batch, batch_size_of, free_failed_step, is_oom, smaller_micro_batch
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.guard.rng import capture_rng_state, restore_rng_state
from gpuwise.guard.sampler import ResumableDataLoader
from gpuwise.guard.sharded import load_sharded, save_sharded
from gpuwise.guard.state_file import nonfinite_names
from gpuwise.guard.storage import is_network_fs, low_space_warning
from gpuwise.runlog import RunLog


log = logging.getLogger(__name__)

class Guard:
    """Checkpoints, resume, preemption and OOM recovery around one model and optimizer.

    ``every_steps`` / ``every_minutes``: periodic checkpoints (either, both or none); a checkpoint is also
    written on the preemption signal and, when ``save_on_crash``, when ``loss_fn`` raises. ``keep``: the
    newest checkpoints kept. ``async_save``: write in a background thread (training waits only for a copy
    to host memory). ``on_save_error``: ``"warn"`` (training continues, the previous checkpoint is intact)
    or ``"raise"``; with ``"warn"``, ``max_save_failures`` saves failing in a row end the run (GuardError),
    and so does ``close()`` when every save of the run failed. ``allow_fresh``: start from step 0 even
    though checkpoints exist and none verifies (otherwise ``resume`` refuses, naming them). ``micro_batch_size``: start with micro-batches of this size (None: whole batch); it
    shrinks on OOM and is remembered in checkpoints. ``on_micro_grads``: called with a
    :class:`GradNoiseSample` each step that has two batch sizes to compare (``measure_grad_noise``).
    ``workload``: the job as gpuwise describes it (a ``Workload`` or its ``to_dict()``), recorded in the run
    log with each step's wall time and PyTorch's peak memory: ``gpuwise report`` then compares the run with
    gpuwise's prediction, and ``gpuwise calibrate`` learns from it (docs/calibrate.md).
    """

    def __init__(self, directory: str | os.PathLike, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None = None, *,
                 scheduler: Any = None, scaler: Any = None,
                 every_steps: int | None = None, every_minutes: float | None = None, keep: int = 3,
                 run_log: RunLog | str | os.PathLike | None = None,
                 async_save: bool = False, on_save_error: str = "warn", save_on_crash: bool = True,
                 preempt_signals: Iterable[int | str] = ("SIGTERM",), grace_s: float = 25.0,
                 exit_on_preempt: bool = True, exit_code: int = EXIT_RESTART,
                 micro_batch_size: int | None = None, clip_grad_norm: float | None = None,
                 measure_grad_noise: bool = True,
                 on_micro_grads: Callable[[GradNoiseSample], None] | None = None,
                 extra_state: Mapping[str, Any] | None = None, sharded: bool | None = None,
                 trust_pickle: bool = False, min_free_checkpoints: int = 3, verbose: bool = True,
                 allow_fresh: bool = False, max_save_failures: int = 3,
                 workload: Mapping[str, Any] | Any = None) -> None:
        if on_save_error not in ("warn", "raise"):
            raise GuardError(f"on_save_error must be 'warn' or 'raise', got {on_save_error!r}")
        if isinstance(max_save_failures, bool) or not isinstance(max_save_failures, int) or max_save_failures < 1:
            raise GuardError(f"max_save_failures must be a whole number >= 1, got {max_save_failures!r}")
        self.store = CheckpointStore(directory, keep=keep)
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scaler = scaler
        self.every_steps = every_steps
        self.every_s = None if every_minutes is None else every_minutes * 60.0
        self.async_save = async_save
        self.on_save_error = on_save_error
        self.max_save_failures = max_save_failures
        self.allow_fresh = allow_fresh
        self.save_failures_in_row = 0
        self.saves_ok = 0
        self.save_on_crash = save_on_crash
        self.exit_on_preempt = exit_on_preempt
        self.micro_batch_size = micro_batch_size
        self.clip_grad_norm = clip_grad_norm
        self.measure_grad_noise = measure_grad_noise
        self.on_micro_grads = on_micro_grads
        self.extra_state = dict(extra_state or {})
        self.extras: dict[str, Any] = {}  # the user's own small values (tensors / plain types), saved too
        self.sharded = gdist.is_fsdp(model) if sharded is None else sharded
        self.trust_pickle = trust_pickle
        self.min_free_checkpoints = min_free_checkpoints
        self.verbose = verbose
        self.info = gdist.dist_info()
        self.step_count = 0        # optimizer steps completed
        self.samples_seen = 0      # samples of completed steps, this rank
        self.last_loss: float | None = None
        self._lr_used: float | None = None
        self.last_checkpoint: Checkpoint | None = None
        self.stop_requested = False
        self._loader: ResumableDataLoader | None = None
        self._saver = AsyncSaver()
        self._staging = HostStaging()
        self._pending_events: collections.deque[tuple[str, str, float]] = collections.deque()
        self._last_save_s = time.monotonic()
        self._warned_space = False
        self._owns_run_log = False
        self.run_log: RunLog | None = None
        if isinstance(run_log, RunLog):
            self.run_log = run_log
        elif run_log is not None and self.info.is_writer:
            self.run_log, self._owns_run_log = RunLog(run_log), True
        self._last_step_end_s: float | None = None
        if self.run_log is not None:
            _record_stack(self.run_log, workload)
        self.preemption = PreemptionHandler(preempt_signals, grace_s=grace_s, exit_code=exit_code,
                                            on_grace_expired=self._flush_log)
        try:
            self.preemption.install()
        except (RuntimeError, ValueError) as exc:  # not the main thread (e.g. inside a notebook worker)
            self._say(f"preemption signals not watched: {exc}")
        if self.info.is_writer and is_network_fs(Path(directory).absolute().parent):
            self._say(f"{directory} is on a network file system: saves pay a round trip per fsync; "
                      "async_save=True keeps that off the training loop")

    # -- data ------------------------------------------------------------------------------------
    def loader(self, dataset: Any, batch_size: int, *, seed: int = 0, shuffle: bool = True,
               drop_last: bool = False, **loader_kwargs: Any) -> ResumableDataLoader:
        """A resumable DataLoader, sharded by rank under torchrun, whose position is checkpointed."""
        self._loader = ResumableDataLoader(dataset, batch_size, seed=seed, shuffle=shuffle, rank=self.info.rank,
                                           world_size=self.info.world_size, drop_last=drop_last, **loader_kwargs)
        return self._loader

    def attach_loader(self, loader: ResumableDataLoader) -> ResumableDataLoader:
        self._loader = loader
        return loader

    @property
    def epoch(self) -> int:
        return self._loader.epoch if self._loader is not None else 0

    def batches(self, max_steps: int | None = None, max_epochs: int | None = None) -> Iterator[Any]:
        """Batches across epochs from the attached loader until ``max_steps`` steps / ``max_epochs`` epochs."""
        if self._loader is None:
            raise GuardError("call guard.loader(...) (or attach_loader) before guard.batches()")
        while not self.stop_requested:
            if max_steps is not None and self.step_count >= max_steps:
                return
            if max_epochs is not None and self.epoch >= max_epochs:
                return
            yielded = False
            for batch in self._loader:
                yielded = True
                yield batch
                if self.stop_requested or (max_steps is not None and self.step_count >= max_steps):
                    return
            if not yielded and len(self._loader.dataset) == 0:
                raise GuardError("the dataset is empty")

    # -- one training step -----------------------------------------------------------------------
    def step(self, batch: Any, loss_fn: LossFn) -> float:
        """Forward+backward (split into micro-batches as memory requires), optimizer/scheduler/scaler
        steps, metrics, and a checkpoint when one is due. Returns the batch's mean loss."""
        if not self.info.is_distributed:
            self._surface_async_error()  # under torchrun, the next save reports it on every rank
        self._drain_events()
        total = batch_size_of(batch)
        micro = min(self.micro_batch_size or total, total)
        step_start_s = self._last_step_end_s or time.perf_counter()   # wall time per step: data loading too
        optimizer_started = False
        crash_save = self.save_on_crash and not self.info.is_distributed
        # The generators as the failed step found them: a crash checkpoint then replays that step exactly.
        rng_at_start = capture_rng_state() if crash_save else None
        try:
            while True:
                tracker = self._tracker(total, micro)
                loss_sum, ok = accumulate_gradients(self.model, batch, micro, loss_fn, scaler=self.scaler,
                                                    tracker=tracker, sharded=self.sharded)
                proposal = micro if ok else smaller_micro_batch(micro)
                agreed, not_preempt, not_time = agree_on_micro_batch(
                    [proposal, 0 if self.preemption.requested else 1, 0 if self._time_save_due() else 1])
                if ok and agreed == micro:
                    break
                free_failed_step(self.optimizer, model=self.model)
                if agreed == 0:
                    raise GuardError(f"out of memory even with micro-batches of 1 sample (batch of {total})")
                where = "" if not self.info.is_distributed else (" on another rank" if ok else " on this rank")
                self._event("oom_recovered", f"step {self.step_count + 1}: out of memory with micro-batch {micro}"
                                             f"{where}; retrying the same batch of {total} as micro-batches of "
                                             f"{agreed}")
                micro = self.micro_batch_size = agreed
            optimizer_started = True
            grad_norm, self._lr_used = apply_update(self.model, self.optimizer, scheduler=self.scheduler,
                                                    scaler=self.scaler, clip_grad_norm=self.clip_grad_norm)
        except Exception as exc:
            # Only before the optimizer step (a half-applied update must not be saved), and not under
            # torchrun: the other ranks would wait in the save's collectives for a rank that is gone.
            if crash_save and not optimizer_started and not is_oom(exc) and not isinstance(exc, GuardError):
                free_failed_step(self.optimizer, model=self.model)
                self._say(f"step {self.step_count + 1} raised {type(exc).__name__}; saving the state after "
                          f"step {self.step_count} before re-raising")
                self._save(reason="crash", exclude_last_batch=True, wait=True, rng=rng_at_start)
            raise
        self.step_count += 1
        self.samples_seen += total
        self.last_loss = loss_sum
        self._last_step_end_s = time.perf_counter()
        self._log_step(loss_sum, total, micro, grad_norm, tracker, self._last_step_end_s - step_start_s)
        if not_preempt == 0:
            self._preempted()
        elif (self.every_steps and self.step_count % self.every_steps == 0) or not_time == 0:
            self._save(reason="periodic")
        return loss_sum

    def _tracker(self, total: int, micro: int) -> MicroGradTracker | None:
        several = micro < total or self.info.is_distributed
        if not (self.measure_grad_noise and several) or self.sharded:
            return None
        return MicroGradTracker([p for p in self.model.parameters() if p.requires_grad])

    def _log_step(self, loss: float, total: int, micro: int, grad_norm: float | None,
                  tracker: MicroGradTracker | None, step_time_s: float) -> None:
        noise = None
        if tracker is not None and grad_norm is not None:
            noise = tracker.sample(self.step_count, grad_norm ** 2, total * self.info.world_size)
            if noise is not None and self.on_micro_grads is not None:
                self.on_micro_grads(noise)
        if self.run_log is None:
            return
        metrics: dict[str, float | None] = {"loss": loss, "lr": self._lr_used,
                                            "batch_size": total * self.info.world_size,
                                            "micro_batch_size": micro, "grad_norm": grad_norm,
                                            "epoch": self.epoch, "step_time_s": step_time_s}
        if noise is not None:
            metrics.update(noise.as_metrics())
        self.run_log.log_train(self.step_count, **metrics)

    # -- checkpoints -----------------------------------------------------------------------------
    def _time_save_due(self) -> bool:
        return self.every_s is not None and time.monotonic() - self._last_save_s >= self.every_s

    def state_dict(self, *, exclude_last_batch: bool = False) -> dict[str, Any]:
        """Everything a resumed run needs to continue as if never stopped (tensors and plain types)."""
        state: dict[str, Any] = {
            "format_version": 1,
            "progress": {"step": self.step_count, "epoch": self.epoch, "samples_seen": self.samples_seen,
                         "micro_batch_size": self.micro_batch_size, "world_size": self.info.world_size},
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "loader": (self._loader.state_dict(exclude_last_batch=exclude_last_batch)
                       if self._loader is not None else None),
            "extra_state": {k: v.state_dict() for k, v in self.extra_state.items()},
            "extras": dict(self.extras),
        }
        if not self.sharded:
            state["model"] = gdist.unwrap(self.model).state_dict()
            state["optimizer"] = self.optimizer.state_dict() if self.optimizer is not None else None
        return state

    def save(self, reason: str = "manual", *, wait: bool = False) -> Checkpoint | None:
        """Checkpoint now (all ranks must call it). Returns the checkpoint (rank 0, synchronous saves)."""
        return self._save(reason=reason, wait=wait)

    def _save(self, *, reason: str, exclude_last_batch: bool = False, wait: bool = False,
              rng: dict[str, Any] | None = None) -> Checkpoint | None:
        self._last_save_s = time.monotonic()
        # Every rank's generators, rank-indexed.
        rng_states = gdist.all_gather_object(rng if rng is not None else capture_rng_state())
        state = self.state_dict(exclude_last_batch=exclude_last_batch)
        state["rng"] = rng_states
        meta = {"reason": reason, "micro_batch_size": self.micro_batch_size, "samples_seen": self.samples_seen}
        step, epoch = self.step_count, state["progress"]["epoch"]
        if self.sharded:
            try:
                ckpt = save_sharded(self.store, step, epoch, self.model, self.optimizer, state, meta)
            except GuardError as exc:
                self._save_failed(exc)
                return None
            if ckpt is not None:
                self._saved(ckpt, reason, 0.0)
            return ckpt
        errors: list[str] = []
        ckpt = None
        if self.info.is_writer:
            t0 = time.perf_counter()
            try:
                self._saver.wait()  # one save in flight; and its buffers are reused below
            except GuardError as exc:  # the previous background save failed: report it, still save now
                errors.append(str(exc))
            try:
                if self.async_save and not wait:
                    snapshot = self._staging.copy(state)  # the only part that blocks training
                    blocked_s = time.perf_counter() - t0
                    self._saver.submit(lambda: self._write(snapshot, step, epoch, meta, reason, blocked_s))
                else:
                    ckpt = self._write(state, step, epoch, meta, reason, None)
            except GuardError as exc:
                errors.append(str(exc))
        # Every rank learns the outcome (and waits for it: no rank runs ahead of a synchronous save), so a
        # failure warns or raises on all ranks alike instead of leaving some inside the next collective.
        for message in gdist.broadcast_object(errors):
            self._save_failed(GuardError(message))
        return ckpt

    def _write(self, state: Any, step: int, epoch: int, meta: dict, reason: str, blocked_s: float | None) -> Checkpoint:
        t0 = time.perf_counter()
        ckpt = self.store.save(state, step, epoch, meta=meta, world_size=self.info.world_size)
        write_s = time.perf_counter() - t0
        self._saved(ckpt, reason, write_s if blocked_s is None else blocked_s, write_s)
        return ckpt

    def _saved(self, ckpt: Checkpoint, reason: str, blocked_s: float, write_s: float | None = None) -> None:
        self.last_checkpoint = ckpt
        self.save_failures_in_row = 0
        self.saves_ok += 1
        size = ckpt.manifest.total_bytes
        self._event("checkpoint", f"{ckpt.path.name} ({reason}, {size / 2**20:.1f} MiB, training blocked "
                                  f"{blocked_s:.3f}s{'' if write_s is None else f', written in {write_s:.3f}s'})")
        warning = low_space_warning(self.store.directory, size, self.min_free_checkpoints)
        if warning and not self._warned_space:
            self._warned_space = True
            self._event("low_disk_space", warning, say=False)  # the warning says it
            warnings.warn(warning, stacklevel=5)

    def _save_failed(self, exc: GuardError) -> None:
        self._event("checkpoint_failed", str(exc), say=False)  # the warning or the exception says it
        self.save_failures_in_row += 1
        if self.on_save_error == "raise":
            raise exc
        if self.save_failures_in_row >= self.max_save_failures:
            raise GuardError(f"{self.save_failures_in_row} checkpoint saves in a row failed, the run stops "
                             f"(max_save_failures={self.max_save_failures}); last: {exc}")
        warnings.warn(str(exc), stacklevel=4)  # points at the user's guard.step / guard.save call

    def _surface_async_error(self) -> None:
        """A failed background save is reported at the next call (policy: warn or raise)."""
        try:
            self._saver.check()
        except GuardError as exc:
            self._save_failed(exc)

    def wait_for_save(self) -> Checkpoint | None:
        """Block until a background save finished (its error raised per policy)."""
        try:
            return self._saver.wait()
        except GuardError as exc:
            self._save_failed(exc)
            return None

    # -- resume ----------------------------------------------------------------------------------
    def resume(self, *, map_location: Any = "cpu") -> Checkpoint | None:
        """Load the newest checkpoint that verifies and holds finite values (all ranks the same one); None
        when there is none. What a killed save left is first put back in place (``CheckpointStore.recover``)."""
        if self.info.is_writer:
            self._recover_leftovers()
        refused: dict[str, str] = {}  # verified, but refused once loaded (non-finite values): name -> reason
        reported: set[str] = set()
        while True:
            found: tuple[str | None, list[str]] = (None, [])
            if self.info.is_writer:
                ckpt, skipped = self.store.latest(exclude=refused)
                for s in skipped:
                    # the reason names the checkpoint already when it comes from reading it
                    reason = s.reason if s.reason.startswith(f"{s.path.name}:") else f"{s.path.name}: {s.reason}"
                    if s.path.name not in reported:
                        reported.add(s.path.name)
                        self._event("checkpoint_skipped", f"skipped {reason}")
                found = (str(ckpt.path) if ckpt else None, [s.reason for s in skipped])
            path, skipped_reasons = gdist.broadcast_object(found)
            skipped_reasons = list(refused.values()) + skipped_reasons
            if path is None and refused and self.sharded:  # DCP loaded them in place: the model holds them
                raise GuardError(f"{next(iter(refused.values()))}, and no older checkpoint verifies: the sharded "
                                 "model now holds those values; remove the checkpoints to start over")
            if path is None and skipped_reasons and not self.allow_fresh:
                raise GuardError(f"{len(skipped_reasons)} checkpoint(s) in {self.store.directory} and none verifies "
                                 f"({'; '.join(_shorten(r) for r in skipped_reasons[:3])}): refusing to start from "
                                 "step 0 over them; pass allow_fresh=True (--fresh) to start over")
            if path is None:
                self._say(f"no checkpoint in {self.store.directory}: starting from step 0")
                return None
            ckpt = self.store.verify(Path(path), checksums=False)  # rank 0 checked the checksums
            reason = self._load_verified(ckpt, map_location)
            if reason is None:
                break
            refused[ckpt.path.name] = reason
            self._event("checkpoint_refused", f"refused {reason}; falling back to the previous verified checkpoint")
        self.last_checkpoint = ckpt
        self._event("resumed", f"resumed from {ckpt.path.name} (step {self.step_count}, epoch {self.epoch}, "
                               f"sha256 verified)")
        return ckpt

    def _recover_leftovers(self) -> None:
        recovery = self.store.recover()
        for leftover, final in recovery.placed.items():
            self._event("checkpoint_recovered", f"recovered {final.name} from {leftover}, left by a save that "
                                                "was killed")
        if recovery.removed:
            self._say(f"removed {len(recovery.removed)} leftover(s) of a killed run: "
                      + ", ".join(p.name for p in recovery.removed))

    def _load_verified(self, ckpt: Checkpoint, map_location: Any) -> str | None:
        """Load ``ckpt`` into this run; the reason (naming it) when its values are not finite on some rank."""
        expected = "torch.distributed.checkpoint" if self.sharded else "torch.save"
        if ckpt.manifest.format != expected:
            raise GuardError(f"{ckpt.path.name} is a {ckpt.manifest.format!r} checkpoint; this Guard "
                             f"(sharded={self.sharded}) reads {expected!r} ones")
        try:
            state, nonfinite = self._load(ckpt, map_location)
        except GuardError:
            raise
        except Exception as exc:  # verified bytes that are not this run's state (another model, a crafted file)
            raise GuardError(f"{ckpt.path.name} verifies but does not fit this run: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
        # Every rank decides alike: with sharded states one rank's shard alone may hold the NaN.
        everywhere = [n for names in gdist.all_gather_object(nonfinite) for n in names]
        if everywhere:  # an older checkpoint's load overwrites whatever of these was applied
            return f"{ckpt.path.name}: holds NaN/Inf values ({', '.join(everywhere[:3])})"
        self.load_state_dict(state)
        return None

    def _load(self, ckpt: Checkpoint, map_location: Any) -> tuple[Mapping[str, Any], list[str]]:
        """The state in ``ckpt`` (model and optimizer applied unless they hold non-finite values) and the
        names of those values."""
        model = gdist.unwrap(self.model)
        buffers = [f"model.{name}" for name, _ in model.named_buffers()]
        if self.sharded:
            state = load_sharded(self.store, ckpt, self.model, self.optimizer)
            # This rank's shards as loaded (parameters and optimizer state, no state_dict(): under FSDP
            # that would gather the full tensors).
            groups = {"model": dict(model.named_parameters()),
                      "optimizer": list(self.optimizer.state.values()) if self.optimizer is not None else None}
            return state, nonfinite_names(groups)
        state = self.store.load_state(ckpt, map_location=map_location, trust_pickle=self.trust_pickle)
        if not isinstance(state, Mapping) or not isinstance(state.get("model"), Mapping):
            raise GuardError(f"{ckpt.path.name}: state.pt holds no model state of a Guard")
        nonfinite = nonfinite_names({"model": state["model"], "optimizer": state.get("optimizer")}, nan_only=buffers)
        if not nonfinite:
            model.load_state_dict(state["model"])
            if self.optimizer is not None and state.get("optimizer") is not None:
                self.optimizer.load_state_dict(state["optimizer"])
        return state, nonfinite

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore everything but model and optimizer (loaded by ``resume`` according to the format)."""
        progress = state["progress"]
        self.step_count = int(progress["step"])
        self.samples_seen = int(progress.get("samples_seen", 0))
        if progress.get("micro_batch_size") is not None:
            self.micro_batch_size = int(progress["micro_batch_size"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])
        if self._loader is not None and state.get("loader") is not None:
            self._loader.load_state_dict(state["loader"])
        for name, obj in self.extra_state.items():
            if name in state.get("extra_state", {}):
                obj.load_state_dict(state["extra_state"][name])
        self.extras = dict(state.get("extras") or {})
        rngs = state.get("rng") or []
        if rngs:
            if self.info.rank >= len(rngs):
                self._say(f"rank {self.info.rank} has no saved RNG state (world size grew): using rank 0's")
            restore_rng_state(rngs[self.info.rank] if self.info.rank < len(rngs) else rngs[0])

    # -- preemption and shutdown -----------------------------------------------------------------
    def _preempted(self) -> None:
        left = self.preemption.seconds_left()
        self._event("preempted", f"signal received; checkpointing step {self.step_count}"
                                 + (f" ({left:.1f}s of grace left)" if left is not None else ""))
        self._save(reason="preempted", wait=True)
        self.stop_requested = True
        if self.exit_on_preempt:
            self.close()
            self._say(f"exiting with code {self.preemption.exit_code} (restart me to resume)")
            sys.exit(self.preemption.exit_code)

    def close(self, *, check: bool = True) -> None:
        """Finish a background save, stop watching signals, flush the run log. Call once at the end.

        GuardError when saves were attempted and every one failed (``check``): the run is not resumable,
        and its exit code must say so."""
        try:
            self.wait_for_save()
        finally:
            self.preemption.uninstall()
            if self.run_log is not None:
                self._drain_events()
                _record_torch_memory(self.run_log)
                self.run_log.flush()
                if self._owns_run_log:
                    self.run_log.close()
                    self.run_log = None
        if check and self.save_failures_in_row and not self.saves_ok:
            raise GuardError(f"every checkpoint save of this run failed ({self.save_failures_in_row}): "
                             f"nothing in {self.store.directory} to resume from")

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(check=exc_type is None)

    # -- messages --------------------------------------------------------------------------------
    def _event(self, kind: str, message: str, *, say: bool = True) -> None:
        if say:
            self._say(message)
        if threading.current_thread() is not threading.main_thread():
            # The background saver must not share the SQLite connection: the main thread writes it later.
            self._pending_events.append((kind, message, time.time()))
        elif self.run_log is not None:
            self._drain_events()
            self.run_log.log_event(kind, message)

    def _drain_events(self) -> None:
        while self._pending_events and self.run_log is not None:
            kind, message, t_s = self._pending_events.popleft()
            self.run_log.log_event(kind, message, t_s=t_s)

    def _say(self, message: str) -> None:
        """What a person watching the run should know (``verbose``; rank 0 only): the ``gpuwise.guard``
        logger, at WARNING, so it shows even where the training script configured no logging."""
        if self.verbose and self.info.is_writer:
            log.warning("%s", message)

    def _flush_log(self) -> None:
        if self.run_log is not None:
            self.run_log.flush()


def _record_stack(run_log: RunLog, workload: Any) -> None:
    """The job's workload (a ``gpuwise.workload.Workload`` or its ``to_dict()``) and the torch/CUDA versions,
    so that ``gpuwise report`` compares the run with gpuwise's prediction and ``gpuwise calibrate`` learns
    from it."""
    if workload is not None:
        run_log.set_meta("workload", dict(workload.to_dict() if hasattr(workload, "to_dict") else workload))
    run_log.set_meta("torch_version", torch.__version__)
    run_log.set_meta("cuda_version", torch.version.cuda or "")


def _record_torch_memory(run_log: RunLog) -> None:
    """PyTorch's peak allocated/reserved memory per device, as the ``gpuwise run --torch-hook`` event."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    import json

    devices = [{"device": d, "max_allocated_bytes": int(torch.cuda.max_memory_allocated(d)),
                "max_reserved_bytes": int(torch.cuda.max_memory_reserved(d))}
               for d in range(torch.cuda.device_count()) if torch.cuda.max_memory_reserved(d) > 0]
    if devices:
        run_log.log_event("torch_memory", json.dumps({
            "pid": os.getpid(), "devices": devices, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "gpu_name": torch.cuda.get_device_name(devices[0]["device"])}))


def _shorten(reason: str, limit: int = 160) -> str:
    """One skipped checkpoint's reason for a one-line error: whole if short, else cut with an ellipsis."""
    return reason if len(reason) <= limit else reason[: limit - 1].rstrip() + "…"
