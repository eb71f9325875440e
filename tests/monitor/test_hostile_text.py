"""Text from outside gpuwise reaches the terminal as text: rich markup in a process command line, an NVML
name or a catalog provider is shown, not interpreted (``[/]`` used to crash `gpuwise watch` with a
MarkupError), and raw escape sequences (a window title, a screen clear) are removed."""

from __future__ import annotations

import os
import subprocess
import sys

from gpuwise.text import for_console

from monitor_fakes import GIB, gpuwise, write_frames

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
EVIL_COMMAND = f"python evil.py [/] [red]loud {TITLE}{CLEAR}--x"


def _frames(tmp_path):
    gpu = {"gpu_index": 0, "uuid": "GPU-aaaa", "name": f"NVIDIA A100 [/]{CLEAR}", "utilization_pct": 30,
           "memory_used_bytes": 13 * GIB, "memory_total_bytes": 40 * GIB,
           "processes": [{"pid": 424242, "used_memory_bytes": 11 * GIB, "user": "[bold]mallory",
                          "command": EVIL_COMMAND}]}
    return write_frames(tmp_path / "frames.json", [[gpu]])


def test_watch_shows_markup_in_a_command_line_and_drops_escape_sequences(tmp_path):
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{_frames(tmp_path)}", COLUMNS="200")
    r = gpuwise("watch", "--count", "1", env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr
    line = next(l for l in r.stdout.splitlines() if "424242" in l)
    assert "python evil.py [/] [red]loud --x" in line and "[bold]mallory" in line
    assert "A100 [/]" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "pwned" not in r.stdout


def test_gpus_shows_a_provider_name_with_markup_and_no_escape_sequences(tmp_path):
    catalog = tmp_path / "cat.toml"
    catalog.write_text('[[offer]]\nprovider = "lab [/] \\u001b]0;pwned\\u0007x"\ngpu = "t4"\nprice_per_hour = 0.9\n'
                       'currency = "CNY"\nsource = "invoice"\nchecked = "2026-12-01"\n')
    env = dict(os.environ, COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "gpus", "t4", "--catalog", str(catalog)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "lab [/] x" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "pwned" not in r.stdout


def test_for_console_escapes_markup_and_strips_controls():
    from rich.console import Console

    console = Console(file=open(os.devnull, "w"), force_terminal=False, width=200)
    text = for_console(EVIL_COMMAND)
    assert "\x1b" not in text and "\x07" not in text
    with console.capture() as captured:
        console.print(text)
    assert captured.get().strip() == "python evil.py [/] [red]loud --x"
    assert for_console(None) == ""
