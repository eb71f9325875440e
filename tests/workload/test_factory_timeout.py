"""A user's ``file.py:factory`` that hangs is stopped at a time limit, named, in one line."""

from __future__ import annotations

import time

import pytest

from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.deadline import FACTORY_TIMEOUT_ENV
from gpuwise.workload.specs import resolve_model_spec

HANGS = """import time
import torch
def make():
    try:
        time.sleep(600)       # a download that never answers
    except Exception:         # and code that swallows errors: the limit still holds
        pass
    return torch.nn.Linear(4, 4)
"""


def test_a_factory_that_sleeps_is_stopped_at_the_limit(tmp_path, monkeypatch):
    model_file = tmp_path / "model.py"
    model_file.write_text(HANGS)
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, "0.5")
    spec = f"{model_file}:make"
    start_s = time.monotonic()
    with pytest.raises(WorkloadError, match=r"model factory model.py:make did not finish within 0.5 s; .*"
                                            r"GPUWISE_FACTORY_TIMEOUT_S"):
        resolve_model_spec(spec).build(Workload(model=spec, batch_size=2))
    assert time.monotonic() - start_s < 60   # the 0.5 s limit, with room for a loaded machine; the sleep is 600 s


def test_a_file_that_hangs_on_import_is_stopped_too(tmp_path, monkeypatch):
    model_file = tmp_path / "slow_import.py"
    model_file.write_text("import time\ntime.sleep(600)\ndef make():\n    pass\n")
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, "1")
    spec = f"{model_file}:make"
    with pytest.raises(WorkloadError, match=r"model factory slow_import.py:make did not finish within 1 s"):
        resolve_model_spec(spec).build(Workload(model=spec, batch_size=2))


def test_the_limit_must_be_a_positive_number(tmp_path, monkeypatch):
    model_file = tmp_path / "model.py"
    model_file.write_text("import torch\ndef make():\n    return torch.nn.Linear(4, 4)\n")
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, "-3")
    spec = f"{model_file}:make"
    with pytest.raises(WorkloadError, match="GPUWISE_FACTORY_TIMEOUT_S is '-3', not a number of seconds > 0"):
        resolve_model_spec(spec).build(Workload(model=spec, batch_size=2))


class _OuterAlarm(Exception):
    pass


def test_a_callers_own_alarm_outlives_the_limit_and_fires_first_where_it_is_due_first():
    # from the review: deadline() set the timer to 0 on its way out, so the fuzz suite's 30 s hang guard (and any
    # caller's alarm) was gone after the first trace
    import signal

    from gpuwise.workload.deadline import deadline

    def outer(signum, frame):
        raise _OuterAlarm

    previous = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with deadline("a quick block", 5.0):
            pass
        left_s, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25.0 < left_s <= 30.0                       # the caller's timer goes on with what it had left
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(_OuterAlarm):                   # due before the 5 s limit: the caller's, not a timeout
            with deadline("a slow block", 5.0):
                time.sleep(3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
