"""The interval a sampler kept is the median gap between its samples: one pause (a suspended process, a stalled
driver) is one long gap, not a slower interval (the mean over the run made 9 one-second gaps and one of a minute
"7.6 s kept, 1 s asked for" in the run log). The clock is the sampler's own, stepped by the test."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor import sampler as sampler_module

from monitor_fakes import two_gpu_frames


def _sampled_at(monkeypatch, times_s: list[float], interval_s: float = 1.0) -> Sampler:
    now = {"t": times_s[0]}

    def monotonic() -> float:
        return now["t"]

    monkeypatch.setattr(sampler_module, "time", SimpleNamespace(monotonic=monotonic, time=time.time))
    sampler = Sampler(ReplayBackend(two_gpu_frames(len(times_s))), interval_s=interval_s)
    for t in times_s:
        now["t"] = t
        sampler.sample_once()
    return sampler


def test_a_pause_is_not_a_slower_interval(monkeypatch):
    sampler = _sampled_at(monkeypatch, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 69])
    assert sampler.kept_interval_s == pytest.approx(1.0)
    assert "requested_interval_s" not in sampler.end_meta()      # before: interval_s 6.9, requested 1


def test_an_interval_kept_slower_throughout_is_recorded(monkeypatch):
    sampler = _sampled_at(monkeypatch, [0, 2.5, 5, 7.5, 10, 12.5, 15, 40])
    assert sampler.kept_interval_s == pytest.approx(2.5)
    meta = sampler.end_meta()
    assert meta["interval_s"] == pytest.approx(2.5) and meta["requested_interval_s"] == 1.0
