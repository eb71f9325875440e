import subprocess
import sys

from gpuwise import __version__


def _gpuwise(*args):
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True)


def test_version_prints_the_package_version():
    r = _gpuwise("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"gpuwise {__version__}"


def test_help_lists_every_command():
    r = _gpuwise("--help")
    assert r.returncode == 0
    for command in ("gpus", "estimate", "recommend", "watch", "run", "report", "exporter", "advise"):
        assert command in r.stdout, command
