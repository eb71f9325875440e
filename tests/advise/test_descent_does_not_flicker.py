"""A loss levelling off towards zero only slows: once its descent reads slow by the share of the gain it buys, a
window whose own log-slope still halves the loss per doubling must not read fast again (the tour's CPU-trained
run read fast 1-83, slow 83-107, fast 107-147, slow 147-297, fast 297-317, plateau: a loss sure to halve per
doubling is now at least a slow descent, never a fast one by its own slope once the gain's share reads it slow)."""

import numpy as np
import pytest

from gpuwise.advise.analysis import analyze_curve
from gpuwise.advise.phases import FAST, SLOW

from .curves import curve


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_loss_levelling_off_towards_zero_does_not_speed_up_again(seed):
    # cross-entropy on learnable data: an exponential fall to near zero and a slow 1/sqrt(t) tail, 30% minibatch noise
    rng = np.random.default_rng(seed)
    s = np.arange(1, 601)
    y = (0.005 + 2.3 * np.exp(-s * 5.0 / 100) + 0.3 / np.sqrt(s)) * np.exp(rng.normal(0, 0.3, len(s)))
    kinds = [p.kind for p in analyze_curve(curve(s, y)).phases]
    after_slow = kinds[kinds.index(SLOW):] if SLOW in kinds else []
    assert FAST not in after_slow, kinds
