"""Any Hugging Face Hub model id -> its ``config.json`` (only that file: no weights), through huggingface_hub.

The user's Hub cache comes first (``HF_HUB_CACHE`` / ``HF_HOME``, as transformers uses it), so a model
downloaded once, or a cache copied onto an offline machine, resolves without a network. With
``HF_HUB_OFFLINE=1`` nothing else is tried. Online, one quick request decides: a gated model raises
WorkloadError saying how to log in; a repo that does not exist, or a network that cannot reach the
Hub, returns None and the caller falls back to the configs gpuwise ships.

The environment is read at each call, not at import (huggingface_hub reads it once, at import).
"""

from __future__ import annotations

import logging
import os
import re
from functools import lru_cache
from pathlib import Path

from gpuwise.workload.errors import WorkloadError

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+")
_PROBE_TIMEOUT_S = 5.0
NOT_ON_HUB = "not found on the Hub"   # the Hub answered: no such repo (hub_config's why)
LOGIN_HINT = ("accept its licence on the model's Hub page, then log in with `hf auth login` "
              "(`huggingface-cli login` before huggingface_hub 0.34; or set HF_TOKEN to an access token)")


def looks_like_repo_id(name: str) -> bool:
    """``org/name`` as the Hub spells repo ids (not a path to an existing file or folder)."""
    return bool(_REPO_ID.fullmatch(name)) and not Path(name).exists()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_config_path(repo_id: str, revision: str | None = None) -> Path | None:
    """The local path of ``repo_id``'s config.json (downloaded into the Hub cache if need be), or None.

    None: not cached and offline, not on the Hub, or the Hub unreachable (``hub_config`` says which).
    Raises WorkloadError for a gated repo the user has no access to, with how to log in.
    """
    return hub_config(repo_id, revision)[0]


def hub_config(repo_id: str, revision: str | None = None) -> tuple[Path | None, str]:
    """(path or None, why): why is "found", or what kept it from being found, in words for a message."""
    if not looks_like_repo_id(repo_id):
        return None, "not a Hub repo id (ORG/NAME)"
    return _hub_config(repo_id, revision, os.environ.get("HF_HUB_CACHE"), offline())


@lru_cache(maxsize=64)
def _hub_config(repo_id: str, revision: str | None, cache_dir: str | None, is_offline: bool) -> tuple[Path | None, str]:
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, CONFIG_FILE, cache_dir=cache_dir, revision=revision)
    if isinstance(cached, str):
        return Path(cached), "found"
    if is_offline:
        return None, "not in the Hub cache, and HF_HUB_OFFLINE is set"
    return _download(repo_id, revision, cache_dir)


def _download(repo_id: str, revision: str | None, cache_dir: str | None) -> tuple[Path | None, str]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    status = probe(repo_id, revision)
    if status is None:
        log.info("the Hub is unreachable: %s resolves from the shipped configs only", repo_id)
        return None, "not in the Hub cache, and the Hub could not be reached"
    if status == "gated":
        raise WorkloadError(f"hf:{repo_id} is a gated model: {LOGIN_HINT}")
    if status == "missing":
        return None, NOT_ON_HUB
    try:
        return Path(hf_hub_download(repo_id, CONFIG_FILE, revision=revision, cache_dir=cache_dir)), "found"
    except GatedRepoError:
        raise WorkloadError(f"hf:{repo_id} is a gated model: {LOGIN_HINT}") from None
    except RepositoryNotFoundError:
        return None, NOT_ON_HUB
    except (HfHubHTTPError, OSError, ValueError) as exc:
        log.info("could not fetch %s from the Hub: %s", repo_id, exc)
        return None, f"its config.json could not be fetched from the Hub ({type(exc).__name__})"


def probe(repo_id: str, revision: str | None = None) -> str | None:
    """One HEAD request, no retries: 'ok', 'gated', 'missing', or None when the Hub cannot be reached.

    huggingface_hub retries a failed connection for ~25 s; a renter without a network should get the
    shipped-config answer at once.
    """
    import requests
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    url = hf_hub_url(repo_id, CONFIG_FILE, revision=revision)
    try:
        response = get_session().head(url, headers=build_hf_headers(), timeout=_PROBE_TIMEOUT_S,
                                      allow_redirects=False)
    except (requests.RequestException, OSError):
        return None
    code = response.headers.get("X-Error-Code", "")
    if code == "GatedRepo" or (response.status_code == 403 and "gated" in response.text.lower()):
        return "gated"
    if response.status_code in (401, 404) or code in ("RepoNotFound", "EntryNotFound", "RevisionNotFound"):
        return "missing"
    return "ok" if response.status_code < 400 else None
