"""One smooth-max rule (runtime.predict): the step model's floats and calibration's arrays take the same function."""

import numpy as np
import pytest

from gpuwise.calibrate import fit
from gpuwise.runtime import llm, predict
from gpuwise.runtime.predict import SMOOTH_MAX_P, smooth_max

PAIRS = [(1.0, 1.0), (3.0, 1.0), (1e-3, 2e-3), (0.5, 0.0), (0.0, 0.7), (0.0, 0.0), (-1.0, 2.0), (4.0, -0.5),
         (1e-6, 1e2), (2.5e-2, 2.4e-2)]


def test_the_exponent_is_public_and_unchanged():
    assert SMOOTH_MAX_P == 4.0
    assert not hasattr(predict, "_SMOOTH_MAX_P")


def test_floats_follow_the_rule():
    assert smooth_max(3.0, 4.0) == (3.0**4 + 4.0**4) ** 0.25
    assert smooth_max(0.0, 2.0) == 2.0 and smooth_max(-1.0, 0.5) == 0.5
    assert smooth_max(3.0, 4.0, p=2.0) == 5.0
    assert isinstance(smooth_max(1.0, 2.0), float)


def test_arrays_agree_with_floats_element_by_element():
    a, b = (np.array(x) for x in zip(*PAIRS))
    out = smooth_max(a, b)
    assert isinstance(out, np.ndarray) and out.shape == a.shape
    # the same rule; numpy's vectorised pow may differ from Python's in the last bit
    assert out.tolist() == pytest.approx([smooth_max(x, y) for x, y in PAIRS], rel=1e-14, abs=0)
    # one side an array, the other a float: broadcast, same numbers
    assert smooth_max(a, 1.5).tolist() == pytest.approx([smooth_max(x, 1.5) for x in a.tolist()], rel=1e-14, abs=0)
    assert smooth_max(1.5, b).tolist() == pytest.approx([smooth_max(1.5, y) for y in b.tolist()], rel=1e-14, abs=0)


def test_calibration_and_the_llm_model_use_the_same_function():
    assert fit.smooth_max is predict.smooth_max
    assert llm.smooth_max is predict.smooth_max
    assert fit.SMOOTH_MAX_P is predict.SMOOTH_MAX_P
    assert not hasattr(fit, "_smooth_max")


def test_implied_host_time_inverts_the_rule():
    d, launch = 0.02, 0.003
    h = fit.implied_host_s(d, launch)
    assert smooth_max(d, h) == pytest.approx(d + launch, rel=1e-12)
