"""A short log whose loss rises within the noise is one plateau, and its number is a plateau's: the kind its
number names (before, the lone phase read "plateau" beside a rise of 3 % to 12 % per doubling)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("seed", range(10))
def test_a_rise_within_the_noise_is_a_plateau_with_a_plateaus_number(seed):
    from gpuwise.advise.phases import PLATEAU, PhaseThresholds, detect_phases, kind_of

    s = np.arange(1, 16).astype(float)
    loss = 2 * s**0.1 * (1 + np.random.default_rng(seed).normal(0, 0.1, len(s)))
    phases = detect_phases(s, loss)
    assert all(kind_of(p.drop_per_doubling, PhaseThresholds()) == p.kind for p in phases), phases
    if [p.kind for p in phases] == [PLATEAU]:
        assert -PhaseThresholds().rise_per_doubling < phases[0].drop_per_doubling < 0, phases
