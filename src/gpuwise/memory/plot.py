"""A picture of memory over the traced step: allocated, reserved, the total nvidia-smi shows, the GPU's size."""

from __future__ import annotations

from gpuwise.plotfile import PlotError, plot_format, save_figure


def plot_timeline(est, path: str) -> None:
    """Write a PNG of ``est`` (a plan Estimate) to ``path`` (another format where its suffix names one).

    PlotError (one line) where the path cannot take it, or where the estimate has no timeline: the LLM
    closed form adds up its parts without replaying a step; no empty chart is written."""
    plot_format(path)
    timeline = est.memory.timeline
    if not timeline:
        raise PlotError(no_timeline(est.workload.model))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    seq, allocated, reserved = zip(*timeline)
    ax.plot(seq, [b / 2**30 for b in allocated], label="allocated")
    ax.plot(seq, [b / 2**30 for b in reserved], label="reserved (caching allocator)")
    ax.axhline(est.memory.total_bytes / 2**30, color="tab:red", linestyle="--", linewidth=1,
               label="total incl. CUDA context")
    if est.gpu is not None:
        ax.axhline(est.gpu.visible_memory_bytes / 2**30, color="black", linewidth=1,
                   label=f"{est.gpu.id} memory (as the driver reports it)")
    ax.set_xlabel("allocator event (two steps: warm-up, then measured)")
    ax.set_ylabel("GiB")
    ax.set_title(f"{est.workload.model}: GPU memory over the step")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def no_timeline(model: str) -> str:
    """Why ``--plot`` has nothing to draw for a closed-form (LLM) estimate."""
    return (f"--plot draws memory over a traced step: {model} is estimated in closed form (a decoder LLM, "
            "docs/llm.md), which has no memory timeline (no file written)")
