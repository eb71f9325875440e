"""Accuracy of `gpuwise advise`: trend forecasts on held-out tails, and the noise-scale estimator.

Run: .venv/bin/python benchmarks/advise_accuracy.py [--out benchmarks/results/advise_data.json]

1. Synthetic curves (power law and exponential with Gaussian noise, known clean trend): fit on the
   first half of the steps, forecast the second half; error of the trend at the last step against the
   clean curve, and whether the clean curve lies inside the 90 % band there.
2. Real curves: small models trained on CPU here (MLP regression, logistic regression, a small CNN on
   synthetic images); fit on the first half, compare the forecast at the last step with the mean raw
   loss over the last 5 % of steps (the best stand-in for the unknown true trend).
3. Noise scale: B_simple from NoiseScaleMeter on linear regression, where the true value is
   d + 1 + d·σ²/|δ|² (derivation in tests/advise/test_noise_scale.py).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

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
            "rel_error": abs(pred / truth_at_end - 1.0), "in_band": bool(low <= truth_at_end <= high),
            # the miss as a share of what the run gained: a 100 % miss of a loss near 0 is not a 100 % miss
            "gain_error": abs(pred - truth_at_end) / max(start_level - truth_at_end, 1e-12)}


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
        out.append({"d": d, "sigma": sigma, "true_b_simple": round(truth, 2), "estimate": round(est, 2),
                    "rel_error": abs(est / truth - 1.0)})
    return out


def _summary(errors: list[float]) -> str:
    e = np.array(errors) * 100
    return f"median {np.median(e):.1f} %, p90 {np.percentile(e, 90):.1f} %, worst {e.max():.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--real-steps", type=int, default=1200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    synth = synthetic_cases(np.random.default_rng(2026))
    real = real_cases(args.real_steps)
    noise = noise_scale_cases()
    print("| set | cases | forecast error at 2x the fitted steps (of the loss) | (of the loss gained) | clean trend inside 90 % band |")
    print("|---|---|---|---|---|")
    print(f"| synthetic | {len(synth)} | {_summary([c['rel_error'] for c in synth])} | "
          f"{_summary([c['gain_error'] for c in synth])} | {sum(c['in_band'] for c in synth)}/{len(synth)} |")
    print(f"| real (CPU-trained) | {len(real)} | {_summary([c['rel_error'] for c in real])} | "
          f"{_summary([c['gain_error'] for c in real])} | n/a (noisy truth) |")
    print()
    print("| curve | best family | forecast | truth | error (of the loss) | error (of the gain) |")
    print("|---|---|---|---|---|---|")
    for c in real:
        print(f"| {c['curve']} | {c['family']} | {c['pred']:.4f} | {c['truth']:.4f} | {c['rel_error'] * 100:.1f} % | "
              f"{c['gain_error'] * 100:.1f} % |")
    print()
    print("| d | sigma | true B_simple | estimate | error |")
    print("|---|---|---|---|---|")
    for c in noise:
        print(f"| {c['d']} | {c['sigma']} | {c['true_b_simple']} | {c['estimate']} | {c['rel_error'] * 100:.1f} % |")
    print(f"\n({time.time() - t0:.0f} s)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"synthetic": synth, "real": real, "noise_scale": noise}, f, indent=1)


if __name__ == "__main__":
    main()
