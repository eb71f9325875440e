"""A picture of memory over the traced step: allocated, reserved, the total nvidia-smi shows, the GPU's size."""

from __future__ import annotations


def plot_timeline(est, path: str) -> None:
    """Write a PNG of ``est`` (a plan Estimate) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = est.memory.timeline
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    if timeline:
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
    fig.savefig(path)
    plt.close(fig)
