"""gpuwise.advise: advice from training dynamics (loss curves, gradient noise) with GPU prices.

    from gpuwise.advise import read_log, advise, AdviseSettings, NoiseScaleMeter
    report = advise(read_log("run.db"), AdviseSettings(target_loss=1.8), catalog=load_catalog())
    report.diagnosis            # healthy | plateau | noisy | not_learning | diverged
    report.to_dict()            # the `gpuwise advise --json` object

Modules, one idea each: readers (logs -> TrainingLog; tensorboard_events for event files, names for which
column is which), smoothing (debiased EMA, noise), phases, failures (NaN/inf, divergence, no progress),
families + fit (trend fits, forecasts), noise_scale (McCandlish B_simple, NoiseScaleMeter),
gpu_options (step time on other GPUs, prices), gpu_plan, advice (texts with numbers), wording (numbers
in words: ranges, drops, long durations), report, plot.
"""

from gpuwise.advise.analysis import DIAGNOSES, AdviseSettings, CurveAnalysis, analyze_curve
from gpuwise.advise.data import Curve, GradNoiseSamples, TrainingLog
from gpuwise.advise.errors import AdviseError
from gpuwise.advise.gpu_plan import SwitchCost
from gpuwise.advise.noise_scale import NoiseScaleMeter, grad_sq_norm
from gpuwise.advise.readers import read_log
from gpuwise.advise.report import AdviceReport, PricingRequest, advise

__all__ = [
    "DIAGNOSES", "AdviceReport", "AdviseError", "AdviseSettings", "Curve", "CurveAnalysis", "GradNoiseSamples",
    "NoiseScaleMeter", "PricingRequest", "SwitchCost", "TrainingLog", "advise",
    "analyze_curve", "grad_sq_norm", "read_log",
]
