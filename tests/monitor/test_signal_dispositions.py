"""The tests' children start with the signals tests send at their defaults, whatever started pytest: under a
`trap '' HUP QUIT` (or `nohup`) every child inherited them ignored, and since gpuwise leaves an ignored signal
ignored, the signal tests waited 2 minutes for a stop that never came, then failed (tests/conftest.py resets
them once for the session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

SENT = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
NESTED = "GPUWISE_TEST_NESTED_PYTEST"
READ_MASKS = ("import sys; f = {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/self/status') "
              "if l.startswith(('SigIgn', 'SigBlk'))}; print(f['SigIgn'], f['SigBlk'])")


def test_a_child_starts_with_the_signals_tests_send_neither_ignored_nor_blocked():
    ignored, blocked = map(int, subprocess.run([sys.executable, "-c", READ_MASKS], capture_output=True, text=True,
                                               check=True).stdout.split())
    for s in SENT:
        assert not ignored & (1 << (s - 1)), f"{s.name} ignored in the child"
        assert not blocked & (1 << (s - 1)), f"{s.name} blocked in the child"


def _hostile_start() -> None:
    for s in SENT:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])


def test_so_they_do_under_a_pytest_started_with_them_ignored_or_blocked():
    if os.environ.get(NESTED):
        return      # the nested run checks the test above only
    root = Path(__file__).parents[2]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{Path(__file__).relative_to(root)}::"
                        "test_a_child_starts_with_the_signals_tests_send_neither_ignored_nor_blocked"],
                       cwd=root, capture_output=True, text=True, env=dict(os.environ, **{NESTED: "1"}),
                       preexec_fn=_hostile_start, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
