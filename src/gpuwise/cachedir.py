"""Where gpuwise keeps what it can rebuild: ``$XDG_CACHE_HOME/gpuwise``, else ``~/.cache/gpuwise``.

Traces have their own switch (``GPUWISE_CACHE_DIR``, :mod:`gpuwise.trace.cache`); the rest (the wheel a
SkyPilot task uploads, the index of an installed timm's model names) lives in folders under this one.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """The folder ``parts`` under gpuwise's cache (not created)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "gpuwise", *parts)
