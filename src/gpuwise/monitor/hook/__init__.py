"""The opt-in PyTorch hook of ``gpuwise run --torch-hook``: this directory goes first on the child's
PYTHONPATH, so Python imports its ``sitecustomize`` at start-up (see sitecustomize.py)."""

from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parent
RUNLOG_ENV = "GPUWISE_RUNLOG"
