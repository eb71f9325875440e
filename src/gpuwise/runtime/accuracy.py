"""How far a step-time prediction is from a measurement, as the benchmark found it.

``benchmarks/time_accuracy.py`` writes ``time_accuracy.json``: the error of the shipped model on every
published run held out in GPU *and* model family (the frozen split's test side, the wider held-out set
and the fresh check's held-out families; benchmarks/README.md). A prediction is shown with the range
that held 80% of those measurements: ``predicted / ratio_q90`` to ``predicted / ratio_q10``, where
the ratio is predicted / measured step time. It is the error on published runs whose GPU and model family
no end-to-end fit saw (the kernel laws did learn from an A100 PCIe's single kernels), pooled over GPUs and
families: it hides a bias by kind, e.g. ResNet-50 on H100/H200/GH200/B200 measured 1.4-3.8x the prediction
(Lambda's runs level off near 3,000 images/s, a ceiling that is not the GPU), fp32 ResNet on V100-class
GPUs 0.6-0.8x. A user's own runs (``gpuwise calibrate``) narrow it for their stack.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class TimeAccuracy:
    cases: int                   # held-out published runs behind the figures
    median_abs_error: float      # median of |predicted / measured - 1|
    p90_abs_error: float
    signed_median_error: float   # < 0: predictions faster than measured
    ratio_q10: float             # 10th percentile of predicted / measured step time
    ratio_q90: float             # 90th percentile
    date: str = ""
    source: str = ""

    def likely_range_s(self, step_time_s: float) -> tuple[float, float]:
        """The measured step time 8 in 10 held-out runs would have had, given this prediction."""
        return step_time_s / self.ratio_q90, step_time_s / self.ratio_q10

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def load_accuracy() -> TimeAccuracy | None:
    """The shipped figures; None where the file is missing (a checkout before the benchmark ran)."""
    try:
        text = resources.files("gpuwise.runtime").joinpath("time_accuracy.json").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return None
    d = json.loads(text)
    return TimeAccuracy(**{k: d[k] for k in TimeAccuracy.__dataclass_fields__ if k in d})
