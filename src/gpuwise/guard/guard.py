"""``Guard``: the few lines a plain PyTorch loop adds to survive kills, preemption and out-of-memory.

    guard = Guard("ckpt/", model, optimizer, scheduler=sched, every_steps=200, run_log="run.db")
    loader = guard.loader(dataset, batch_size=64, seed=0)
    guard.resume()                                   # no-op on the first run
    for batch in guard.batches(max_steps=10_000):    # epochs, resumed mid-epoch
        guard.step(batch, lambda b: loss_fn(model(b[0]), b[1]))
        ema.update_parameters(model)                 # the caller's code for the step: in its checkpoint
    guard.close()                                    # saves the last step if it has no checkpoint yet

``step`` runs forward+backward through ``loss_fn`` (which returns the *mean* loss of the samples it got),
the optimizer, scheduler and GradScaler steps, logs the metrics, and decides whether a checkpoint is due.
The checkpoint (periodic or on preemption, and the exit after the latter) is written at the step's end as
the caller sees it: when ``batches()`` is asked for the next batch, or at the next ``step``,
``wait_for_save`` or ``close``, so it holds whatever the caller did after ``step`` returned (an EMA update,
``extras``). The pieces it is made of (CheckpointStore, ResumableDataLoader, PreemptionHandler, the OOM
helpers) work on their own for loops that need more control.
"""

from __future__ import annotations

import logging

import atexit
import collections
import inspect
import json
import numbers
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from gpuwise.errors import GpuwiseError
from gpuwise.guard import distributed as gdist
from gpuwise.guard import messages
from gpuwise.guard.accumulate import LossFn, accumulate_gradients, apply_update
from gpuwise.guard.async_save import AsyncSaver, HostStaging
from gpuwise.guard.checkpoint import Checkpoint, CheckpointStore
from gpuwise.guard.dirlock import DirectoryLock, lock_directory
from gpuwise.guard.errors import GuardError, check_flag, check_number
from gpuwise.guard.frozen import FrozenWeights
from gpuwise.guard.gradnoise import GradNoiseSample, MicroGradTracker
from gpuwise.guard.oom import (agree_on_micro_batch, batch_size_of, free_failed_step, is_oom, smaller_micro_batch,
                               uneven_split_refusal)
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.guard.rng import (capture_rng_state, restore_rng, restore_rng_state, rng_state_dict, seed_rng_for_rank,
                               snapshot_rng)
from gpuwise.guard.sampler import ResumableDataLoader
from gpuwise.guard.sharded import load_sharded, save_sharded
from gpuwise.guard.state_file import diverged_reason, state_nonfinite
from gpuwise.guard.storage import is_network_fs, low_space_warning
from gpuwise.guard.train_end import (CRASHED, FINISHED, PREEMPTED, STOPPED, TrainEnd, end_of_exception,
                                     is_clean_exit, record_train_end)
from gpuwise.runlog import (CUDA_VERSION_KEY, PREEMPTED_EVENT, STEP_TIME_METRIC, TORCH_MEMORY_EVENT,
                            TORCH_VERSION_KEY, WORKLOAD_KEY, RunLog)
from gpuwise.text import clipped
from gpuwise.workload import Workload


log = logging.getLogger(__name__)

# The micro-batch cap a step proposes to the other ranks when none is in force (the whole batch, whatever its size)
UNCAPPED_SAMPLES = 2 ** 62

# The version of the state a checkpoint holds (``state_dict``), for what its values mean. 2: ``progress.samples_seen``
# counts the samples of every rank; 1 (checkpoints of earlier gpuwise): rank 0's samples only.
STATE_FORMAT_VERSION = 2

SKIPPED_REASON_CHARS = 160   # one skipped checkpoint's reason in the one-line refusal

# Flags a Workload sets from how it was given (a CLI default or the user's choice), not the job itself
_WORKLOAD_PROVENANCE = ("precision_default", "optimizer_default", "engine_default")

# This package's directory: warnings point at the first frame outside it (``_caller_stacklevel``)
_GUARD_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Guard:
    """Checkpoints, resume, preemption and OOM recovery around one model and optimizer.

    ``every_steps`` / ``every_minutes``: periodic checkpoints (either, both or none); a checkpoint is also
    written on the preemption signal and, when ``save_on_crash``, when ``loss_fn`` raises. ``keep``: the
    newest checkpoints kept. ``async_save``: write in a background thread (training waits only for a copy
    to host memory). ``on_save_error``: ``"warn"`` (training continues, the previous checkpoint is intact)
    or ``"raise"``; with ``"warn"``, ``max_save_failures`` saves failing in a row end the run (GuardError),
    and so does ``close()`` when every save of the run failed. ``allow_fresh``: start from step 0 even
    though checkpoints exist and none verifies (otherwise ``resume`` refuses, naming them). ``micro_batch_size``: start with micro-batches of this size (None: whole batch); it
    shrinks on OOM and is remembered in checkpoints (the attribute reads the micro-batch a full batch is split
    into, see ``micro_batch_size``). ``on_micro_grads``: called with a
    :class:`GradNoiseSample` each step that has two batch sizes to compare (``measure_grad_noise``).
    ``workload``: the job as gpuwise describes it (a ``Workload`` or its ``to_dict()``; one that
    ``Workload.from_dict`` refuses raises GuardError), recorded in the run log with each step's wall time and
    PyTorch's peak memory: ``gpuwise report`` then compares the run with gpuwise's prediction, and ``gpuwise
    calibrate`` learns from it (docs/calibrate.md). A log that already holds a workload (``gpuwise run --model
    …`` around the script) keeps it; a different one here is warned about, not written over it.

    A checkpoint holds the model's trained parameters and its buffers, not its frozen parameters
    (``requires_grad=False``: a LoRA/QLoRA base, a frozen backbone) that were frozen and unchanged all run, which
    the script loads before ``resume()``; it holds their fingerprint, and a resume refuses a model whose left-out
    weights differ (``frozen``). A frozen weight that changes (an EMA teacher) or trained earlier is saved.
    ``save_frozen=True`` saves them too (a script that does not rebuild them). FSDP's sharded checkpoints hold all.

    One run per ``directory``: rank 0 locks it while the Guard lives (until ``close``), and a Guard of another
    live process on it raises GuardError naming that process (``dirlock``), after waiting ``dirlock.WAIT_S`` for
    it to end; a run that died never blocks. ``lock_directory=False`` takes no lock and checks none (for a
    directory whose lock outlived its owner). Under torchrun create the Guard after ``init_process_group``.
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
                 workload: Mapping[str, Any] | Any = None, lock_directory: bool = True,
                 save_frozen: bool = False) -> None:
        # Every argument checked before anything is created (the directory, the run log, signal handlers).
        if on_save_error not in ("warn", "raise"):
            raise GuardError(f"on_save_error must be 'warn' or 'raise', got {on_save_error!r}")
        check_number("max_save_failures", max_save_failures, 1, whole=True)
        check_number("every_steps", every_steps, 1, whole=True, none="no checkpoints by step count")
        check_number("every_minutes", every_minutes, 0, above=True, none="no checkpoints by time")
        check_number("micro_batch_size", micro_batch_size, 1, whole=True, none="the whole batch")
        check_number("clip_grad_norm", clip_grad_norm, 0, above=True, none="no clipping")
        check_number("min_free_checkpoints", min_free_checkpoints, 0, whole=True)
        check_exit_code(exit_code)
        check_flag("lock_directory", lock_directory)
        check_flag("save_frozen", save_frozen)
        check_scheduler(scheduler)
        gdist.require_process_group()  # else every rank would take itself for rank 0
        workload_record = _checked_workload(workload)
        self.preemption = PreemptionHandler(preempt_signals, grace_s=grace_s, exit_code=exit_code,
                                            on_grace_expired=self._flush_log, restart_point=self._restart_point)
        self.store = CheckpointStore(directory, keep=keep)
        self.info = gdist.dist_info()
        if self.info.is_writer or (sharded if sharded is not None else gdist.is_fsdp(model)):
            self.store.check_writable()  # now, not at the first save an hour in
        # before anything of this run is written or pruned
        self._directory_lock = self._lock_directory() if lock_directory else None
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
        self._micro_batch_cap = micro_batch_size  # None: the whole batch; halved on OOM, saved in checkpoints
        self.clip_grad_norm = clip_grad_norm
        self.measure_grad_noise = measure_grad_noise
        self.on_micro_grads = on_micro_grads
        self.extra_state = dict(extra_state or {})
        self.extras: dict[str, Any] = {}  # the user's own small values (tensors / plain types), saved too
        self.sharded = gdist.is_fsdp(model) if sharded is None else sharded
        self.trust_pickle = trust_pickle
        self.save_frozen = save_frozen
        self._frozen = FrozenWeights()   # what of the model a checkpoint leaves out: unchanged frozen weights
        self._start_frozen_baseline()
        self.min_free_checkpoints = min_free_checkpoints
        self.verbose = verbose
        self.step_count = 0        # optimizer steps completed
        self.samples_seen = 0      # samples of completed steps over all ranks (the same on every rank)
        # Samples per optimizer step over all ranks (micro-batch x accumulation x world size): the batch the
        # learning-rate schedule is fitted to. Saved in checkpoints; a resume at another one is said once.
        self.effective_batch_size: int | None = None
        self._effective_batch_at_resume: int | None = None  # the checkpoint's, until this run's is known
        self._largest_batch_per_rank = 0   # of this run's steps (a loop of the user's own)
        # (This rank's full batch, the sum of every rank's) as of the last step: the sum is the effective batch, and
        # is gathered again only at a step where some rank's full batch changed while the ranks' differ.
        self._full_batches: tuple[int, int] | None = None
        self._short_batch_after_resume = False  # the first step after the resume was smaller: maybe an epoch's end
        self.last_loss: float | None = None
        self._lr_used: float | None = None
        self.last_checkpoint: Checkpoint | None = None
        self.stop_requested = False
        self._loader: ResumableDataLoader | None = None
        self._pending_loader_state: dict[str, int] | None = None  # resumed before a loader was attached
        # The save due at the end of the step as the caller sees it ("periodic", "preempted"), and the data
        # position when that step completed.
        self._due: str | None = None
        self._loader_at_step_end: tuple[int, dict[str, int]] | None = None
        self._saved_step: int | None = None      # the step last saved (or attempted) or resumed
        self._step_failed = False                # the last step() raised
        self._failure: TrainEnd | None = None     # how the run ends if the last step's exception ends it
        # That exception itself, until the next step() or close(): a with block it leaves records _failure (which
        # says which step raised). Dropped then, as its traceback holds the failed step's tensors.
        self._failed_exc: BaseException | None = None
        self._end: TrainEnd | None = None         # known before close(): a preemption's exit, a with block's error
        self._end_recorded = False                # in the run log (once, at close or at interpreter exit)
        self._pid = os.getpid()
        self._warned_grace = False
        self._saver = AsyncSaver()
        self._staging = HostStaging()
        self._pending_events: collections.deque[tuple[str, str, float]] = collections.deque()
        self._last_save_t = time.monotonic()
        self._warned_space = False
        self._owns_run_log = False
        self.run_log: RunLog | None = None
        if isinstance(run_log, RunLog):
            self.run_log = run_log
        elif run_log is not None and self.info.is_writer:
            self.run_log, self._owns_run_log = RunLog(run_log), True
        self._last_step_end_s: float | None = None
        if self.run_log is not None:
            _record_stack(self.run_log, workload_record)
            _UNENDED.add(self)  # how it ended is recorded at close(), or at interpreter exit
        try:
            self.preemption.install()
        except (RuntimeError, ValueError) as exc:  # not the main thread (e.g. inside a notebook worker)
            self._say(f"preemption signals not watched: {exc}")
        if self.info.is_writer and is_network_fs(Path(directory).absolute().parent):
            self._say(f"{directory} is on a network file system: saves pay a round trip per fsync; "
                      "async_save=True keeps that off the training loop")

    def _lock_directory(self) -> DirectoryLock | None:
        """Refuse (GuardError on every rank) when another live process holds the checkpoint directory. Rank 0
        holds it: the one process that creates, renames and prunes checkpoints (``dirlock``). Whatever fails on
        rank 0 (a full disk writing the lock file) is broadcast too: no rank is left waiting for the verdict."""
        cause, held = None, None
        if self.info.is_writer:
            try:
                held = lock_directory(self.store.directory)
            except Exception as exc:  # noqa: BLE001 - every rank must learn of it
                cause = exc
        message = gdist.broadcast_object(None if cause is None else _lock_failure(self.store.directory, cause))
        if message:
            raise GuardError(message) from cause
        return held

    # -- data ------------------------------------------------------------------------------------
    def loader(self, dataset: Any, batch_size: int, *, seed: int = 0, shuffle: bool = True,
               drop_last: bool = False, **loader_kwargs: Any) -> ResumableDataLoader:
        """A resumable DataLoader, sharded by rank under torchrun, whose position is checkpointed."""
        return self.attach_loader(ResumableDataLoader(dataset, batch_size, seed=seed, shuffle=shuffle,
                                                      rank=self.info.rank, world_size=self.info.world_size,
                                                      drop_last=drop_last, **loader_kwargs))

    def attach_loader(self, loader: ResumableDataLoader) -> ResumableDataLoader:
        """Checkpoint ``loader``'s position; a position ``resume()`` read before it was attached applies now."""
        if not isinstance(loader, ResumableDataLoader):
            raise GuardError(f"attach_loader takes a gpuwise ResumableDataLoader, got {type(loader).__name__}: a "
                             "plain DataLoader cannot resume mid-epoch; build it with guard.loader(dataset, "
                             "batch_size, seed=..., num_workers=...)")
        self._loader = loader
        if self._pending_loader_state is not None:
            loader.load_state_dict(self._pending_loader_state)
            self._pending_loader_state = None
        return loader

    @property
    def epoch(self) -> int:
        if self._loader is not None:
            return self._loader.epoch
        return int(self._pending_loader_state["epoch"]) if self._pending_loader_state is not None else 0

    def batches(self, max_steps: int | None = None, max_epochs: int | None = None) -> Iterator[Any]:
        """Batches across epochs from the attached loader until ``max_steps`` steps / ``max_epochs`` epochs."""
        if self._loader is None:
            raise GuardError("call guard.loader(...) (or attach_loader) before guard.batches()")
        yield from self._batches(max_steps, max_epochs)
        # The loop ended (not broken off): the last step's save, and the last step saved if it was not.
        self._save_due()
        self._save_final()

    def _batches(self, max_steps: int | None, max_epochs: int | None) -> Iterator[Any]:
        while not self.stop_requested:
            if max_steps is not None and self.step_count >= max_steps:
                return
            if max_epochs is not None and self.epoch >= max_epochs:
                return
            yielded = False
            for batch in self._loader:
                yielded = True
                yield batch
                # The caller's code for this step has run: its checkpoint (and a preemption's exit) now.
                self._save_due()
                if self.stop_requested or (max_steps is not None and self.step_count >= max_steps):
                    return
            if not yielded:  # an empty epoch is no progress: the next one would be empty too, forever
                raise GuardError(self._loader.no_batch_message())

    # -- one training step -----------------------------------------------------------------------
    def step(self, batch: Any, loss_fn: LossFn) -> float:
        """Forward+backward (split into micro-batches as memory requires), optimizer/scheduler/scaler
        steps and metrics. Returns the batch's mean loss. A checkpoint due after this step (periodic, or on
        preemption, then the exit) is written when the caller's code for the step has run: at the next
        ``batches()`` iteration, ``step``, ``wait_for_save`` or ``close``."""
        self._save_due()  # the previous step's, in a loop that does not use batches()
        self._step_failed = False
        self._failed_exc = None
        if not self.info.is_distributed:
            self._surface_async_error()  # under torchrun, the next save reports it on every rank
        self._warn_deferred()
        self._drain_events()
        total = batch_size_of(batch)
        micro = min(self._micro_batch_cap or total, total)
        full_here = self._full_batch_after(total)
        full_kept_here = self._full_batches is not None and self._full_batches[0] == full_here
        step_start_s = self._last_step_end_s or time.perf_counter()   # wall time per step: data loading too
        optimizer_started = False
        crash_save = self.save_on_crash and not self.info.is_distributed
        # The generators as the step found them: an OOM retry starts from them (every rank, as every rank
        # retries), and a crash checkpoint replays the failed step exactly.
        rng_at_start = snapshot_rng()
        try:
            while True:
                tracker = self._tracker(total, micro)
                loss_sum, ok, ran_out_here = accumulate_gradients(self.model, batch, micro, loss_fn,
                                                                  scaler=self.scaler, tracker=tracker,
                                                                  sharded=self.sharded)
                # Whether every rank's micro-batches went through is agreed as such (all_ok), not read off the sizes:
                # ranks may hold other caps (micro_batch_size= is a rank's own) and other batch sizes (a loop of the
                # user's own). A rank that succeeded proposes its cap in force, a failed one less than its micro-batch.
                # The same reduction carries the smallest and largest of the ranks' batches and full batches, and
                # whether every rank's full batch is the one of the last step: what the step's sums need.
                proposal = (self._micro_batch_cap or UNCAPPED_SAMPLES) if ok else smaller_micro_batch(micro)
                (agreed, all_ok, not_preempt, not_time, fewest, minus_most, fewest_full, minus_most_full,
                 fulls_kept) = agree_on_micro_batch(
                    [proposal, 1 if ok else 0, 0 if self.preemption.requested else 1,
                     0 if self._time_save_due() else 1, total, -total, full_here, -full_here,
                     1 if full_kept_here else 0])
                if all_ok:
                    break
                free_failed_step(self.optimizer, model=self.model)
                if agreed == 0:
                    raise GuardError(f"out of memory even with micro-batches of 1 sample (batch of {total})")
                refusal = uneven_split_refusal(fewest, -minus_most, agreed)
                if refusal:
                    raise GuardError(f"step {self.step_count + 1}: out of memory, and {refusal}")
                where = self._oom_ranks(ran_out_here)
                self._event("oom_recovered", f"step {self.step_count + 1}: out of memory with micro-batch {micro}"
                                             f"{where}; retrying the same batch of {total} as micro-batches of "
                                             f"{agreed}")
                self._micro_batch_cap = agreed
                micro = min(agreed, total)
                # The failed attempt's forwards drew random numbers (dropout): drawing on from there would
                # make the retried step, and every later random number, depend on where the OOM hit.
                restore_rng(rng_at_start)
            full_range = (fewest_full, -minus_most_full)
            step_samples, full_batches = gdist.sums_over_ranks(
                [total, full_here], [gdist.sum_if_even(total, fewest, -minus_most),
                                     self._known_full_batches(full_here, full_range, fulls_kept == 1)])
            optimizer_started = True
            grad_norm, self._lr_used = apply_update(self.model, self.optimizer, scheduler=self.scheduler,
                                                    scaler=self.scaler, clip_grad_norm=self.clip_grad_norm)
        except BaseException as exc:  # KeyboardInterrupt (Ctrl-C) and a collective's RuntimeError too
            self._step_failed = True
            self._failure = end_of_exception(exc, self.step_count, f"step {self.step_count + 1} raised ", in_step=True)
            self._failed_exc = exc
            try:
                # Only before the optimizer step (a half-applied update must not be saved), and not under
                # torchrun: the other ranks would wait in the save's collectives for a rank that is gone.
                if (crash_save and isinstance(exc, Exception) and not optimizer_started and not is_oom(exc)
                        and not isinstance(exc, GuardError)):
                    free_failed_step(self.optimizer, model=self.model)
                    self._say(f"step {self.step_count + 1} raised {type(exc).__name__}; saving the state after "
                              f"step {self.step_count} before re-raising")
                    self._save(reason="crash", exclude_last_batch=True, wait=True, rng=rng_state_dict(rng_at_start))
            finally:
                self._commit_log_quietly()  # the steps logged so far, whatever the process does next
            raise
        self.step_count += 1
        self._failure = None  # the caller caught the last step's exception and went on
        self.samples_seen += step_samples
        self._full_batches = (full_here, full_batches)
        if self._loader is None:
            self._largest_batch_per_rank = full_here
        self._note_effective_batch(full_batches, full_range)
        self.last_loss = loss_sum
        self._last_step_end_s = time.perf_counter()
        self._log_step(loss_sum, step_samples, micro, grad_norm, tracker, self._last_step_end_s - step_start_s)
        if self._loader is not None:
            self._loader_at_step_end = (self.step_count, self._loader.state_dict())
        if not_preempt == 0:
            self._due = "preempted"
            self.stop_requested = True
        elif (self.every_steps and self.step_count % self.every_steps == 0) or not_time == 0:
            self._due = "periodic"
        return loss_sum

    def _note_effective_batch(self, full_batches: int, full_range: tuple[int, int]) -> None:
        """The run's effective batch: ``full_batches``, the sum of the ranks' full batches (``_full_batch_after``: the
        loader's batch, else the largest of this run's steps, as an epoch's short last batch does not lower it), whose
        smallest and largest are ``full_range``. After a resume from a checkpoint trained with another one, say so
        once: at the first step, unless that step's batch is smaller and there is no loader to tell a full batch from
        an epoch's short last one; then at the second (epochs of more than one step never end twice in a row), and
        not at all if the larger of the two is the checkpoint's."""
        new, old = full_batches, self._effective_batch_at_resume
        if old is not None and new < old and self._loader is None and not self._short_batch_after_resume:
            self._short_batch_after_resume = True   # the checkpoint's batch stays recorded until the next step
            return
        self.effective_batch_size, self._effective_batch_at_resume = new, None
        if old is not None and old != new:
            fewest, most = full_range
            per_rank = (f"{most} per rank x {self.info.world_size} rank(s)" if fewest == most
                        else f"{fewest} to {most} per rank over {self.info.world_size} ranks")
            self._event("effective_batch_changed",
                        f"effective batch changed on resume: the checkpoint was trained with {old} samples per "
                        f"optimizer step, this run takes {self.effective_batch_size} ({per_rank}); the learning-rate "
                        f"schedule was fitted to {old}: scale the learning rate or the per-rank batch if that was not "
                        "intended")

    def _known_full_batches(self, full_here: int, full_range: tuple[int, int], kept_everywhere: bool) -> int | None:
        """The sum of the ranks' full batches where it is known without a gather: the world size times this rank's
        where every rank's is the same, the last step's sum where no rank's changed since; else None."""
        even = gdist.sum_if_even(full_here, *full_range)
        if even is not None or not kept_everywhere or self._full_batches is None:
            return even
        return self._full_batches[1]

    def _full_batch_after(self, batch_this_rank: int) -> int:
        """Samples of a full batch on this rank once a step of ``batch_this_rank`` samples completes: the loader's
        batch size, else the largest batch of this run's steps (an epoch's short last batch is not one)."""
        if self._loader is not None:
            return self._loader.batch_size
        return max(self._largest_batch_per_rank, batch_this_rank)

    def _full_batch_per_rank(self) -> int | None:
        """This rank's full batch (``_full_batch_after``) as of the last step; None before the first step of a loop
        without a loader."""
        return self._full_batch_after(0) or None

    @property
    def micro_batch_size(self) -> int | None:
        """Samples per micro-batch of a full batch (``_full_batch_per_rank``): the whole batch until an OOM (or
        ``Guard(micro_batch_size=...)``) splits it, then the smaller size, which later steps keep. Before the first
        step of a loop without a loader, the batch is not known yet: the size given (or remembered in the
        checkpoint resumed from), None when there is none."""
        full = self._full_batch_per_rank()
        if full is None:
            return self._micro_batch_cap
        return min(self._micro_batch_cap or full, full)

    @micro_batch_size.setter
    def micro_batch_size(self, value: int | None) -> None:
        """Split later steps' batches into micro-batches of ``value`` samples (None: the whole batch)."""
        check_number("micro_batch_size", value, 1, whole=True, none="the whole batch")
        self._micro_batch_cap = value

    def _oom_ranks(self, ran_out_here: bool) -> str:
        """`` on rank 1 (of 2)`` under torchrun: the ranks whose own micro-batch ran out of memory (every rank
        is here: they agreed on the smaller micro-batch)."""
        if not self.info.is_distributed:
            return ""
        ranks = [r for r, out in enumerate(gdist.all_gather_object(ran_out_here)) if out]
        return f" on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} (of {self.info.world_size})"

    def _tracker(self, total: int, micro: int) -> MicroGradTracker | None:
        several = micro < total or self.info.is_distributed
        if not (self.measure_grad_noise and several) or self.sharded:
            return None
        return MicroGradTracker([p for p in self.model.parameters() if p.requires_grad])

    def _log_step(self, loss: float, step_samples: int, micro: int, grad_norm: float | None,
                  tracker: MicroGradTracker | None, step_time_s: float) -> None:
        """``step_samples``: the step's samples over all ranks (``sums_over_ranks``)."""
        noise = None
        if tracker is not None and grad_norm is not None:
            noise = tracker.sample(self.step_count, grad_norm ** 2, step_samples)
            if noise is not None and self.on_micro_grads is not None:
                self.on_micro_grads(noise)
        if self.run_log is None:
            return
        metrics: dict[str, float | None] = {"loss": loss, "lr": self._lr_used,
                                            "batch_size": step_samples,
                                            "micro_batch_size": micro, "grad_norm": grad_norm,
                                            "epoch": self.epoch, STEP_TIME_METRIC: step_time_s}
        if noise is not None:
            metrics.update(noise.as_metrics())
        self.run_log.log_train(self.step_count, **metrics)

    # -- checkpoints -----------------------------------------------------------------------------
    def _time_save_due(self) -> bool:
        return self.every_s is not None and time.monotonic() - self._last_save_t >= self.every_s

    def state_dict(self, *, exclude_last_batch: bool = False) -> dict[str, Any]:
        """Everything a resumed run needs to continue as if never stopped (tensors and plain types)."""
        state: dict[str, Any] = {
            "format_version": STATE_FORMAT_VERSION,
            "progress": {"step": self.step_count, "epoch": self.epoch, "samples_seen": self.samples_seen,
                         "micro_batch_size": self._micro_batch_cap, "world_size": self.info.world_size,
                         "effective_batch_size": self.effective_batch_size},
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "loader": (self._loader.state_dict(exclude_last_batch=exclude_last_batch)
                       if self._loader is not None else self._pending_loader_state),
            "extra_state": {k: v.state_dict() for k, v in self.extra_state.items()},
            "extras": dict(self.extras),
        }
        if not self.sharded:
            state["model"] = self._model_state(state)
            state["optimizer"] = self.optimizer.state_dict() if self.optimizer is not None else None
        return state

    def _model_state(self, state: dict[str, Any]) -> Mapping[str, Any]:
        """The model's state a checkpoint holds: its ``state_dict`` less its frozen parameters that the script
        rebuilds (``FrozenWeights.split``: frozen all run, unchanged), whose fingerprint goes into
        ``state["frozen"]``; the whole ``state_dict`` where none is left out or ``save_frozen`` (earlier gpuwise's
        format, without ``"frozen"``)."""
        model = gdist.unwrap(self.model)
        if self.save_frozen:
            return model.state_dict()
        kept, fingerprint = self._frozen.split(model)
        if fingerprint:
            state["frozen"] = fingerprint
        return kept

    def _start_frozen_baseline(self) -> None:
        """Fingerprint the model's parameters as the run starts (construction, ``resume()``): what a save may leave
        out is what is frozen and unchanged since. Not for sharded models or ``save_frozen`` (they save it all)."""
        if not (self.sharded or self.save_frozen):
            self._frozen.start(gdist.unwrap(self.model))

    def save(self, reason: str = "manual", *, wait: bool = False) -> Checkpoint | None:
        """Checkpoint now (all ranks must call it). Returns the checkpoint (rank 0, synchronous saves)."""
        self._due = None if self._due == "periodic" else self._due  # this save is the due one
        return self._save(reason=reason, wait=wait)

    def _save_due(self, *, exit_on_preempt: bool = True) -> None:
        """Write the checkpoint that the last step made due (the caller's code for that step has run); on
        preemption, then exit (``exit_on_preempt``)."""
        reason, self._due = self._due, None
        if reason == "preempted":
            self._preempted(exit_now=exit_on_preempt)
        elif reason is not None:
            self._save(reason=reason)

    def _save_final(self) -> None:
        """Save the last completed step when it has no checkpoint yet (a run shorter than ``every_steps``,
        a last step between two periodic saves)."""
        if self.step_count > 0 and self._saved_step != self.step_count and not self._step_failed:
            self._save(reason="final")

    def _save(self, *, reason: str, exclude_last_batch: bool = False, wait: bool = False,
              rng: dict[str, Any] | None = None) -> Checkpoint | None:
        self._last_save_t = time.monotonic()
        self._saved_step = self.step_count
        # Every rank's generators, rank-indexed.
        rng_states = gdist.all_gather_object(rng if rng is not None else capture_rng_state())
        state = self.state_dict(exclude_last_batch=exclude_last_batch)
        if (not exclude_last_batch and self._loader_at_step_end is not None
                and self._loader_at_step_end[0] == self.step_count):
            # The position when this step completed: a loop of the caller's own may have drawn the next batch.
            state["loader"] = dict(self._loader_at_step_end[1])
            state["progress"]["epoch"] = state["loader"]["epoch"]
        state["rng"] = rng_states
        meta = {"reason": reason, "micro_batch_size": self.micro_batch_size, "samples_seen": self.samples_seen,
                "effective_batch_size": self.effective_batch_size}
        step, epoch = self.step_count, state["progress"]["epoch"]
        if self.sharded:
            t0 = time.perf_counter()
            try:
                ckpt = save_sharded(self.store, step, epoch, self.model, self.optimizer, state, meta)
            except GuardError as exc:
                self._save_failed(exc)
                return None
            if ckpt is not None:
                self._saved(ckpt, reason, time.perf_counter() - t0)  # synchronous: training waited for all of it
            return ckpt
        errors: list[str] = []
        ckpt = None
        if self.info.is_writer:
            t0 = time.perf_counter()
            try:
                self._saver.wait()  # one save in flight; and its buffers are reused below
            except GuardError as exc:  # the previous background save failed: report it, still save now
                errors.append(str(exc))
            self._warn_deferred()
            try:
                if diverged := state_nonfinite(self.model, state):  # saved, it would prune the finite checkpoints a resume falls back to
                    raise self.store.save_failed(step, diverged_reason(diverged))
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
        self._warn_if_grace_too_short(blocked_s if write_s is None else write_s)
        warning = low_space_warning(self.store.directory, size, self.min_free_checkpoints)
        if warning and not self._warned_space:
            self._warned_space = True
            self._event("low_disk_space", warning, say=False)  # the warning says it
            self._warn(warning)

    def _warn_if_grace_too_short(self, save_s: float) -> None:
        """Once: a preemption's save (synchronous) would take about as long as this one did."""
        grace_s = self.preemption.grace_s
        if self._warned_grace or not self.preemption.signals or grace_s <= 0 or save_s <= grace_s:
            return
        self._warned_grace = True
        self._say(f"grace_s={grace_s:g}s is shorter than the last checkpoint save took ({save_s:.2f}s): a "
                  "preemption's save would be cut off by the watchdog, leaving the previous checkpoint; raise "
                  "grace_s (within the platform's grace period) or make the state smaller")

    def _restart_point(self) -> str:
        """What a restart resumes from (the grace watchdog says it as the process ends)."""
        if self.last_checkpoint is not None:
            return (f"the last complete checkpoint, {self.last_checkpoint.path.name}, is intact: the restart "
                    "resumes from it")
        try:
            older = self.store.step_dirs()
        except OSError:
            older = []
        if older:
            return (f"this run completed no checkpoint: the restart resumes from the newest one in "
                    f"{self.store.directory} that verifies")
        return "no complete checkpoint yet: the run restarts from step 0"

    def _save_failed(self, exc: GuardError) -> None:
        self._event("checkpoint_failed", str(exc), say=False)  # the warning or the exception says it
        self.save_failures_in_row += 1
        if self.on_save_error == "raise":
            raise exc
        if self.save_failures_in_row >= self.max_save_failures:
            raise GuardError(f"{self.save_failures_in_row} checkpoint saves in a row failed, the run stops "
                             f"(max_save_failures={self.max_save_failures}); last: {exc}")
        self._warn(str(exc))

    def _surface_async_error(self) -> None:
        """A failed background save is reported at the next call (policy: warn or raise)."""
        try:
            self._saver.check()
        except GuardError as exc:
            self._save_failed(exc)

    def wait_for_save(self) -> Checkpoint | None:
        """Write the checkpoint the last step made due (all ranks must call it then), and block until a
        background save finished (its error raised per policy)."""
        self._save_due()
        return self._wait_for_save()

    def _wait_for_save(self) -> Checkpoint | None:
        try:
            return self._saver.wait()
        except GuardError as exc:
            self._save_failed(exc)
            return None
        finally:
            self._warn_deferred()

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
            if path is None:
                refuse_fresh_start(self.store.directory, skipped_reasons, self.allow_fresh)
                self._say(f"no checkpoint in {self.store.directory}: starting from step 0")   # a fresh start moves nothing
                self._start_frozen_baseline()   # the base the script loaded before resume()
                return None
            ckpt = self.store.verify(Path(path), checksums=False)  # rank 0 checked the checksums
            reason = self._load_verified(ckpt, map_location)
            if reason is None:
                break
            refused[ckpt.path.name] = reason
            self._event("checkpoint_refused", f"refused {reason}; falling back to the previous verified checkpoint")
        self.last_checkpoint = ckpt
        self._saved_step = self.step_count
        self._due = None
        self._start_frozen_baseline()
        self._event("resumed", f"resumed from {ckpt.path.name} (step {self.step_count}, epoch {self.epoch}, "
                               f"sha256 verified){self._supersede_redone()}")
        return ckpt

    def _supersede_redone(self) -> str:
        """Move the run log's rows of the steps this run redoes (logged after the step it resumes from, by an
        attempt that was killed) to its ``train_metrics_superseded``; what the resume's message adds about it."""
        if self.run_log is None:
            return ""
        return supersede_redone(self.run_log, self.step_count)

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
            detail = " ".join(str(exc).split())  # every line of it (PyTorch lists each problem on its own line)
            raise GuardError(f"{ckpt.path.name} verifies but does not fit this run: {type(exc).__name__}"
                             f"{': ' + clipped(detail, 400) if detail else ''}") from None
        # Every rank decides alike: with sharded states one rank's shard alone may hold the NaN.
        everywhere = [n for names in gdist.all_gather_object(nonfinite) for n in names]
        if everywhere:  # an older checkpoint's load overwrites whatever of these was applied
            return f"{ckpt.path.name}: holds NaN/Inf values ({', '.join(everywhere[:3])})"
        self.load_state_dict(state)
        return None

    def _load(self, ckpt: Checkpoint, map_location: Any) -> tuple[Mapping[str, Any], list[str]]:
        """The state in ``ckpt`` (model and optimizer applied unless they hold non-finite values; sharded ones, which
        DCP loads in place, always) and the names of those values (``state_nonfinite``, the rule of the save)."""
        if self.sharded:
            return load_sharded(self.store, ckpt, self.model, self.optimizer)
        model = gdist.unwrap(self.model)
        state = self.store.load_state(ckpt, map_location=map_location, trust_pickle=self.trust_pickle)
        if not isinstance(state, Mapping) or not isinstance(state.get("model"), Mapping):
            raise GuardError(f"{ckpt.path.name}: state.pt holds no model state of a Guard")
        if state.get("frozen") is not None and not isinstance(state["frozen"], Mapping):
            raise GuardError(f"{ckpt.path.name}: state.pt holds no fingerprint of frozen weights a Guard writes")
        nonfinite = state_nonfinite(model, state)
        if not nonfinite:
            self._load_model(model, state, ckpt.path.name)
            if self.optimizer is not None and state.get("optimizer") is not None:
                self.optimizer.load_state_dict(state["optimizer"])
        return state, nonfinite

    def _load_model(self, model: torch.nn.Module, state: Mapping[str, Any], label: str) -> None:
        """Load ``state["model"]`` into ``model``: strictly where it is whole (no ``"frozen"``: nothing was frozen,
        ``save_frozen``, or a checkpoint of gpuwise before frozen weights were left out); where it holds the trained
        entries only, after checking the model's frozen ones against their fingerprint, and strictly about the rest."""
        saved = state["model"]
        if state.get("frozen") is None:
            try:
                model.load_state_dict(saved)
            except RuntimeError:
                misfit = _model_misfit(model.state_dict(), saved)
                if misfit:  # else the caller reports PyTorch's own words
                    raise GuardError(f"{label} verifies but does not fit this model: {misfit}") from None
                raise
            self._frozen.carry(saved.keys())
            return
        expected, refused, loaded_frozen = self._frozen.check(model, state["frozen"], saved.keys())
        if refused:
            raise GuardError(f"{label}: {refused}")
        misfit = _model_misfit(expected, saved)
        if misfit:
            raise GuardError(f"{label} verifies but does not fit this model: {misfit}")
        model.load_state_dict(saved, strict=False)
        self._frozen.carry(saved.keys())
        if loaded_frozen:   # progressive unfreezing: frozen at the start, trained when saved
            log.info("%s: loaded %d entries of parameters frozen now, saved as they were (%s)", label,
                     len(loaded_frozen), ", ".join(loaded_frozen[:3]))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore everything but model and optimizer (loaded by ``resume`` according to the format)."""
        progress = state["progress"]
        self.step_count = int(progress["step"])
        self.samples_seen = samples_seen_of(state)
        if progress.get("micro_batch_size") is not None:
            self._micro_batch_cap = int(progress["micro_batch_size"])
        if progress.get("effective_batch_size") is not None:  # absent from checkpoints of older gpuwise: silent
            self.effective_batch_size = self._effective_batch_at_resume = int(progress["effective_batch_size"])
            self._short_batch_after_resume = False
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])
        if state.get("loader") is not None:
            if self._loader is not None:
                self._loader.load_state_dict(state["loader"])
            else:  # resume() before loader(): applied when the loader is attached
                self._pending_loader_state = dict(state["loader"])
        for name, obj in self.extra_state.items():
            if name in state.get("extra_state", {}):
                obj.load_state_dict(state["extra_state"][name])
        self.extras = dict(state.get("extras") or {})
        rngs = state.get("rng") or []
        if rngs:
            if self.info.rank < len(rngs):
                restore_rng_state(rngs[self.info.rank])
            else:
                seed_rng_for_rank(rngs[0], self.info.rank)
            if len(rngs) < self.info.world_size:  # rank 0 says it: it knows both sizes, and always has a state
                last = self.info.world_size - 1
                new = f"{len(rngs)}" if last == len(rngs) else f"{len(rngs)}-{last}"
                self._say(f"the checkpoint holds the random generators of {len(rngs)} rank(s), this run has "
                          f"{self.info.world_size} (world size grew): rank(s) {new} seed theirs from rank 0's saved "
                          "state and their rank (deterministic; their dropout masks differ from rank 0's)")

    # -- preemption and shutdown -----------------------------------------------------------------
    def _preempted(self, *, exit_now: bool = True) -> None:
        self._event(PREEMPTED_EVENT, messages.preempted(self.step_count, self.preemption))
        self._save(reason="preempted", wait=True)
        self.stop_requested = True
        if self.exit_on_preempt and exit_now:
            self._end = TrainEnd(PREEMPTED, self.step_count, f"checkpointed; exiting with code "
                                                             f"{self.preemption.exit_code} to be restarted")
            self.close()
            self._say(messages.exiting(self.preemption.exit_code))
            sys.exit(self.preemption.exit_code)

    def close(self, *, check: bool = True, save: bool = True) -> None:
        """Write the checkpoint the last step made due, and the last step if it has none yet (``save``;
        all ranks call ``close``), finish a background save, stop watching signals, flush the run log. Call
        once at the end; ``save=False`` after the loop failed (``with Guard(...)`` does that on an exception).

        GuardError when saves were attempted and every one failed (``check``): the run is not resumable,
        and its exit code must say so."""
        try:
            if save:
                self._save_due(exit_on_preempt=False)  # the loop is over: exit as the script does
                self._save_final()
            else:
                self._due = None
            self._wait_for_save()
        except BaseException as exc:  # a save failing for good: that is how the run ends
            self._end = self._end or end_of_exception(exc, self.step_count)
            raise
        finally:
            self._failed_exc = None
            unresumable = self._unresumable() if check else None
            self.preemption.uninstall()
            if self.run_log is not None:
                self._drain_events()
                self._record_end(TrainEnd(CRASHED, self.step_count, unresumable) if unresumable
                                 else self._end_at_close(save))
                _record_torch_memory(self.run_log)
                self.run_log.flush()
                if self._owns_run_log:
                    self.run_log.close()
                    self.run_log = None
            if self._directory_lock is not None:
                self._directory_lock.release()  # another run may use the directory now
        if unresumable:
            raise GuardError(unresumable)

    def _unresumable(self) -> str | None:
        """Why the run cannot be resumed (saves were attempted and every one failed), or None."""
        if self.save_failures_in_row and not self.saves_ok:
            return (f"every checkpoint save of this run failed ({self.save_failures_in_row}): "
                    f"nothing in {self.store.directory} to resume from")
        return None

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, *tb: object) -> None:
        """``close()``: saving the last step when the block ends as the program meant it to (its end, or
        ``sys.exit`` with code 0 or None: the program's chosen end, as complete as the block's end), not after an
        exception or another exit code (the state may be mid-change, and the exit tells a supervisor it failed:
        a restart resumes from the last checkpoint). The exception's end is recorded (``_end_of_block``)."""
        if exc is not None and self._end is None:
            self._end = self._end_of_block(exc)
        # a clean exit raised inside a step left it incomplete: no final save, a restart resumes (as for an error)
        ended_as_meant = exc is None or (is_clean_exit(exc) and exc is not self._failed_exc)
        self.close(check=ended_as_meant, save=ended_as_meant)

    # -- how the run ended (train_end) -----------------------------------------------------------
    def _end_of_block(self, exc: BaseException) -> TrainEnd:
        """The end ``exc``, leaving a ``with`` block, makes: the last step's own exception (the same object)
        records as the step recorded it (``step N raised …``); any other (the caller's code, or a step's error it
        caught and raised anew) as itself."""
        if self._failure is not None and exc is self._failed_exc:
            return self._failure
        return end_of_exception(exc, self.step_count)

    def _end_at_close(self, save: bool) -> TrainEnd:
        """The end ``close()`` records: one already known (a preemption's exit, the exception of a ``with``
        block), the last step's exception if nothing succeeded since, a preemption caught by the loop
        (``exit_on_preempt=False``), else finished (``save=False`` with no exception: stopped)."""
        if self._end is not None:
            return self._end
        if self._failure is not None:
            return self._failure
        if self.preemption.requested:
            return TrainEnd(PREEMPTED, self.step_count, "checkpointed; the loop stopped")
        return TrainEnd(FINISHED if save else STOPPED, self.step_count,
                        "" if save else "guard.close(save=False)")

    def _end_at_exit(self, uncaught: BaseException | None) -> TrainEnd:
        """The end of a process that exits without ``close()``: the last step's exception (nothing succeeded
        since), else the uncaught exception Python printed, else stopped (``sys.exit``, no ``close()``). A run
        never finished without ``close()``: a step's ``sys.exit(0)`` is stopped too, as one after the loop is."""
        if self._failure is not None and self._failure.outcome != FINISHED:
            return self._failure
        if uncaught is not None:
            return end_of_exception(uncaught, self.step_count)
        return TrainEnd(STOPPED, self.step_count, "the process ended without guard.close()")

    def _record_end(self, end: TrainEnd) -> None:
        """Write how the run ended into the run log, once; a failure to is logged, never raised over the
        exception or exit in progress."""
        _UNENDED.discard(self)
        if self._end_recorded or self.run_log is None:
            return
        self._end_recorded = True
        try:
            record_train_end(self.run_log, end)
        except Exception as exc:  # noqa: BLE001 - a full disk must not hide how the run ended on stderr
            log.debug("run log: how the run ended not recorded: %s", exc)

    # -- messages --------------------------------------------------------------------------------
    def _event(self, kind: str, message: str, *, say: bool = True) -> None:
        if say:
            self._say(message)
        if self._saver.in_background:
            # The background saver must not share the SQLite connection: the training thread writes it later.
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
        logger, at WARNING, so it shows even where the training script configured no logging (then as
        ``gpuwise.guard: …`` on stderr, see ``messages``)."""
        if self.verbose and self._speaks:
            log.warning("%s", message)

    def _warn(self, message: str) -> None:
        """A problem with saves, as a ``UserWarning`` at the user's line (``step``, ``save``, ``close``, the
        loop over ``batches()``); rank 0 only. From the background save it waits for the training thread
        (``_warn_deferred``): issued there, it would point into ``threading.py``."""
        if not self._speaks:
            return
        if self._saver.in_background:
            self._saver.defer_warning(message)
        else:
            warnings.warn(message, stacklevel=_caller_stacklevel())

    def _warn_deferred(self) -> None:
        for message in self._saver.take_warnings():
            self._warn(message)

    @property
    def _speaks(self) -> bool:
        """Whether this process tells the person anything: rank 0 only. Every rank knows the same (saves,
        OOM retries and preemption are agreed on), and one line per rank would say it N times."""
        return self.info.is_writer

    def _flush_log(self) -> None:
        if self.run_log is not None:
            self.run_log.flush()

    def _commit_log_quietly(self) -> None:
        """Commit the run log's rows on an exception's way out (the process may end next): an error doing so
        is logged, never raised over the exception that is on its way."""
        if self.run_log is None or self._saver.in_background:
            return
        try:
            self._drain_events()
            self.run_log.flush()
        except Exception as exc:  # noqa: BLE001 - the exception in flight is the one to report
            log.debug("run log not committed after a failed step: %s", exc)


def samples_seen_of(state: Mapping[str, Any]) -> int:
    """The samples of every rank a checkpoint's ``state`` says its completed steps trained. A state of format 1 (or
    without a version) counted rank 0's samples only: times the world size it saved (``progress.world_size``), the
    count of a run on equal batches per rank (as ``guard.loader``'s are, an epoch's end too) that never changed its
    world size; nothing more exact can be read from it."""
    progress = state["progress"]
    seen = int(progress.get("samples_seen", 0))
    if int(state.get("format_version", 1)) < 2:
        seen *= int(progress.get("world_size", 1))
    return seen


# Guards with a run log whose end is not recorded yet, weakly held: at interpreter exit (an uncaught exception,
# Ctrl-C, sys.exit, a script without close()) each records how it ended. Registered after runlog's own atexit
# hook, so it runs first and that hook commits what it wrote.
_UNENDED: "weakref.WeakSet[Guard]" = weakref.WeakSet()


def _record_unended_at_exit() -> None:
    uncaught = getattr(sys, "last_value", None)  # set by Python when it printed an uncaught exception
    for guard in list(_UNENDED):
        if guard._pid == os.getpid():  # not in a child forked from the run (its log is the parent's)
            guard._record_end(guard._end_at_exit(uncaught))


atexit.register(_record_unended_at_exit)


def supersede_redone(run_log: RunLog, step: int) -> str:
    """Move the run log's rows of the steps a run resumed from the checkpoint of ``step`` redoes (logged after
    it, by an attempt that was killed) to ``train_metrics_superseded``; what the resume's message adds about it.
    Only on a resume from a checkpoint (``step`` > 0): a fresh start (step 0) moves nothing, as the log may
    hold an earlier experiment's rows. The Guard and the HF and Lightning callbacks all resume through here."""
    if step <= 0:
        return ""
    moved = run_log.supersede_steps_after(step)
    return (f"; the run log's rows of {moved} later step(s), logged before the restart, moved to "
            "train_metrics_superseded" if moved else "")


def refuse_fresh_start(directory: str | os.PathLike, skipped_reasons: list[str], allow_fresh: bool, *,
                       how: str = "allow_fresh=True (--fresh)") -> None:
    """The one rule of every resume (the Guard's, and the HF and Lightning callbacks' ``latest_verified_checkpoint``):
    GuardError, one line naming them, when ``directory`` holds checkpoints and none verifies (``skipped_reasons``, one
    per checkpoint), unless ``allow_fresh``: a start from step 0 would train over them (and a framework's rotation
    would delete them). An empty or absent directory (a first run) passes. ``how``: what the caller passes to
    start over anyway."""
    if skipped_reasons and not allow_fresh:
        reasons = "; ".join(clipped(r, SKIPPED_REASON_CHARS) for r in skipped_reasons[:3])
        raise GuardError(f"{len(skipped_reasons)} checkpoint(s) in {directory} and none verifies ({reasons}): refusing "
                         f"to start from step 0 over them; pass {how} to start over")


def check_scheduler(scheduler: Any) -> None:
    """GuardError, one line, unless ``scheduler`` (None: none) has a ``step()`` the guard can call with no
    argument once per optimizer step: ``ReduceLROnPlateau.step(metrics)`` steps on a validation metric, and
    called so it would raise after the optimizer step, half-way through the guard's step."""
    if scheduler is None:
        return
    step = getattr(scheduler, "step", None)
    if not callable(step):
        raise GuardError(f"scheduler must have a step() method (an LR scheduler), got {type(scheduler).__name__}")
    try:
        parameters = inspect.signature(step).parameters.values()
    except (TypeError, ValueError):     # a built-in without a signature: nothing to check before the first step
        return
    required = [p.name for p in parameters
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        name = type(scheduler).__name__
        raise GuardError(f"scheduler={name}: its step() needs {', '.join(required)}, and the guard steps the "
                         f"scheduler once per optimizer step with no argument; call {name}.step(...) yourself "
                         "(after validation) and checkpoint it with extra_state={'plateau': scheduler}")


def check_exit_code(value: object, name: str = "exit_code") -> None:
    """GuardError, one line naming ``name``, unless ``value`` is a whole number from 1 to 255: an exit status is one
    byte (``sys.exit(300)`` exits 44), and 0 tells a supervisor the job is done."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 255:
        raise GuardError(f"{name} must be a whole number from 1 to 255 (an exit status is one byte), got {value!r}")


def _lock_failure(directory: Path, cause: BaseException) -> str:
    """The one line every rank raises when rank 0 could not lock ``directory``."""
    if isinstance(cause, GuardError):
        return str(cause)
    return f"checkpoint directory {directory} could not be locked: {type(cause).__name__}: {cause}"


def _checked_workload(workload: Any) -> dict | None:
    """``workload`` (a ``gpuwise.workload.Workload`` or its ``to_dict()``, None for none) as the record the run log
    keeps: the keys given, read through ``Workload.from_dict`` (the one reader: a record it refuses is refused here,
    where the script can be fixed, not when report or calibrate read the log). GuardError (one line) when invalid."""
    if workload is None:
        return None
    if hasattr(workload, "to_dict"):
        workload = workload.to_dict()
    if not isinstance(workload, Mapping):
        raise GuardError(f"workload must be a gpuwise Workload or its to_dict(), got {type(workload).__name__}")
    record = dict(workload)
    try:
        Workload.from_dict(record)
    except (GpuwiseError, TypeError, ValueError) as exc:
        raise GuardError(f"workload= is not a gpuwise workload: {str(exc)[:200]}") from None
    return record


def workload_differences(held: Any, given: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Key -> (held, given) where the workload ``given`` states another job than the one ``held`` (both read by
    ``Workload.from_dict``): only keys ``given`` states (a partial record's other keys are its defaults, not a
    claim), and not a None size (the model's default input, which the CLI may have written in) nor the flags of
    how a value was chosen. A ``held`` that does not read as a workload differs in whatever it holds."""
    mine = Workload.from_dict(given).to_dict()
    try:
        theirs = Workload.from_dict(held).to_dict()
    except (GpuwiseError, TypeError, ValueError, AttributeError):
        return {"workload": (held, dict(given))}
    return {k: (theirs.get(k), mine[k]) for k in given
            if k in mine and k not in _WORKLOAD_PROVENANCE and mine[k] is not None and theirs.get(k) != mine[k]}


def _record_stack(run_log: RunLog, workload: Mapping[str, Any] | None) -> None:
    """The job's workload (``_checked_workload``'s record) and the torch/CUDA versions, so that ``gpuwise report``
    compares the run with gpuwise's prediction and ``gpuwise calibrate`` learns from it. A log that holds a
    workload already (``gpuwise run --model …`` around this script, or an earlier run of it) keeps that one: the
    first written wins, and a different one here is warned about, never silently written over it."""
    if workload is not None:
        held_text = run_log.set_meta_first(WORKLOAD_KEY, workload)
        if held_text != json.dumps(workload):
            try:
                held = json.loads(held_text)
            except ValueError:
                held = held_text
            differ = workload_differences(held, workload)
            if differ:
                said = "; ".join(f"{k} {a!r} there, {b!r} here" for k, (a, b) in sorted(differ.items()))
                log.warning("%s holds a workload already (written first, e.g. by `gpuwise run --model …`) that is not "
                            "the guard's workload=: %s. The log keeps the first; report and calibrate read it: make "
                            "the two describe the job that runs", run_log.path, said[:400])
    run_log.set_meta(TORCH_VERSION_KEY, torch.__version__)
    run_log.set_meta(CUDA_VERSION_KEY, torch.version.cuda or "")


def _record_torch_memory(run_log: RunLog) -> None:
    """PyTorch's peak allocated/reserved memory per device, as the ``gpuwise run --torch-hook`` event."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    devices = [{"device": d, "max_allocated_bytes": int(torch.cuda.max_memory_allocated(d)),
                "max_reserved_bytes": int(torch.cuda.max_memory_reserved(d))}
               for d in range(torch.cuda.device_count()) if torch.cuda.max_memory_reserved(d) > 0]
    if devices:
        run_log.log_event(TORCH_MEMORY_EVENT, json.dumps({
            "pid": os.getpid(), "devices": devices, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "gpu_name": torch.cuda.get_device_name(devices[0]["device"])}))


def _caller_stacklevel() -> int:
    """``warnings.warn``'s stacklevel, for a call from the function that called this one, that names the
    first frame outside gpuwise.guard: the user's line (``step``, ``save``, ``close``, or the loop over
    ``batches()``), whichever path inside the guard led to the warning."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_GUARD_DIR):
        frame = frame.f_back
        level += 1
    return level


def _model_misfit(expected: Mapping[str, Any], saved: Mapping[str, Any], shown: int = 3) -> str:
    """What ``load_state_dict`` (strict) would refuse, in one line: missing and unexpected keys and shape
    mismatches, the first ``shown`` of each with their counts; "" when the saved state fits."""
    def listed(what: str, items: list[str]) -> str:
        more = f", … {len(items) - shown} more" if len(items) > shown else ""
        return f"{len(items)} {what} ({', '.join(items[:shown])}{more})"

    missing = [k for k in expected if k not in saved]
    unexpected = [k for k in saved if k not in expected]
    mismatched = [f"{k}: checkpoint {_shape(saved[k])} vs model {_shape(v)}" for k, v in expected.items()
                  if k in saved and isinstance(v, torch.Tensor) and isinstance(saved[k], torch.Tensor)
                  and saved[k].shape != v.shape]
    parts = [listed(what, items) for what, items in (("missing keys", missing), ("unexpected keys", unexpected),
                                                     ("shape mismatches", mismatched)) if items]
    return "; ".join(parts)


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"

