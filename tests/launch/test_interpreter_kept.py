"""The interpreter the user's command names runs the launch: torchrun starts a script with the Python it runs
under, so the emitted lines run the guard's torchrun with that interpreter (``/usr/bin/python3 -m
gpuwise.guard.torchrun … train.py``), check and install gpuwise for it, and say which one they tried.

A new user's trial: `--command '/usr/bin/python3 train.py'` and `'python3.11 train.py'` became `python -m
gpuwise.guard.torchrun … train.py`, run by whatever `python` was first on PATH (another environment); on a machine
with no `python` command the block stopped with "gpuwise is not installed on this node".
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import plan_launch, render
from gpuwise.launch.skypilot import skypilot_task

WHEEL = Path("gpuwise-0-py3-none-any.whl")
GUARD = ["-m", "gpuwise.guard.torchrun"]

# An interpreter stub from bash builtins only (the PATH holds nothing else): `-c 'import gpuwise'` passes, every
# other run records its argv (NUL-separated) in argv.<n>.
RECORDER = """#!/bin/bash
[ "$1" = -c ] && exit 0
n=0; while [ -e "argv.$n" ]; do n=$((n + 1)); done
printf '%s\\0' "$0" "$@" > "argv.$n"
"""
# an interpreter without gpuwise, whose pip cannot install the wheel (a fresh node, no index)
NO_GPUWISE = """#!/bin/bash
[ "$1" = -c ] && exit 1
echo "ERROR: Could not install $4" >&2; exit 1
"""


def _stub(path: Path, text: str = RECORDER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _plan(cat, command: str, count: int = 1, provider: str = "autodl"):
    return plan_launch(SimpleNamespace(count=count, provider=provider, spot=False), cat.gpu("rtx-4090"), command)


def _run(text: str, cwd: Path, path_dirs: list[Path]) -> subprocess.CompletedProcess:
    """``text`` in bash on a node whose PATH holds only ``path_dirs`` (no `python` unless a stub is there)."""
    env = {"PATH": ":".join(map(str, path_dirs)), "HOME": str(cwd)}
    return subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def _argvs(cwd: Path) -> list[list[str]]:
    runs = sorted(cwd.glob("argv.*"), key=lambda p: int(p.suffix[1:]))
    return [p.read_text().split("\0")[:-1] for p in runs]


def test_an_absolute_interpreter_runs_the_launch_on_a_node_without_python(cat, tmp_path):
    python = _stub(tmp_path / "env" / "bin" / "python3")
    text = render(_plan(cat, f"{python} train.py --lr 1"), "torchrun")
    done = _run(text, tmp_path, [tmp_path / "empty"])
    assert done.returncode == 0, done.stderr
    (argv,) = _argvs(tmp_path)
    assert argv[:3] == [str(python), *GUARD] and argv[-3:] == ["train.py", "--lr", "1"]


@pytest.mark.parametrize("command", ["python3.11 train.py", "python3.11 -u train.py", "python3.11 -m pkg.train"])
def test_a_named_interpreter_on_path_runs_torchrun_and_keeps_the_command_s_meaning(cat, tmp_path, command):
    bin_dir = _stub(tmp_path / "bin" / "python3.11").parent
    _stub(tmp_path / "other" / "python")           # another environment's python, first on PATH: not used
    done = _run(render(_plan(cat, command), "torchrun"), tmp_path, [tmp_path / "other", bin_dir])
    assert done.returncode == 0, done.stderr
    (argv,) = _argvs(tmp_path)
    assert argv[:3] == [str(bin_dir / "python3.11"), *GUARD]
    worker = command.split()
    tail = {"train.py": worker[1:], "-u": ["--no-python", *worker], "-m": ["--module", *worker[2:]]}[worker[1]]
    assert argv[-len(tail):] == tail


@pytest.mark.parametrize("command, missing", [("python3.11 train.py", "python3.11"), ("python train.py", "python")])
def test_a_node_without_the_interpreter_stops_naming_it_not_gpuwise(cat, tmp_path, command, missing):
    done = _run(render(_plan(cat, command), "torchrun", wheel=WHEEL), tmp_path, [tmp_path / "empty"])
    assert done.returncode == 1 and _argvs(tmp_path) == []
    (said,) = done.stderr.strip().splitlines()
    assert said.startswith(f"error: {missing} is not a command on this node") and "not installed" not in said


def test_a_node_whose_interpreter_lacks_gpuwise_installs_with_that_interpreter_and_names_it(cat, tmp_path):
    python = _stub(tmp_path / "bin" / "python3.11", NO_GPUWISE)
    done = _run(render(_plan(cat, "python3.11 train.py"), "torchrun", wheel=WHEEL), tmp_path, [python.parent])
    assert done.returncode == 1 and _argvs(tmp_path) == []
    said = done.stderr.strip().splitlines()
    assert said[0] == f"ERROR: Could not install ./{WHEEL.name}"        # python3.11 -m pip install ./<wheel>
    assert said[-1].startswith("error: gpuwise is not installed on this node for python3.11: ")
    assert f"python3.11 -m pip install ./{WHEEL.name}" in said[-1]


def test_the_skypilot_task_runs_torchrun_with_the_interpreter_and_installs_gpuwise_for_it(sky, cat, tmp_path):
    python = _stub(tmp_path / "env" / "bin" / "python3")
    gpuwise = _stub(tmp_path / "bin" / "gpuwise")
    task = skypilot_task(_plan(cat, f"{python} train.py", provider="aws"), WHEEL)
    done = _run(task["run"], tmp_path, [gpuwise.parent])
    assert done.returncode == 0, done.stderr
    (argv,) = _argvs(tmp_path)
    launched = argv[argv.index("--") + 1:]
    assert launched[:3] == [str(python), *GUARD] and launched[-1] == "train.py"
    assert f"{python} -m pip install ~/.gpuwise/wheels/{WHEEL.name}" in task["setup"].splitlines()
    path = tmp_path / "task.yaml"
    path.write_text(render(_plan(cat, f"{python} train.py", provider="aws"), "skypilot", wheel=WHEEL))
    assert str(python) in sky.Task.from_yaml(str(path)).run
