"""The recommendation as a picture: cost against time for every option, the deadline, the choice. At a request
rate (``--request-rate``), cost an hour against the time a request waits for its whole answer: every option
there serves one hour, so the job time would put them all on one line."""

from __future__ import annotations

from pathlib import Path

from gpuwise.plan.money import convert
from gpuwise.plan.recommend import Recommendation
from gpuwise.plotfile import PlotError, plot_format, save_figure


def plot_recommendation(rec: Recommendation, path: str | Path, deadline_s: float | None = None) -> None:
    """Write a PNG of cost against time for ``rec``'s options to ``path`` (another format where its suffix
    names one); PlotError (one line) where the path cannot take it or no option has a time and a cost."""
    plot_format(path)
    at_rate = rec.workload.request_rate_per_s is not None
    new_tokens = rec.workload.max_new_tokens
    # x: hours of the job; at a rate, seconds a request waits for its answer (recommend's "fastest")
    x_of = ((lambda o: o.ttft_s + new_tokens * o.tpot_s if o.ttft_s is not None and o.tpot_s is not None else None)
            if at_rate else (lambda o: o.total_time_s / 3600 if o.total_time_s is not None else None))
    priced = [o for o in rec.options if o.fits and x_of(o) is not None and o.total_cost is not None]
    if not priced:
        raise PlotError(f"--plot {path}: no option fits with a time and a cost to draw (no file written)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    cur = rec.ranking_currency
    front = _pareto_front(priced, cur, x_of)
    for o in priced:
        x, y = x_of(o), convert(o.total_cost, o.currency, cur)
        color = "tab:blue" if o.eligible else "tab:gray"
        ax.scatter(x, y, s=18 + 14 * o.count, color=color, alpha=0.75, zorder=2)
        if any(o is f for f in front):  # label only the options no other beats on both time and cost
            ax.annotate(f"{o.gpu}×{o.count}" if o.count > 1 else o.gpu, (x, y), fontsize=7,
                        xytext=(3, 3), textcoords="offset points", color="dimgray")
    marks = [("best", rec.best, "tab:green", "*"), ("fastest", rec.fastest, "tab:red", "D"),
             ("best value", rec.best_value, "tab:orange", "s")]
    for label, o, color, marker in marks:
        if o is not None and x_of(o) is not None:
            ax.scatter(x_of(o), convert(o.total_cost, o.currency, cur), s=220 if marker == "*" else 90,
                       color=color, marker=marker, edgecolor="black", zorder=3,
                       label=f"{label}: {o.gpu}×{o.count} ({o.provider})")
    if deadline_s is not None and not at_rate:
        ax.axvline(deadline_s / 3600, color="tab:red", linestyle="--", linewidth=1, label="deadline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if at_rate:
        ax.set_xlabel(f"a request's answer ({new_tokens} new tokens), seconds, log scale")
        ax.set_ylabel(f"cost an hour at the load ({cur}, log scale)")
    else:
        ax.set_xlabel("job time (hours, log scale)")
        ax.set_ylabel(f"job cost ({cur}, log scale)")
    ax.set_title(f"{rec.workload.model}: cost vs time on every GPU option\n"
                 "(dot size: GPU count; grey: excluded; labelled: no other option is both faster and cheaper)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def _pareto_front(options, currency: str, x_of) -> list:
    """Options that no other option beats on both time (``x_of``) and cost."""
    ranked = sorted(options, key=lambda o: (x_of(o), convert(o.total_cost, o.currency, currency)))
    front, cheapest = [], float("inf")
    for o in ranked:
        cost = convert(o.total_cost, o.currency, currency)
        if cost < cheapest:
            front.append(o)
            cheapest = cost
    return front
