"""Session-wide: the tests never use the network. Hub lookups see only the caches the tests build."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"       # read at call time by gpuwise.workload.hub; inherited by subprocesses
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
