"""A PyTorch Lightning callback for what Lightning lacks on machines that can vanish.

Lightning checkpoints periodically (``ModelCheckpoint``) and resumes everything with ``ckpt_path``. It does
not: save when a non-SLURM platform sends SIGTERM (Lightning then stops without a checkpoint), write
checkpoints atomically with fsync and a checksum (a file cut short by a kill is loaded and fails), or tell
a supervisor "restart me". This callback adds those, and writes loss / lr to the gpuwise run log. It saves
(periodically, and on SIGTERM) only at the end of an optimizer step, never mid gradient accumulation, and at
most once per global step, as Lightning's ``ModelCheckpoint`` does. So a SIGTERM is saved only after the
micro-batches left in the current accumulation window have run: up to ``accumulate_grad_batches`` micro-batch
times, then the save. When that is longer than ``grace_s`` the watchdog exits 75 first, and when it is longer
than the platform's notice its SIGKILL comes first: either way no new checkpoint, and the restart redoes the
steps since the last one. Keep one window plus a save well inside both: a ``grace_s`` just under the platform's
notice, fewer micro-batches per step (larger ones, if memory allows), and ``every_steps`` to bound what is lost.
Usage:

    from gpuwise.guard.integrations.lightning import GuardLightningCallback, latest_verified_checkpoint
    trainer = L.Trainer(callbacks=[GuardLightningCallback("ckpt/", run_log="run.db")], ...)
    trainer.fit(model, ckpt_path=latest_verified_checkpoint("ckpt/"))

Lightning is not a gpuwise dependency: importing this module works without it, constructing the callback
then raises GuardError with the install hint. (Written against Lightning 2.x's Callback API; gpuwise's tests run
it under a real Lightning Trainer, a development dependency, and through a stand-in of the hooks it calls.)
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from gpuwise.guard import messages
from gpuwise.guard.checkpoint import CheckpointStore
from gpuwise.guard.errors import GuardError, check_number
from gpuwise.guard.guard import check_exit_code, refuse_fresh_start, supersede_redone
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.runlog import PREEMPTED_EVENT, RunLog

log = logging.getLogger("gpuwise.guard")

CKPT_FILE = "state.ckpt"

try:  # the unified package first, then the older standalone one
    from lightning.pytorch.callbacks import Callback as _Callback
except ImportError:  # pragma: no cover - depends on the environment
    try:
        from pytorch_lightning.callbacks import Callback as _Callback
    except ImportError:
        _Callback = None

LIGHTNING_AVAILABLE = _Callback is not None
_Base: Any = _Callback if _Callback is not None else object


class GuardLightningCallback(_Base):  # type: ignore[misc,valid-type]
    """Atomic, verified checkpoint on SIGTERM (and every ``every_steps`` if set), exit 75, run-log metrics."""

    def __init__(self, directory: str | os.PathLike, *, every_steps: int | None = None, keep: int = 3,
                 run_log: str | os.PathLike | None = None, preempt_signals=("SIGTERM",), grace_s: float = 25.0,
                 exit_code: int = EXIT_RESTART, exit_on_preempt: bool = True) -> None:
        if not LIGHTNING_AVAILABLE:
            raise GuardError("GuardLightningCallback needs PyTorch Lightning: pip install lightning")
        check_number("every_steps", every_steps, 1, whole=True, none="only on preemption")
        check_exit_code(exit_code)
        super().__init__()
        self.store = CheckpointStore(directory, keep=keep)
        self.every_steps = every_steps
        self.preemption = PreemptionHandler(preempt_signals, grace_s=grace_s, exit_code=exit_code)
        self.exit_on_preempt = exit_on_preempt
        self._run_log_path = run_log
        self.run_log: RunLog | None = None
        self._last_step: int | None = None    # the global step at the last batch end (or the start)
        self._saved_step: int | None = None   # the step last saved (or resumed from)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        try:
            self.preemption.install()
        except (RuntimeError, ValueError):
            pass
        # A resume starts at its checkpoint's step: nothing to save there again.
        self._last_step = self._saved_step = int(trainer.global_step)
        if self._run_log_path is not None and trainer.is_global_zero:
            self.run_log = RunLog(self._run_log_path)
            step = int(trainer.global_step)
            if step > 0:          # resumed from ckpt_path's step: the steps logged after it are redone
                self.run_log.log_event("resumed", f"resumed at step {step}{supersede_redone(self.run_log, step)}")

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        # Called per micro-batch: only one that ended with an optimizer step (the global step moved) is a
        # boundary. Mid gradient accumulation the state is half a step (gradients of some micro-batches, which
        # no checkpoint holds): a SIGTERM there is acted on at the next boundary, after the micro-batches left in
        # the window. If those plus the save outlast grace_s (the watchdog) or the platform's notice (SIGKILL),
        # nothing new is saved: see the module docstring.
        step = int(trainer.global_step)
        if step == self._last_step:
            return
        self._last_step = step
        self._log(trainer, step)
        preempted = self._agree(trainer, self.preemption.requested)   # every rank: boundaries are the same on all
        due = preempted or bool(self.every_steps and step % self.every_steps == 0)
        if due and step != self._saved_step:
            if preempted and trainer.is_global_zero:
                log.warning("%s", messages.preempted(step, self.preemption))
            self.save(trainer, step, "preempted" if preempted else "periodic")
        if preempted:
            trainer.should_stop = True

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.preemption.uninstall()
        exiting = self.preemption.requested and self.exit_on_preempt
        if self.run_log is not None:
            if exiting:   # with the exit code, what makes `gpuwise report` say preempted rather than failed
                self.run_log.log_event(PREEMPTED_EVENT, f"step {self._saved_step} saved; exiting "
                                                        f"{self.preemption.exit_code}")
            self.run_log.close()
            self.run_log = None
        if exiting:
            if trainer.is_global_zero:
                log.warning("%s", messages.exiting(self.preemption.exit_code))
            sys.exit(self.preemption.exit_code)

    def save(self, trainer: Any, step: int, reason: str) -> None:
        """Collective (all ranks): Lightning writes from rank 0 into a shared temporary directory, which is
        then sealed with a manifest and renamed into place."""
        self._saved_step = step
        tmp = self.store.directory / f".tmp-step-{step:09d}-shared"
        if trainer.is_global_zero:
            self.store.begin(step, shared_name=True)
        trainer.strategy.barrier("gpuwise_guard_begin")
        trainer.save_checkpoint(str(tmp / CKPT_FILE), weights_only=False)   # the full state, said: no "not set" line
        trainer.strategy.barrier("gpuwise_guard_written")
        if trainer.is_global_zero:
            try:
                ckpt = self.store.commit(tmp, step, int(trainer.current_epoch), format="lightning",
                                         world_size=int(trainer.world_size), meta={"reason": reason})
                if self.run_log is not None:
                    self.run_log.log_event("checkpoint", f"{ckpt.path.name} ({reason})")
            except OSError as exc:
                self.store.abort(tmp)
                err = self.store.save_failed(step, exc)
                if self.run_log is not None:
                    self.run_log.log_event("checkpoint_failed", str(err))
                log.warning("%s", err)
        trainer.strategy.barrier("gpuwise_guard_committed")

    def _agree(self, trainer: Any, flag: bool) -> bool:
        # Any rank's signal stops all ranks at the same step (reduce_boolean_decision is Lightning's all-reduce).
        try:
            return bool(trainer.strategy.reduce_boolean_decision(flag, all=False))
        except TypeError:  # older Lightning: no ``all`` argument (means "all ranks"), so invert twice
            return not trainer.strategy.reduce_boolean_decision(not flag)

    def _log(self, trainer: Any, step: int) -> None:
        if self.run_log is None:
            return
        metrics: dict[str, float] = {}
        loss = trainer.callback_metrics.get("loss", trainer.callback_metrics.get("train_loss"))
        if loss is not None:
            metrics["loss"] = float(loss)
        if trainer.optimizers:
            metrics["lr"] = float(trainer.optimizers[0].param_groups[0]["lr"])
        if metrics:
            self.run_log.log_train(step, **metrics)


def latest_verified_checkpoint(directory: str | os.PathLike, *, allow_fresh: bool = False) -> str | None:
    """For ``trainer.fit(..., ckpt_path=...)``: the newest checkpoint that verifies, or None when ``directory``
    holds none (a first run). When it holds some and none verifies, GuardError (one line, as ``Guard.resume``)
    rather than None, which would start from step 0, unless ``allow_fresh``."""
    ckpt, skipped = CheckpointStore(directory).latest()
    for s in skipped:
        log.warning("skipped %s: %s", s.path.name, s.reason)
    if ckpt is None:
        refuse_fresh_start(directory, [s.reason for s in skipped], allow_fresh,
                           how="latest_verified_checkpoint(..., allow_fresh=True)")
    return str(Path(ckpt.path) / CKPT_FILE) if ckpt else None
