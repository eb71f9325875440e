"""Fixtures for the launch tests: the built-in catalog and SkyPilot's own parser."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def sky(tmp_path_factory):
    # SkyPilot writes a user hash and lock files under $HOME/.sky on import: keep them out of the real home.
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(home))
    import sky  # a test dependency (requirements-dev.txt): its own parser checks what gpuwise emits

    yield sky
    mp.undo()
