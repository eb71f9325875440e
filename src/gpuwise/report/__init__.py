"""gpuwise.report: what a job really used (from a gpuwise run log, nvidia-smi CSV or dmon log) and which
cheaper GPU would have served it.

    from gpuwise.report import build_report
    report = build_report("run.db", load_catalog(), gpu_price=(15.0, "CNY"))
    report.right_sizing.cheaper      # GPUs that would have held the job for less
"""

from gpuwise.report.build import Report, build_report
from gpuwise.report.errors import ReportError

__all__ = ["Report", "ReportError", "build_report"]
