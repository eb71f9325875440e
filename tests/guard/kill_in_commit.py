"""Child of test_kill_in_commit: saves steps 1..3 with a Guard, then step 3 again, and SIGKILLs itself in
the named window of a commit (argv: directory keep window). Writes the weights of both saves of step 3
to DIR/../expected.pt first."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import torch

from gpuwise.guard import Guard

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import tiny_model  # noqa: E402

directory, keep, window = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
model = tiny_model(seed=0)
guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), keep=keep, verbose=False)
for step in (1, 2, 3):
    guard.step_count = step
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    if step < 3:
        guard.save()
weights_a = {k: v.clone() for k, v in model.state_dict().items()}
weights_b = {k: v + 0.5 for k, v in weights_a.items()}
torch.save({"a": weights_a, "b": weights_b}, directory.parent / "expected.pt")


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


real_replace, real_rmtree = os.replace, shutil.rmtree


def replace(src, dst):
    moving_aside = Path(src).name == "step-000000003" and Path(dst).name.startswith(".old-")
    placing = Path(src).name.startswith(".tmp-") and Path(dst).name == "step-000000003"
    if (window == "before_aside" and moving_aside) or (window == "first_place" and placing):
        _die()
    real_replace(src, dst)
    if window == "between" and moving_aside:
        _die()


def rmtree(path, *args, **kwargs):
    if window == "after_swap" and Path(path).name.startswith(".old-step-000000003"):
        _die()
    real_rmtree(path, *args, **kwargs)


if window == "first_place":
    os.replace = replace
guard.save()  # step 3, weights a
with torch.no_grad():
    model.load_state_dict(weights_b)
os.replace, shutil.rmtree = replace, rmtree
guard.save()  # step 3 again, weights b: killed inside
print("not killed")
