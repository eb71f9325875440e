"""What gpuwise keeps in its cache (live offers, the installed timm's model index, the wheel a SkyPilot task
uploads) is written through gpuwise.atomic: a write that fails leaves neither a partial file nor its temporary
file behind (each wrote ``*.tmp-PID`` then renamed it, and left it when the rename failed). The failure: a
directory in the file's place."""

from __future__ import annotations

import hashlib

import pytest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "gpuwise"


def test_live_offers_that_cannot_be_cached_leave_nothing_behind(cache):
    from gpuwise.catalog import load_catalog
    from gpuwise.catalog.live import cache_path, live_offers

    cache_path().mkdir(parents=True)
    live = live_offers(load_catalog(user_file=False), query=lambda: [], version="test")
    assert live.offers == ()
    assert [p.name for p in cache_path().parent.iterdir()] == [cache_path().name]


def test_a_timm_index_that_cannot_be_cached_leaves_nothing_behind(cache):
    pytest.importorskip("timm")
    from gpuwise.workload.timm_index import timm_models, timm_version

    target = cache / "timm" / f"models-{timm_version()}.json"
    target.mkdir(parents=True)
    assert "resnet18" in timm_models.__wrapped__()
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_a_wheel_that_cannot_be_written_leaves_nothing_behind(tmp_path):
    from gpuwise.launch.plan import LaunchError
    from gpuwise.launch.wheel import build_wheel, wheel_bytes

    name, data = wheel_bytes()
    folder = tmp_path / hashlib.sha256(data).hexdigest()[:16]
    (folder / name).mkdir(parents=True)
    with pytest.raises(LaunchError, match="cannot write gpuwise's wheel"):
        build_wheel(tmp_path)
    assert [p.name for p in folder.iterdir()] == [name]


def test_a_wheel_is_written_whole(tmp_path):
    from gpuwise.launch.wheel import build_wheel, wheel_bytes

    path = build_wheel(tmp_path)
    assert path.read_bytes() == wheel_bytes()[1]
    assert [p.name for p in path.parent.iterdir()] == [path.name]
