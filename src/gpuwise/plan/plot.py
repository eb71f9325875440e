"""The recommendation as a picture: cost against time for every option, the deadline, the choice."""

from __future__ import annotations

from pathlib import Path

from gpuwise.plan.money import convert
from gpuwise.plan.recommend import Recommendation


def plot_recommendation(rec: Recommendation, path: str | Path, deadline_s: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    priced = [o for o in rec.options if o.fits and o.total_time_s is not None]
    cur = rec.ranking_currency
    front = _pareto_front(priced, cur)
    for o in priced:
        x, y = o.total_time_s / 3600, convert(o.total_cost, o.currency, cur)
        color = "tab:blue" if o.eligible else "tab:gray"
        ax.scatter(x, y, s=18 + 14 * o.count, color=color, alpha=0.75, zorder=2)
        if any(o is f for f in front):  # label only the options no other beats on both time and cost
            ax.annotate(f"{o.gpu}×{o.count}" if o.count > 1 else o.gpu, (x, y), fontsize=7,
                        xytext=(3, 3), textcoords="offset points", color="dimgray")
    marks = [("best", rec.best, "tab:green", "*"), ("fastest", rec.fastest, "tab:red", "D"),
             ("best value", rec.best_value, "tab:orange", "s")]
    for label, o, color, marker in marks:
        if o is not None:
            ax.scatter(o.total_time_s / 3600, convert(o.total_cost, o.currency, cur), s=220 if marker == "*" else 90,
                       color=color, marker=marker, edgecolor="black", zorder=3,
                       label=f"{label}: {o.gpu}×{o.count} ({o.provider})")
    if deadline_s is not None:
        ax.axvline(deadline_s / 3600, color="tab:red", linestyle="--", linewidth=1, label="deadline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("job time (hours, log scale)")
    ax.set_ylabel(f"job cost ({cur}, log scale)")
    ax.set_title(f"{rec.workload.model}: cost vs time on every GPU option\n"
                 "(dot size: GPU count; grey: excluded; labelled: no other option is both faster and cheaper)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pareto_front(options, currency: str) -> list:
    """Options that no other option beats on both job time and job cost."""
    ranked = sorted(options, key=lambda o: (o.total_time_s, convert(o.total_cost, o.currency, currency)))
    front, cheapest = [], float("inf")
    for o in ranked:
        cost = convert(o.total_cost, o.currency, currency)
        if cost < cheapest:
            front.append(o)
            cheapest = cost
    return front
