"""A SIGKILL inside every window of a commit, including between the two renames of a step saved a second
time: the next resume finds the newest verified copy of the step, puts it back in place, and resumes from
it with its weights; nothing of it is pruned."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest
import torch

from gpuwise.guard import Guard

from .helpers import tiny_model

CHILD = Path(__file__).with_name("kill_in_commit.py")

# window -> (what the directory holds for step 3 after the kill, which save of step 3 the resume loads)
WINDOWS = {
    "first_place": ({".tmp"}, "a"),                 # first save of step 3, killed before its rename
    "before_aside": ({"step", ".tmp"}, "b"),        # second save complete, the first copy not yet moved
    "between": ({".old", ".tmp"}, "b"),             # first copy moved aside, second not yet in: no step-3
    "after_swap": ({"step", ".old"}, "b"),          # second in place, first copy not yet deleted
}


def _kinds_of_step_3(directory: Path) -> set[str]:
    names = [p.name for p in directory.iterdir() if "step-000000003" in p.name]
    return {"step" if n == "step-000000003" else n[:4] for n in names}


@pytest.mark.parametrize("keep", [1, 3])
@pytest.mark.parametrize("window", list(WINDOWS))
def test_sigkill_in_any_window_of_a_commit_resumes_the_step_with_its_weights(tmp_path, zygote, window, keep, caplog):
    directory = tmp_path / "ckpt"
    out, err = tmp_path / "child.out", tmp_path / "child.err"
    zygote.start([str(directory), str(keep), window], out, err, script=CHILD)
    assert zygote.wait() == -signal.SIGKILL, err.read_text()
    left, expected = WINDOWS[window]
    assert _kinds_of_step_3(directory) == left

    model = tiny_model(seed=5)
    guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), keep=keep)
    try:
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            ckpt = guard.resume()
        assert ckpt is not None and ckpt.step == 3 and guard.step_count == 3
        weights = torch.load(tmp_path / "expected.pt", weights_only=True)[expected]
        assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
        assert _kinds_of_step_3(directory) == {"step"}  # leftovers removed only after the recovery
        if ".old" in left and "step" not in left or left == {".tmp"}:
            assert "recovered step-000000003" in caplog.text
        guard.step_count = 4
        guard.save()  # a prune after the recovery keeps step 3 (keep=1: step 4 alone)
        assert [p.name for p in guard.store.step_dirs()] == ["step-000000004", "step-000000003",
                                                             "step-000000002"][:keep]
    finally:
        guard.close()
