"""Accuracy of `gpuwise advise`: trend forecasts on held-out tails, and the noise-scale estimator.

Run: python -m benchmarks.advise_accuracy     # writes benchmarks/results/advise.md (+ .json, per case)

1. Synthetic curves (power law and exponential with Gaussian noise, known clean trend): fit on the
   first half of the steps, forecast the second half; error of the trend at the last step against the
   clean curve, and whether the clean curve lies inside the 90 % band there.
2. Real curves: small models trained on CPU here (MLP regression, logistic regression, a small CNN on
   synthetic images); fit on the first half, compare the forecast at the last step with the mean raw
   loss over the last 5 % of steps (the best stand-in for the unknown true trend).
3. Noise scale: B_simple from NoiseScaleMeter on linear regression, where the true value is
   d + 1 + d·σ²/|δ|² (derivation in tests/advise/test_noise_scale.py).

Baseline for the forecasts, on the same curves: a flat forecast (the mean loss over the last 5 % of
the fitted half), i.e. "the loss stays where it is".
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks.harness import CELL_HEADER, Case, comparison_row, record_scoring, scored_words, summarize, write_results

from gpuwise.advise.analysis import fit_start_step
from gpuwise.advise.fit import fit_trend
from gpuwise.advise.noise_scale import NoiseScaleMeter
from gpuwise.advise.phases import detect_phases


def forecast_case(steps: np.ndarray, loss: np.ndarray, truth_at_end: float, fraction: float = 0.5) -> dict:
    cut = int(len(steps) * fraction)
    head_s, head_y = steps[:cut], loss[:cut]
    phases = detect_phases(head_s, head_y)
    start = fit_start_step(phases, head_s)
    sel = head_s >= start
    fit = fit_trend(head_s[sel], head_y[sel])
    end = np.array([steps[-1]])
    pred = float(fit.predict(end)[0])
    low, high = (float(v[0]) for v in fit.band(end))
    start_level = float(np.median(head_y[: max(5, cut // 50)]))
    return {"family": fit.best.family.name, "pred": pred, "truth": truth_at_end,
            "flat": float(np.mean(head_y[-max(1, cut // 20):])), "in_band": bool(low <= truth_at_end <= high),
            # the miss as a share of what the run gained: a 100 % miss of a loss near 0 is not a 100 % miss
            "gain_error": (pred - truth_at_end) / max(start_level - truth_at_end, 1e-12)}


def synthetic_cases(rng: np.random.Generator) -> list[dict]:
    out = []
    for i in range(24):
        n = int(rng.choice([1000, 4000]))
        s = np.arange(n)
        a, b = rng.uniform(0.2, 2.0), rng.uniform(1.0, 5.0)
        if i % 2 == 0:
            c = rng.uniform(0.2, 0.8)
            clean = a + b * (s + 1.0) ** -c
            kind = f"power c={c:.2f}"
        else:
            tau = rng.uniform(0.1, 0.4) * n
            clean = a + b * np.exp(-s / tau)
            kind = f"exp tau={tau:.0f}"
        noise = rng.uniform(0.005, 0.05) * clean[-1]
        case = forecast_case(s, clean + rng.normal(0, noise, n), float(clean[-1]))
        out.append({"curve": kind, "steps": n, "noise_rel": round(noise / clean[-1], 3), **case})
    return out


def _train(kind: str, steps: int, seed: int) -> np.ndarray:
    torch.manual_seed(seed)
    if kind == "mlp_regression":
        x = torch.randn(4096, 16)
        y = torch.sin(x @ torch.randn(16, 1)) + 0.1 * torch.randn(4096, 1)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
        loss_fn = torch.nn.functional.mse_loss
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    elif kind == "logistic_regression":
        x = torch.randn(4096, 32)
        y = (x @ torch.randn(32) + 0.5 * torch.randn(4096) > 0).long()
        model = torch.nn.Linear(32, 2)
        loss_fn = torch.nn.functional.cross_entropy
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    else:  # small CNN on synthetic 16x16 images whose class is a bright quadrant
        labels = torch.randint(0, 4, (2048,))
        x = 0.5 * torch.randn(2048, 1, 16, 16)
        for q in range(4):
            r, c = divmod(q, 2)
            x[labels == q, :, 8 * r:8 * r + 8, 8 * c:8 * c + 8] += 0.3
        y = labels
        model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Flatten(), torch.nn.Linear(8 * 64, 4))
        loss_fn = torch.nn.functional.cross_entropy
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(x), (32,))
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return np.array(losses)


def real_cases(steps: int) -> list[dict]:
    out = []
    for kind in ("mlp_regression", "logistic_regression", "small_cnn"):
        for seed in range(2):
            loss = _train(kind, steps, seed)
            s = np.arange(steps)
            tail_mean = float(np.mean(loss[-steps // 20:]))
            case = forecast_case(s, loss, tail_mean)
            out.append({"curve": f"{kind} seed {seed}", "steps": steps, **case})
    return out


def noise_scale_cases() -> list[dict]:
    out = []
    gen = torch.Generator().manual_seed(0)
    for d, sigma, dist in ((8, 0.5, 0.5), (16, 1.0, 0.25), (32, 1.0, 1.0), (64, 2.0, 0.5)):
        w_true = torch.randn(d, generator=gen, dtype=torch.float64)
        w = w_true + dist * torch.randn(d, generator=gen, dtype=torch.float64) / np.sqrt(d)
        delta_sq = float(((w - w_true) ** 2).sum())
        truth = d + 1 + d * sigma**2 / delta_sq
        micro, k, n_steps = 8, 4, 4000
        x = torch.randn(n_steps * k, micro, d, generator=gen, dtype=torch.float64)
        y = x @ w_true + sigma * torch.randn(n_steps * k, micro, generator=gen, dtype=torch.float64)
        resid = x @ w - y
        grads = (x * resid[..., None]).mean(dim=1).reshape(n_steps, k, d)  # exact mean-loss gradients
        meter = NoiseScaleMeter(ema_weight=0.999)
        for g in grads:
            big = g.mean(dim=0)
            meter.update([float(v) for v in (g**2).sum(dim=1)], micro, float((big**2).sum()), k * micro)
        est = meter.estimate().b_simple
        out.append(Case(f"d={d} sigma={sigma}", "advise: noise scale", "no fit", est, truth, "samples"))
    return out


SET = "advise: held-out tails"
FLAT = "flat (last fitted loss)"
METHOD = """- **Forecasts**: each curve is cut in half; phases are detected on the first half, the trend is fitted
  there exactly as `gpuwise advise` does (fit start = current regime, not before 10 % of the steps;
  four families weighed by BIC; block-bootstrap band), and the forecast at the last step of the full
  curve (2× the fitted steps) is compared with the truth. Baseline: a flat forecast (the mean loss of
  the last 5 % of the fitted half).
  - *synthetic* (24 curves): power laws `a + b(t+1)^-c` (c 0.2–0.8) and exponentials
    `a + b·e^(-t/τ)` (τ 10–40 % of the run), 1,000 or 4,000 steps, Gaussian noise 0.5–5 % of the final
    loss; truth = the clean curve.
  - *real* (6 runs): small models trained on CPU by the script (MLP regression with SGD, logistic
    regression with SGD, a small CNN with momentum SGD on synthetic 16×16 images; batch 32, 1,200
    steps, 2 seeds); truth = the mean raw loss over the last 5 % of steps.
  - Error "of the loss": forecast/truth − 1. Error "of the gain": (forecast − truth) / (loss at the
    start − truth), which does not explode for losses near zero.
- **Noise scale**: `NoiseScaleMeter` (EMA 0.999) on linear regression with Gaussian inputs and noise,
  4,000 steps of 4 micro-batches of 8 (B_small 8, B_big 32), exact per-micro-batch gradients; truth
  B_simple = d + 1 + dσ²/|w − w*|² (derived in `tests/advise/test_noise_scale.py`)."""
READING = """Written 2026-12-03 from the tables above (every curve is seeded: a re-run gives the same tables
unless the code changes; read it again when they move):

- On curves that follow one law, the forecast at twice the steps is within 0.3 % (median) and 4.1 %
  (worst) of the truth, and the 90 % band holds the truth in 21 of 24 cases (88 %; read again 2026-12-07).
  It held 18 of 24 before the band was widened by the fit's own hold-out miss (the first half's fit against
  the last quarter, `advise/fit.py`): the bootstrap alone covers the noise of the fitted points, not how far
  the family chosen misses the curve's law. That change was made on seeded synthetic power laws in the
  tests (55 % -> 90 % coverage there), not on these tails.
- On real runs, the forecast is as good as the run is regular. Where the second half continues the
  first (logistic regression, the CNN), the miss is 0–6 % of what the run gained; where the first half
  was a long plateau that a later drop ended (MLP seed 1), no extrapolation can see it coming (117 %
  of the gain). `gpuwise advise` therefore words the forecast as "if nothing changes".
- Fitting from 10 % of the steps on, instead of from the first step, had cut the real-run median error
  of the loss from 45.6 % to 31.9 % and raised the synthetic band coverage from 17/24 to 19/24 (at
  0.1 → 0.4 % median synthetic error): the first steps follow other laws than the tail. (A change of
  the first session later moved the real-run median back to 45.7 %: MLP seed 0 fits an exponential.)
- The noise scale is accurate (0.4–5 %) when B_big is within ~3× of B_simple; when B_big ≪ B_simple
  (32 vs ~1,000) it scatters by 25–50 %, because |G|² is then a small difference of two noisy numbers.
  The advice it feeds ("well below B_noise: a larger batch pays off") is robust to that scatter.
- p90 is the nearest rank since the harness (2026-12-03): of 6 real runs it is the worst one (before:
  numpy's interpolated 118.3 % of the loss, 84.1 % of the gain)."""


def _cases(rows: list[dict], group: str) -> list[Case]:
    return [Case(r["curve"], SET, "held-out", r["pred"], r["truth"], "loss", {FLAT: r["flat"]}) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real-steps", type=int, default=1200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    synth = synthetic_cases(np.random.default_rng(2026))
    real = real_cases(args.real_steps)
    noise = noise_scale_cases()
    record_scoring(SET)
    sets = {"synthetic": synth, "real (CPU-trained)": real}
    lines = ["# advise: forecast error on held-out tails, and the noise-scale estimator", "",
             f"Script: `python -m benchmarks.advise_accuracy` ({time.time() - t0:.0f} s on the shared 2-core CPU "
             f"box, no GPU needed; per-case data in `advise.json`). Tails: {scored_words(SET)}.", "",
             "## Method", "", METHOD, "", "## Results", "", f"Cells: {CELL_HEADER}.", "",
             f"| set | curves | forecast at 2x the fitted steps (of the loss) | {FLAT} |", "|---|---|---|---|",
             *[comparison_row(name, _cases(rows, name), (FLAT,)) for name, rows in sets.items()], "",
             "| set | curves | of the loss gained | clean trend inside 90 % band |", "|---|---|---|---|",
             f"| synthetic | {len(synth)} | {summarize(c['gain_error'] for c in synth).cell()} | "
             f"{sum(c['in_band'] for c in synth)}/{len(synth)} |",
             f"| real (CPU-trained) | {len(real)} | {summarize(c['gain_error'] for c in real).cell()} | "
             "n/a (noisy truth) |", "",
             "| curve | best family | forecast | truth | error (of the loss) | error (of the gain) |",
             "|---|---|---|---|---|---|",
             *[f"| {c['curve']} | {c['family']} | {c['pred']:.4f} | {c['truth']:.4f} | "
               f"{c['pred'] / c['truth'] - 1:+.1%} | {c['gain_error']:+.1%} |" for c in real], "",
             f"Noise scale: {summarize(c.error for c in noise).cell()}.", "",
             "| d | sigma | true B_simple | estimate | error |", "|---|---|---|---|---|",
             *[f"| {c.id.split()[0][2:]} | {c.id.split()[1][6:]} | {c.measured:.2f} | {c.predicted:.2f} | "
               f"{c.error:+.1%} |" for c in noise], "",
             "## Reading", "", READING, "", "## Figures", "",
             "`gpuwise advise` plots of the docs' examples (`docs/advise.md`): a plateau (phases, fit, forecast band)",
             "and a real CPU run with the noise scale over time.", "",
             "![plateau](advise_plateau.png)", "![noise scale](advise_noise_scale.png)"]
    write_results("advise_accuracy", lines, {"set": SET, "synthetic": synth, "real": real, "noise_scale": noise})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
