"""The contract every fuzzed call is held to: exit 0 with sane output, or exit 2 with one line on stderr;
never a traceback (an exception other than SystemExit escapes ``main``), never a hang (an alarm fires)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import signal

from gpuwise.cli import app as cli_app
from gpuwise.cli.app import main

HANG_S = 120.0   # a hang, not a loaded machine's slowness: generous


def _register_every_command() -> None:
    """``main`` registers only the command its argv names (fast start-up) and only once per process;
    calling it again and again in one process needs every command there from the start."""
    names = {c.name for c in cli_app.app.registered_commands}
    for module, commands in getattr(cli_app, "COMMAND_MODULES", {}).items():
        if not set(commands) <= names:
            importlib.import_module(f"gpuwise.cli.{module}").register(cli_app.app)


_register_every_command()


class Hang(Exception):
    pass


@contextlib.contextmanager
def no_hang(seconds: float = HANG_S):
    def fire(signum, frame):
        raise Hang(f"still running after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``gpuwise ARGV`` in this process: (exit code, stdout, stderr). Any exception but SystemExit escapes."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), no_hang():
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def assert_contract(argv: tuple[str, ...], code: int, out: str, err: str) -> dict | None:
    """The JSON object printed on success (with --json), after checking it is sane; None on exit 2."""
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("gpuwise: error:"), (argv, err)
        assert "\x1b" not in err, (argv, err)
        assert "--json" not in argv or out == "", (argv, out)
        return None
    assert code == 0, (argv, code, err[-2000:])
    if "--json" not in argv:
        return None
    obj = json.loads(out)
    assert_sane(obj, argv)
    return obj


_NON_NEGATIVE_WORDS = ("bytes", "cost", "price", "duration", "time_s", "kwh", "power", "samples")


def assert_sane(obj: object, argv: tuple[str, ...], key: str = "") -> None:
    """Every number finite; sizes, costs, prices, durations, energy non-negative; shares within 0..1."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert_sane(v, argv, str(k))
    elif isinstance(obj, list):
        for v in obj:
            assert_sane(v, argv, key)
    elif isinstance(obj, float):
        assert math.isfinite(obj), (argv, key, obj)
        if any(w in key for w in _NON_NEGATIVE_WORDS) and not key.startswith(("save", "delta", "error")):
            assert obj >= 0, (argv, key, obj)
        if key.endswith("share"):
            assert 0 <= obj <= 1, (argv, key, obj)
        if key.endswith("_pct"):
            assert 0 <= obj <= 100, (argv, key, obj)
    elif isinstance(obj, str):
        assert "\x1b" not in obj, (argv, key, obj)
