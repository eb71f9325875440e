"""No phase printed is narrower than the documented rule (docs/advise.md): ×1.16 in steps and 3 % of the run, a fast
descent at the start held to its width in log-steps only. Before, a one-bin "fast descent" half-way down a noisy
decay was taken to carry the fall of the whole curve (measured from the curve's top before it to its bottom after
it) and was never merged: a 300-step run, 2 + 3·exp(-t/40) with ±0.05 noise, read fast descent, slow descent,
fast descent from step 135 to 143, plateau."""

import math

import numpy as np
from hypothesis import example, given, settings, strategies as st

from gpuwise.advise import AdviseSettings, Curve
from gpuwise.advise.analysis import analyze_curve
from gpuwise.advise.phases import FAST, PhaseThresholds, log_time

TH = PhaseThresholds()


def _noisy_decay(seed: int, n_steps: int, tau_share: float, noise: float, every: int):
    """2 + 3·exp(-t/τ) over ``n_steps`` logged every ``every`` steps, with Gaussian noise of ``noise``."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n_steps + 1, every).astype(float)
    return steps, 2.0 + 3.0 * np.exp(-steps / (tau_share * n_steps)) + rng.normal(0.0, noise, len(steps))


def _too_narrow(phases, steps: np.ndarray) -> list[tuple[str, int, int]]:
    """The phases narrower than the documented rule, in the steps the table prints."""
    span = float(steps[-1] - steps[0])
    out = []
    for k, p in enumerate(phases):
        log_width = float(np.diff(log_time(np.array([p.start_step, p.end_step], dtype=float)))[0])
        share = (p.end_step - p.start_step) / span
        first_fast = k == 0 and p.kind == FAST
        if log_width < TH.min_phase_log_width or (not first_fast and share < TH.min_phase_step_fraction):
            out.append((p.kind, p.start_step, p.end_step))
    return out


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n_steps=st.integers(150, 1000), tau_share=st.floats(0.02, 0.5),
       noise=st.floats(0.005, 0.3), every=st.sampled_from([1, 2, 5]))
@example(seed=23, n_steps=300, tau_share=40 / 300, noise=0.05, every=1)     # the trial's short run
@example(seed=12, n_steps=957, tau_share=453 / 957, noise=0.061, every=1)
def test_no_phase_of_a_noisy_decay_is_narrower_than_the_documented_rule(seed, n_steps, tau_share, noise, every):
    steps, loss = _noisy_decay(seed, n_steps, tau_share, noise, every)
    phases = analyze_curve(Curve(steps, loss), AdviseSettings()).phases
    assert _too_narrow(phases, steps) == []


def test_the_short_noisy_run_reads_without_a_flickering_fast_descent(tmp_path, cli_json):
    steps, loss = _noisy_decay(23, 300, 40 / 300, 0.05, 1)
    path = tmp_path / "short.csv"
    path.write_text("step,loss\n" + "".join(f"{int(s)},{v:.6f}\n" for s, v in zip(steps, loss)))
    phases = cli_json(["advise", str(path), "--json"])["phases"]
    fast = [p for p in phases if p["kind"] == FAST]
    assert len(fast) == 1 and fast[0]["start_step"] == 1
    assert all(p["end_step"] / p["start_step"] >= math.exp(TH.min_phase_log_width) for p in phases)
