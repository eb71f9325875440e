"""`python -m gpuwise` runs the CLI (a user whose venv's scripts are not on PATH): it said "No module named
gpuwise.__main__"."""

import subprocess
import sys


def test_python_m_gpuwise_runs_the_cli_with_its_exit_codes():
    ok = subprocess.run([sys.executable, "-m", "gpuwise", "--version"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.startswith("gpuwise ")
    refused = subprocess.run([sys.executable, "-m", "gpuwise", "gpus", "--provider", "nosuchcloud"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.startswith("gpuwise: error: --provider:")
