"""The picture of an advice report: raw and smoothed loss, phases shaded, forecast with its band.

Matplotlib with the Agg backend (no display needed); imported only when ``--plot`` is given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpuwise.advise.phases import FAST, PLATEAU, RISING, SLOW
from gpuwise.advise.report import AdviceReport
from gpuwise.plotfile import plot_format, save_figure

_PHASE_COLOURS = {FAST: "#2ca02c", SLOW: "#bcbd22", PLATEAU: "#7f7f7f", RISING: "#d62728"}
_PHASE_LABELS = {FAST: "fast descent", SLOW: "slow descent", PLATEAU: "plateau", RISING: "rising"}


def plot_report(report: AdviceReport, path: str | Path) -> Path:
    """Writes the picture to ``path`` (PNG, or the format its suffix names); PlotError (one line) where it cannot."""
    plot_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = report.analysis
    ns = report.noise_scale
    has_ns = ns is not None and np.isfinite(ns.history_b_simple).any()
    fig, axes = plt.subplots(2 if has_ns else 1, 1, figsize=(10, 7.5 if has_ns else 5.5), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]} if has_ns else None, sharex=has_ns)
    ax = axes[0][0]
    ax.plot(a.steps, a.loss, color="#1f77b4", alpha=0.3, lw=0.8, label="loss (raw)")
    ax.plot(a.steps, a.trend, color="#08306b", lw=1.8, label=f"trend (debiased EMA, w={a.ema_weight:.3f}, zero lag)")
    if a.fit is not None:
        fitted = a.steps[a.steps >= (a.fit_from_step or 0)]
        ax.plot(fitted, a.fit.predict(fitted), color="#ff7f0e", lw=1.0, alpha=0.9,
                label=f"fit from step {int(fitted[0]):,} ({a.fit.best.family.name}: most weight)")
        points = report.to_dict()["forecast"]["points"]
        fs = np.array([p["step"] for p in points])
        ax.plot(fs, [p["loss"] for p in points], "--", color="#ff7f0e", lw=1.6, label="forecast")
        ax.fill_between(fs, [p["low"] for p in points], [p["high"] for p in points], color="#ff7f0e", alpha=0.25,
                        lw=0, label="90 % band (trend)")
    if report.target_loss is not None:
        ax.axhline(report.target_loss, color="#9467bd", ls=":", lw=1.2, label=f"target {report.target_loss:g}")
    if a.nan_step is not None:
        ax.axvline(a.nan_step, color="#d62728", lw=1.5, label=f"NaN/inf at step {a.nan_step}")
    if a.divergence_step is not None:
        ax.axvline(a.divergence_step, color="#d62728", ls="--", lw=1.2, label=f"diverged after step {a.divergence_step}")
    finite = a.loss[np.isfinite(a.loss)]
    if len(finite) and finite.min() > 0 and np.percentile(finite, 99) / max(finite.min(), 1e-12) > 5:
        ax.set_yscale("log")
    # the y range follows the data (robustly), not a single spike or the forecast band
    lo, hi = np.percentile(finite, 0.5), np.percentile(finite, 99.5)
    pad = 0.05 * (hi - lo or abs(hi) or 1.0)
    if report.target_loss is not None:
        lo = min(lo, report.target_loss)
    if ax.get_yscale() == "log":
        ax.set_ylim(lo / 1.1, hi * 1.1)
    else:
        ax.set_ylim(lo - pad, hi + pad)
    seen = set()
    for p in a.phases:
        label = None if p.kind in seen else _PHASE_LABELS[p.kind]
        seen.add(p.kind)
        ax.axvspan(p.start_step, p.end_step, color=_PHASE_COLOURS[p.kind], alpha=0.12, lw=0, label=label)
    right = max([a.last_step] + ([int(fs[-1])] if a.fit is not None else []))
    if right > 4 * max(a.last_step, 1):
        # a forecast far past the data would squeeze the run into a sliver: log steps (linear near 0)
        ax.set_xscale("symlog", linthresh=max(10, int(a.steps[0]) or 10))
    ax.set_ylabel("loss")
    ax.set_title(f"{Path(report.source).name or 'loss curve'}: {report.diagnosis.replace('_', ' ')}", loc="left")
    ax.legend(loc="upper right", fontsize=8, framealpha=0.85, ncol=2)
    ax.grid(alpha=0.25)
    if has_ns:
        bx = axes[1][0]
        bx.plot(ns.history_steps, ns.history_b_simple, color="#17becf", lw=1.4, label="B_simple (noise scale, EMA)")
        bx.axhline(ns.batch_size, color="#7f7f7f", ls="--", lw=1.0, label=f"batch {ns.batch_size:g}")
        bx.set_yscale("log")
        bx.set_ylabel("batch size")
        bx.legend(loc="upper left", fontsize=8)
        bx.grid(alpha=0.25)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    try:
        return save_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
