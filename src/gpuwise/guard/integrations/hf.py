"""A Hugging Face ``Trainer`` callback: what the Trainer does not do on a machine that can vanish.

The Trainer already saves model, optimizer, scheduler, scaler and RNG states every ``save_steps`` and resumes
from them. It does not: (1) save and exit when the platform sends SIGTERM (a stopped instance loses
everything since the last ``save_steps``); (2) tell a complete ``checkpoint-N`` directory from one cut short
by a kill (it writes in place, so ``resume_from_checkpoint=True`` can pick a half-written one and crash);
(3) write the run log that ``gpuwise advise`` reads. This callback adds exactly those:

    from gpuwise.guard.integrations.hf import GuardCallback, latest_verified_checkpoint
    trainer = Trainer(..., callbacks=[GuardCallback(run_log="run.db")])
    trainer.train(resume_from_checkpoint=latest_verified_checkpoint(args.output_dir))
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gpuwise.guard.checkpoint import latest_sealed, seal_directory
from gpuwise.guard.guard import supersede_redone
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.runlog import RunLog

log = logging.getLogger(__name__)    # under gpuwise.guard: "gpuwise.guard: …" on stderr where nothing is configured

_LOGGED = {"loss": "loss", "learning_rate": "lr", "grad_norm": "grad_norm", "eval_loss": "eval_loss"}


class GuardCallback(TrainerCallback):
    def __init__(self, run_log: str | os.PathLike | RunLog | None = None, *, preempt_signals=("SIGTERM",),
                 grace_s: float = 25.0, exit_code: int = EXIT_RESTART, exit_on_preempt: bool = True) -> None:
        self.preemption = PreemptionHandler(preempt_signals, grace_s=grace_s, exit_code=exit_code)
        self.exit_on_preempt = exit_on_preempt
        self._run_log_arg = run_log
        self.run_log: RunLog | None = run_log if isinstance(run_log, RunLog) else None
        self.last_sealed: Path | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            self.preemption.install()
        except (RuntimeError, ValueError):
            pass  # not the main thread: no signals, the rest still works
        if self.run_log is None and self._run_log_arg is not None and state.is_world_process_zero:
            self.run_log = RunLog(self._run_log_arg)
        step = int(state.global_step)
        if self.run_log is not None and step > 0:   # resumed: the Trainer redoes the steps logged after its checkpoint
            self.run_log.log_event("resumed", f"resumed at step {step}{supersede_redone(self.run_log, step)}")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.preemption.requested:
            # Save at this step boundary and stop; the Trainer writes the checkpoint, on_save seals it.
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if path.is_dir():
            seal_directory(path, state.global_step, int(state.epoch or 0),
                           meta={"reason": "preempted" if self.preemption.requested else "periodic"},
                           format="transformers.Trainer")
            self.last_sealed = path
            if self.run_log is not None:
                self.run_log.log_event("checkpoint", f"{path.name} sealed (manifest + sha256)")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if self.run_log is None or not logs:
            return
        metrics = {name: float(logs[key]) for key, name in _LOGGED.items()
                   if isinstance(logs.get(key), (int, float))}
        if metrics:
            world = max(1, int(getattr(args, "world_size", 1)))
            metrics["batch_size"] = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
            metrics["micro_batch_size"] = args.per_device_train_batch_size
            self.run_log.log_train(state.global_step, **metrics)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.preemption.uninstall()
        if self.run_log is not None:
            self.run_log.flush()
        if self.preemption.requested and self.exit_on_preempt:
            if self.run_log is not None:
                self.run_log.log_event("preempted", f"checkpoint-{state.global_step} saved; exiting {self.preemption.exit_code}")
                self.run_log.close()
            sys.exit(self.preemption.exit_code)


def latest_verified_checkpoint(output_dir: str | os.PathLike, *, verbose: bool = True) -> str | None:
    """For ``trainer.train(resume_from_checkpoint=...)``: the newest sealed ``checkpoint-N`` whose files
    match their checksums, or None (start fresh). Unsealed or damaged ones are skipped and named."""
    ckpt, skipped = latest_sealed(output_dir)
    if verbose:
        for s in skipped:
            log.warning("skipped %s: %s", s.path.name, s.reason)
    return str(ckpt.path) if ckpt else None
