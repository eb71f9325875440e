"""The installed timm's model names and the image side each is built for, kept in gpuwise's cache per
timm version: after the first time, a misspelt ``timm:`` name is refused and a cached estimate answered
without importing timm (seconds to a minute on a small machine; the issue measured 12 s for a typo).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

from gpuwise.atomic import write_text_atomic
from gpuwise.cachedir import user_cache_dir

log = logging.getLogger(__name__)


def timm_version() -> str | None:
    try:
        return version("timm")
    except PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def timm_models() -> dict[str, int | None]:
    """Model name -> the side of its pretrained config's input (None where it has none), for the installed
    timm; {} when timm is not installed."""
    installed = timm_version()
    if installed is None:
        return {}
    path = user_cache_dir("timm", f"models-{installed}.json")
    try:
        cached = json.loads(path.read_text())
        if cached.get("timm") == installed and isinstance(cached.get("models"), dict):
            return cached["models"]
    except (OSError, ValueError):
        pass
    import timm  # the first time for this version (slow), then from the file

    models = {}
    for name in timm.list_models():
        cfg = timm.get_pretrained_cfg(name)
        models[name] = int(cfg.input_size[-1]) if cfg is not None and getattr(cfg, "input_size", None) else None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps({"timm": installed, "models": models}))
    except OSError as exc:   # a read-only home: right, only slower next time
        log.debug("timm index not cached at %s: %s", path, exc)
    return models
