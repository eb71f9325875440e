"""How far a step-time prediction is from a measurement, as the benchmark found it, per regime.

``benchmarks/time_accuracy.py`` writes ``time_accuracy.json``: the error of the shipped model on every
published run held out in GPU *and* model family (the frozen split's test side, the wider held-out set
and the fresh check's held-out families; benchmarks/README.md), grouped by the regime of the
prediction (``StepTime.regime``: what kind of step it is, REGIMES below). A prediction is shown with
the range that held 80% of the measurements of its own regime: ``predicted / ratio_q90`` to
``predicted / ratio_q10``, where the ratio is predicted / measured step time. A regime with fewer than
``MIN_CASES`` held-out runs has no figures: a small-batch step, a multi-GPU step, a compiled step or the
LLM closed form is not given the big-batch jobs' range (their errors differ in kind: the host's
launch cost, the links, Inductor's fusion, a formula instead of a trace). Multi-GPU data-parallel training
within one node has its own held-out runs (Lambda's 2-8 GPU systems, benchmarks/README.md "Nineteenth
session"); a sharded (ZeRO / FSDP) or multi-node step is a regime of its own that no traced run measures.
A torch.compile inference step has its own held-out runs too (timm's ``-dynamo`` files on the RTX 4090 and the
RTX PRO 6000, benchmarks/README.md "Twentieth session"); a compiled training step is a regime of its own that no
public run measures.

Within a regime the figures are pooled over GPUs and families: they hide a bias by kind, e.g. ResNet-50
on H100/H200/GH200/B200 measured 1.4-3.8x the prediction (Lambda's runs level off near 3,000 images/s,
a ceiling that is not the GPU). A user's own runs (``gpuwise calibrate``) narrow it for their stack.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources

# What kind of step a prediction is (runtime/predict.py decides; "llm": the closed form of plan/llm, and
# "llm-train" its training of every weight of a dense decoder without offload, the kind of step llm-foundry's MPT
# runs measure (runtime/llm.py decides); "generation": a traced decoder generating, plan/generation: its traced
# prefill and the closed form's decode).
LLM_REGIME, LLM_TRAIN_REGIME = "llm", "llm-train"
LLM_REGIMES = (LLM_REGIME, LLM_TRAIN_REGIME)
REGIMES = ("large-batch", "small-batch", "multi-gpu", "multi-gpu-sharded", "multi-node", "compiled", "compiled-train",
           *LLM_REGIMES, "generation", "data-dependent", "rnn", "mig")
REGIME_WORDS = {"large-batch": "a single-GPU eager step",
                "small-batch": "a small-batch step, the host's issue time at least half the GPU's",
                "multi-gpu": "a data-parallel (DDP) training step on several GPUs of one node",
                "multi-gpu-sharded": "a sharded (ZeRO / FSDP) training step on several GPUs of one node",
                "multi-node": "a training step over several nodes",
                "compiled": "a torch.compile inference step", "compiled-train": "a torch.compile training step",
                "llm": "the LLM closed form",
                "llm-train": "the LLM closed form, training every weight of a dense decoder",
                "generation": "generation by a traced decoder: the closed form's decode steps",
                "data-dependent": "a step whose ops or control flow depend on tensor values (routing, nonzero, an early exit)",
                "rnn": "a step with LSTM / GRU layers (cuDNN's fused RNN, timed from its structure)",
                "mig": "a step on a MIG slice (the whole GPU's specs scaled to the slice)"}
MIN_CASES = 10   # fewer held-out runs than this give no range: a 10-80% band needs more than a handful


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
    regime: str = "large-batch"

    def likely_range_s(self, step_time_s: float) -> tuple[float, float]:
        """The measured step time 8 in 10 held-out runs would have had, given this prediction."""
        return step_time_s / self.ratio_q90, step_time_s / self.ratio_q10

    def to_dict(self) -> dict:
        return asdict(self)


def _entries(d: dict) -> dict[str, dict]:
    """Each regime's entry of a ``time_accuracy.json`` document; one flat entry (before regimes) is the big-batch
    one."""
    return d.get("regimes", {"large-batch": d})


def accuracies_from(d: dict) -> dict[str, TimeAccuracy]:
    """The figures of every regime in a ``time_accuracy.json`` document that has at least ``MIN_CASES``
    held-out runs. A document of one flat entry (before regimes) is the big-batch one."""
    fields = TimeAccuracy.__dataclass_fields__
    out = {}
    for regime, e in _entries(d).items():
        e = {**{k: d[k] for k in ("date", "source") if k in d}, **e, "regime": regime}
        if e.get("cases", 0) >= MIN_CASES:
            out[regime] = TimeAccuracy(**{k: e[k] for k in fields if k in e})
    return out


def case_counts_from(d: dict) -> dict[str, int]:
    """The held-out runs of every regime in a ``time_accuracy.json`` document, those under ``MIN_CASES`` too."""
    return {regime: e.get("cases", 0) for regime, e in _entries(d).items()}


@lru_cache(maxsize=1)
def _shipped_document() -> dict:
    """The shipped ``time_accuracy.json`` (empty where the file is missing: a checkout before the benchmark ran)."""
    try:
        text = resources.files("gpuwise.runtime").joinpath("time_accuracy.json").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return {"regimes": {}}
    return json.loads(text)


@lru_cache(maxsize=1)
def load_accuracies() -> dict[str, TimeAccuracy]:
    """The shipped figures by regime (none where the file is missing: a checkout before the benchmark ran)."""
    return accuracies_from(_shipped_document())


def held_out_cases(regime: str) -> int:
    """How many held-out runs' step times the shipped file scores in ``regime`` (0 where none or no file)."""
    return case_counts_from(_shipped_document()).get(regime, 0)


def load_accuracy(regime: str = "large-batch") -> TimeAccuracy | None:
    """The figures of one regime; None where no (or too few) held-out runs measure it."""
    return load_accuracies().get(regime)
