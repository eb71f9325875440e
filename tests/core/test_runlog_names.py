"""The run log's shared names (``gpuwise.runlog``): what one part writes, another reads back through the same name.

A guarded job under ``gpuwise run`` (the log written first by the runner, then by the guard in the job) is read
by the report: a preemption is said preempted, not failed, and the workload, torch version and step times the
guard wrote are the measurement the report and calibrate read. The torch hook keeps its own copy of the
``torch_memory`` event kind (it imports only the standard library): the copy must be the one home's."""

from __future__ import annotations

import ast
from pathlib import Path

import lightning as L
import pytest
import torch

from gpuwise import runlog
from gpuwise.errors import EXIT_RESTART
from gpuwise.guard import Guard
from gpuwise.guard.integrations import lightning as guard_lightning
from gpuwise.monitor.hook import HOOK_DIR
from gpuwise.report.measured import read_measurement
from gpuwise.report.run_end import run_end
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog
from tests.report.helpers import gpuwise_run_log

GIB = 2**30
FRAMES = [[{"t_s": 100.0 + k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 80.0,
            "memory_used_bytes": 12 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(12)]
WORKLOAD = {"model": "torchvision:resnet18", "batch_size": 2}
STEPS = 10   # past the report's warm-up, enough timed steps for a step time


def _dataset() -> torch.utils.data.TensorDataset:
    return torch.utils.data.TensorDataset(torch.randn(64, 4))


def _guarded_job_preempted_at(tmp_path: Path, step: int) -> tuple[Path, int, int]:
    """A run log as `gpuwise run` starts it; the guard of the job in it writes its steps, and is preempted after
    ``step`` (the SIGTERM handler's request): (the log, the job's exit code, the steps the guard took)."""
    log = gpuwise_run_log(tmp_path / "run.db", FRAMES, ended=False)
    model = torch.nn.Linear(4, 1)
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.01), run_log=log,
                  workload=WORKLOAD, every_steps=1000, grace_s=0, verbose=False)
    guard.loader(_dataset(), batch_size=2, seed=0)
    with pytest.raises(SystemExit) as exit_info:
        for batch in guard.batches(max_steps=100):
            guard.step(batch, lambda b: model(b[0]).pow(2).mean())
            if guard.step_count == step:
                guard.preemption.request()
    return log, int(exit_info.value.code), guard.step_count


def _ended(log: Path, exit_code: int) -> Path:
    """The end `gpuwise run` records once its command exited with ``exit_code``."""
    with RunLog(log) as run_log:
        run_log.set_meta("end_t_s", FRAMES[-1][0]["t_s"])
        run_log.set_meta("exit_code", exit_code)
    return log


def test_the_guards_preemption_makes_the_report_say_preempted_not_failed(tmp_path):
    log, exit_code, _ = _guarded_job_preempted_at(tmp_path, 3)
    end = run_end(load_usage_log(_ended(log, exit_code)))
    assert (exit_code, end.preempted, end.ended, end.run_words) == (EXIT_RESTART, True, "preempted",
                                                                    "a preempted run")


def test_the_guards_workload_torch_version_and_step_times_are_the_reports_measurement(tmp_path):
    log, exit_code, steps = _guarded_job_preempted_at(tmp_path, STEPS)
    measured = read_measurement(_ended(log, exit_code))
    assert measured.workload == WORKLOAD
    assert measured.torch_version == torch.__version__
    assert measured.logged_steps == steps and measured.step_time_s is not None and measured.step_time_s > 0


def test_the_lightning_callbacks_preemption_makes_the_report_say_preempted_not_failed(tmp_path):
    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            if self.global_step == 2:
                callback.preemption.request()    # what the SIGTERM handler does
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    log = gpuwise_run_log(tmp_path / "run.db", FRAMES, ended=False)
    callback = guard_lightning.GuardLightningCallback(tmp_path / "ckpt", every_steps=1000, grace_s=0, run_log=log)
    trainer = L.Trainer(max_steps=50, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    with pytest.raises(SystemExit) as exit_info:
        trainer.fit(Model(), torch.utils.data.DataLoader(_dataset(), batch_size=2))
    end = run_end(load_usage_log(_ended(log, int(exit_info.value.code))))
    assert (exit_info.value.code, end.preempted, end.ended) == (EXIT_RESTART, True, "preempted")


def _module_constant(path: Path, name: str) -> object:
    """The value a module assigns ``name`` at its top level, read without running it (the hook chains into the
    ``sitecustomize`` it shadows when imported)."""
    tree = ast.parse(path.read_text())
    values = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Constant) and any(getattr(t, "id", None) == name for t in node.targets)]
    assert len(values) == 1, f"{path} assigns {name} {len(values)} times"
    return values[0]


def test_the_torch_hooks_own_copy_of_the_torch_memory_event_is_the_run_logs():
    assert _module_constant(HOOK_DIR / "sitecustomize.py", "TORCH_MEMORY_EVENT") == runlog.TORCH_MEMORY_EVENT
