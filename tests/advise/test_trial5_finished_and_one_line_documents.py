"""Defects a new user's trial of `gpuwise advise` found (fifth round).

- A run priced to its last logged step (``--total-steps`` equal to it, or a guarded run the guard recorded
  finished) got a "Stay on this GPU" item for "the remaining 0 steps" at "$0.00, counting 15.8 min of switching".
- A trainer_state.json written on one line (``json.dump`` without ``indent``: a re-saved or hand-made one) was read
  as JSON Lines: "no loss column (columns: log_history, max_steps, global_step)".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gpuwise.advise import AdviseSettings, PricingRequest, read_log
from gpuwise.advise import advise as run_advise
from gpuwise.catalog import load_catalog

from .curves import plateau_after


def test_a_run_priced_to_its_last_step_gets_no_advice_on_the_remaining_zero_steps(tmp_path: Path) -> None:
    s, y = plateau_after(150, n=400)
    log = tmp_path / "plateau.csv"
    log.write_text("step,loss,t_s\n" + "".join(f"{a},{b:.6g},{1.7e9 + 0.5 * a}\n" for a, b in zip(s, y)))
    report = run_advise(read_log(log), AdviseSettings(total_steps=int(s[-1])), load_catalog(None),
                        PricingRequest(gpu_name="a100-80gb-sxm4", price_per_hour=2.0, price_currency="USD",
                                       currency="USD"))
    assert report.diagnosis == "plateau" and report.end_step == int(s[-1])
    assert [x.kind for x in report.advice if x.kind == "switch_gpu"] == []
    assert not any("remaining 0 steps" in x.text for x in report.advice)


def test_a_trainer_state_json_on_one_line_is_read_as_one(tmp_path: Path) -> None:
    steps = np.arange(10, 2001, 10)
    history = [{"step": int(s), "loss": round(1 + 3 * s ** -0.3, 5), "learning_rate": 1e-4} for s in steps]
    history.append({"step": 2000, "train_runtime": 600.0, "train_loss": 1.5})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history, "max_steps": 5000, "global_step": 2000}))
    log = read_log(path)
    assert log.loss_name == "loss" and len(log.curve) == len(steps) and int(log.curve.steps[-1]) == 2000
    assert log.meta == {"max_steps": "5000"}
