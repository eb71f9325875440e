"""A Hugging Face ``Trainer`` callback: what the Trainer does not do on a machine that can vanish.

The Trainer already saves model, optimizer, scheduler, scaler and RNG states every ``save_steps`` and resumes
from them. It does not: (1) save and exit when the platform sends SIGTERM (a stopped instance loses
everything since the last ``save_steps``); (2) tell a complete ``checkpoint-N`` directory from one cut short
by a kill (it writes in place, so ``resume_from_checkpoint=True`` can pick a half-written one and crash);
(3) write the run log that ``gpuwise advise`` reads. This callback adds exactly those, and takes over the
Trainer's ``save_total_limit`` rotation: the Trainer deletes old checkpoints inside its save, before ``on_save``
where the new one is sealed, so a kill between them would leave no sealed checkpoint at all; the callback turns
that off and prunes after sealing, newest first by the time they were sealed (the Trainer orders by mtime, not by
step number), never the checkpoint it has just sealed:

    from gpuwise.guard.integrations.hf import GuardCallback, latest_verified_checkpoint
    trainer = Trainer(..., callbacks=[GuardCallback(run_log="run.db")])
    trainer.train(resume_from_checkpoint=latest_verified_checkpoint(args.output_dir))
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gpuwise.guard import messages
from gpuwise.guard.checkpoint import MANIFEST_FILE, CheckpointStore, latest_sealed, seal_directory, sealed_time_s
from gpuwise.guard.errors import GuardError
from gpuwise.guard.guard import check_exit_code, refuse_fresh_start, supersede_redone
from gpuwise.guard.preemption import EXIT_RESTART, PreemptionHandler
from gpuwise.runlog import PREEMPTED_EVENT, RunLog

log = logging.getLogger(__name__)    # under gpuwise.guard: "gpuwise.guard: …" on stderr where nothing is configured

_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
_LOGGED = {"loss": "loss", "learning_rate": "lr", "grad_norm": "grad_norm", "eval_loss": "eval_loss"}


class GuardCallback(TrainerCallback):
    def __init__(self, run_log: str | os.PathLike | RunLog | None = None, *, preempt_signals=("SIGTERM",),
                 grace_s: float = 25.0, exit_code: int = EXIT_RESTART, exit_on_preempt: bool = True) -> None:
        check_exit_code(exit_code)
        self.preemption = PreemptionHandler(preempt_signals, grace_s=grace_s, exit_code=exit_code)
        self.exit_on_preempt = exit_on_preempt
        self._run_log_arg = run_log
        self.run_log: RunLog | None = run_log if isinstance(run_log, RunLog) else None
        self.last_sealed: Path | None = None
        self.save_total_limit: int | None = None   # the Trainer's, while this callback rotates in its place
        self._verified: dict[str, tuple[int, int, int]] = {}   # checkpoint path -> its manifest's identity
        self._sealed_here: dict[str, int] = {}   # checkpoint path -> the order this callback sealed it in
        self._seal_count = itertools.count()
        self._said_lost = False
        self._said_preempted = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            self.preemption.install()
        except (RuntimeError, ValueError):
            pass  # not the main thread: no signals, the rest still works
        if self.run_log is None and self._run_log_arg is not None and state.is_world_process_zero:
            self.run_log = RunLog(self._run_log_arg)
        self._take_over_rotation(args, state)
        step = int(state.global_step)
        if self.run_log is not None and step > 0:   # resumed: the Trainer redoes the steps logged after its checkpoint
            self.run_log.log_event("resumed", f"resumed at step {step}{supersede_redone(self.run_log, step)}")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.preemption.requested:
            # Save at this step boundary and stop; the Trainer writes the checkpoint, on_save seals it.
            if not self._said_preempted and state.is_world_process_zero:
                self._said_preempted = True
                log.warning("%s", messages.preempted(int(state.global_step), self.preemption))
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        path = _saved_checkpoint(args, state)
        if path is None:
            # Not where this callback can tell: unsealed, and the Trainer's rotation must prune in its place.
            if not self._said_lost:
                self._said_lost = True
                log.warning("checkpoint-%d not found under %s: not sealed%s", state.global_step, args.output_dir,
                            "; save_total_limit rotation handed back to the Trainer"
                            if self.save_total_limit is not None else "")
            self._give_rotation_back(args)
            return
        seal_directory(path, state.global_step, int(state.epoch or 0),
                       meta={"reason": "preempted" if self.preemption.requested else "periodic"},
                       format="transformers.Trainer")
        self.last_sealed = path
        self._sealed_here[str(path)] = next(self._seal_count)
        self._remember_verified(path)   # just hashed: no need to read it again to prune
        if self.run_log is not None:
            self.run_log.log_event("checkpoint", f"{path.name} sealed (manifest + sha256)")
        if self.save_total_limit is not None:
            self._prune(path.parent, getattr(state, "best_model_checkpoint", None))

    def _take_over_rotation(self, args: Any, state: Any) -> None:
        """Turn the Trainer's ``save_total_limit`` rotation off where this callback seals (world process zero) and
        prune in its place after sealing (``on_save``); ``on_train_end`` gives the limit back. The Trainer (4.x
        ``_rotate_checkpoints``, 5.x ``rotate_checkpoints``) deletes older checkpoints at the end of
        ``_save_checkpoint``, before ``on_save``: a kill between them leaves only the new, unsealed one."""
        limit = getattr(args, "save_total_limit", None)
        if state.is_world_process_zero and limit is not None and limit > 0:
            self.save_total_limit = int(limit)
            args.save_total_limit = None    # both versions: "None or <= 0" rotates nothing

    def _give_rotation_back(self, args: Any) -> None:
        if self.save_total_limit is not None:
            args.save_total_limit, self.save_total_limit = self.save_total_limit, None

    def _prune(self, output_dir: Path, best: str | None) -> list[Path]:
        """Keep the newest ``save_total_limit`` sealed checkpoints that verify, and every ``checkpoint-N`` newer than
        the oldest of them (unsealed or damaged: a resume skips them, naming them); delete the older ones, except
        the Trainer's best checkpoint (``load_best_model_at_end``) and the one just sealed (``last_sealed``).

        Newest by when they were sealed, as the Trainer rotates by mtime, not by step number: a higher-numbered
        checkpoint left by an earlier run (``overwrite_output_dir``, or a roll-back to an older checkpoint) is
        older than those this run saves, so it does not push them out. Those this callback sealed come first, in
        the order it sealed them; then the others by their manifest's mtime (a directory's own when unsealed),
        ties by step number."""
        found = [(self._age(p, int(m.group(1))), p) for p in output_dir.iterdir()
                 if (m := _CHECKPOINT_DIR.match(p.name)) and p.is_dir() and not p.is_symlink()]
        kept, removed = 0, []
        just_sealed = self.last_sealed.resolve() if self.last_sealed is not None else None
        for _, path in sorted(found, key=lambda f: f[0], reverse=True):
            if path.resolve() == just_sealed:
                kept += 1
            elif kept < self.save_total_limit:
                kept += self._verifies(path)
            elif best is None or Path(best).resolve() != path.resolve():
                shutil.rmtree(path, ignore_errors=True)
                self._verified.pop(str(path), None)
                self._sealed_here.pop(str(path), None)
                removed.append(path)
        if removed:
            log.info("deleted %s (save_total_limit=%d sealed checkpoints kept)",
                     ", ".join(p.name for p in removed), self.save_total_limit)
        return removed

    def _age(self, path: Path, step: int) -> tuple:
        """Sort key, larger is newer: sealed by this callback (in that order), else when its manifest says it was
        sealed (``checkpoint.sealed_time_s``, the rule resume reads too; a copy keeps it), else the directory's
        mtime (unsealed)."""
        if str(path) in self._sealed_here:
            return (1, self._sealed_here[str(path)], step)
        sealed_s = sealed_time_s(path)
        if sealed_s is not None:
            return (0, sealed_s, step)
        try:
            return (0, path.stat().st_mtime, step)
        except OSError:
            return (0, 0.0, step)

    def _verifies(self, path: Path) -> bool:
        """Whether ``path`` is sealed and its files match the manifest (hashed once per manifest and process)."""
        try:
            st = (path / MANIFEST_FILE).stat()
        except OSError:
            return False
        if self._verified.get(str(path)) != (st.st_ino, st.st_mtime_ns, st.st_size):
            try:
                CheckpointStore(path.parent).verify(path, nested_names=True)
            except GuardError:
                return False
            self._remember_verified(path)
        return True

    def _remember_verified(self, path: Path) -> None:
        st = (path / MANIFEST_FILE).stat()
        self._verified[str(path)] = (st.st_ino, st.st_mtime_ns, st.st_size)

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
        self._give_rotation_back(args)
        if self.run_log is not None:
            self.run_log.flush()
        if self.preemption.requested and self.exit_on_preempt:
            if self.run_log is not None:
                self.run_log.log_event(PREEMPTED_EVENT, f"checkpoint-{state.global_step} saved; exiting "
                                                        f"{self.preemption.exit_code}")
                self.run_log.close()
            if state.is_world_process_zero:
                log.warning("%s", messages.exiting(self.preemption.exit_code))
            sys.exit(self.preemption.exit_code)


def _saved_checkpoint(args: Any, state: Any) -> Path | None:
    """The ``checkpoint-N`` directory the Trainer has just written, as its ``_get_output_dir(trial)`` places it:
    ``output_dir`` outside a hyperparameter search; under one, ``output_dir/<hp_name(trial)>`` when the search
    was given ``hp_name`` (the Trainer then sets ``state.trial_name``), else ``output_dir/run-<trial id>``, an id
    (optuna's trial number, ray's trial id, ...) that callbacks are not given: that one is found by the
    ``trial_params`` the Trainer wrote into its ``trainer_state.json`` (the newest such, should two trials share
    them). None when there is no such directory."""
    name = f"checkpoint-{state.global_step}"
    output_dir = Path(args.output_dir)
    trial_name = getattr(state, "trial_name", None)
    trial_params = getattr(state, "trial_params", None)
    if trial_name:
        path = output_dir / trial_name / name
        return path if path.is_dir() else None
    if trial_params is None:
        path = output_dir / name
        return path if path.is_dir() else None
    want = json.loads(json.dumps(trial_params, default=str))
    found = []
    for path in output_dir.glob(f"*/{name}"):
        try:
            written = path / "trainer_state.json"
            if (path.is_dir() and not path.is_symlink()
                    and json.loads(written.read_text()).get("trial_params") == want):
                found.append((written.stat().st_mtime_ns, path))
        except (OSError, ValueError, AttributeError):
            continue
    return max(found)[1] if found else None


def latest_verified_checkpoint(output_dir: str | os.PathLike, *, verbose: bool = True,
                               allow_fresh: bool = False) -> str | None:
    """For ``trainer.train(resume_from_checkpoint=...)``: the newest sealed ``checkpoint-N`` whose files
    match their checksums, or None when ``output_dir`` holds no ``checkpoint-N`` (a first run). Unsealed or
    damaged ones are skipped and named; when there are some and none verifies, GuardError (one line, as
    ``Guard.resume``) rather than None, which would start from step 0, unless ``allow_fresh``."""
    ckpt, skipped = latest_sealed(output_dir)
    if verbose:
        for s in skipped:
            log.warning("skipped %s: %s", s.path.name, s.reason)
    if ckpt is None:
        refuse_fresh_start(output_dir, [s.reason for s in skipped], allow_fresh,
                           how="latest_verified_checkpoint(..., allow_fresh=True)")
    return str(ckpt.path) if ckpt else None
