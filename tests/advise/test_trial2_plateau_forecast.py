"""Trial 2: on a plateau the forecast's JSON names the family its text weighs, and a floor is said only where the
families with weight level off (never the weighted mean of a floor and the zero bound a power law was held at)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gpuwise.advise.analysis import AdviseSettings, analyze_curve
from gpuwise.advise.families import POWER
from gpuwise.advise import fit
from gpuwise.cli.app import main

from .curves import curve

PLATEAU = 2.27
# How far below the plateau a stated floor may lie: the families fitted from 10 % of the steps can disagree by a
# quarter (seed 0: 2.01-2.25, the lower 0.26 below). 0.25 held for seed 0 only while a spurious mid-run "fast
# descent" (steps 22-29, kept by a fall measured from the run's top to its bottom) moved the fit's start to step 22.
FLOOR_MARGIN = 0.3


def _plateau(seed: int, n: int = 70, noise: float = 0.06):
    """A loss that falls from 2.77 and flattens near 2.27 (within 0.02 of it by step 70), with noise."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    return s, PLATEAU + 0.5 * np.exp(-s / (0.3 * n)) + rng.normal(0, noise, n)


def _advise_json(tmp_path, seed: int, capsys) -> dict:
    s, y = _plateau(seed)
    path = tmp_path / f"plateau{seed}.csv"
    path.write_text("step,loss\n" + "".join(f"{a},{b:.6g}\n" for a, b in zip(s, y)))
    try:
        main(["advise", str(path), "--json"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("seed", [0, 3])
def test_json_names_the_family_with_the_most_weight_as_the_text_does(tmp_path, capsys, seed):
    d = _advise_json(tmp_path, seed, capsys)
    assert d["diagnosis"] == "plateau"
    f = d["forecast"]
    weights = {c["family"]: c["weight"] for c in f["candidates"]}
    assert weights[f["family"]] == max(weights.values()) > 0
    assert f["formula"] == next(c["formula"] for c in f["candidates"] if c["family"] == f["family"])
    item = next(a for a in d["advice"] if a["kind"] == "forecast")
    assert item["numbers"]["family"] == f["family"]
    mix = item["text"].split(", weighed by BIC")[0]
    assert f["family"] in mix and all(name not in mix for name, w in weights.items() if w == 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_floor_said_is_where_the_plateau_is_not_a_mean_with_a_bound(tmp_path, capsys, seed):
    d = _advise_json(tmp_path, seed, capsys)
    f = d["forecast"]
    text = next(a for a in d["advice"] if a["kind"] == "forecast")["text"]
    said = re.search(r"levels off at (\d+(?:\.\d+)?)(?:–(\d+(?:\.\d+)?))?", text)
    stated = [float(x) for x in said.groups() if x] if said else []
    # the curve is within 0.02 of 2.27 and its noise is 0.06: a floor far below it is no level it goes to
    assert all(abs(x - PLATEAU) < FLOOR_MARGIN for x in stated)
    if f["asymptote_loss"] is not None:
        assert abs(f["asymptote_loss"] - PLATEAU) < FLOOR_MARGIN
        assert f["levels_off"]["low"] <= f["asymptote_loss"] <= f["levels_off"]["high"]
    # every family with weight has a floor of its own above the zero bound
    assert all(c["params"]["a"] > 0 for c in f["candidates"] if c["weight"] > 0)


def test_a_power_law_held_at_the_zero_bound_has_no_floor_of_its_own():
    s, y = _plateau(0)
    u = s / s[-1]
    held = fit.fit_family(POWER, u, y, floor_at_zero=True)
    free = fit.fit_family(POWER, u, y, floor_at_zero=False)
    assert held.params[0] == 0.0 and free.params[0] < 0       # the fit wanted a floor below 0
    assert fit.fitted_floor(held, nonneg=True) is None
    assert fit.fitted_floor(held, nonneg=False) == 0.0            # a loss that may go negative: 0 is a fitted level


def test_target_below_the_plateau_is_not_dated_by_a_bound_held_power_law():
    s, y = _plateau(0)
    a = analyze_curve(curve(s, y), AdviseSettings(target_loss=1.5))
    assert a.diagnosis == "plateau"
    assert a.steps_to_target is not None and a.steps_to_target.step is None
    assert abs(a.steps_to_target.floor - PLATEAU) < FLOOR_MARGIN
