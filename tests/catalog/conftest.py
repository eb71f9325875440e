"""Keep every catalog test away from the real ~/.config/gpuwise: each gets an empty config dir."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(config))
    return config
