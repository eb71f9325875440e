"""With the workload known, time on other GPUs comes from the time predictor (a real trace)."""

from pathlib import Path

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.report.build import build_report
from gpuwise.report.predicted import method_label, predicted_step_time
from gpuwise.report.rightsize import METHOD
from gpuwise.workload import Workload

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"


def test_known_workload_scales_busy_time_by_the_predicted_step_time_ratio():
    catalog = load_catalog(user_file=False)
    workload = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-fp16")
    step_time_s = predicted_step_time(workload)
    report = build_report(SEED, catalog, gpu_price=(15.0, "CNY"), step_time_s=step_time_s,
                          method=method_label(workload))
    sizing = report.right_sizing
    assert sizing.method.startswith("time predictor") and sizing.method != METHOD
    a100, t4 = resolve_gpu(catalog, "a100-40gb-sxm4"), resolve_gpu(catalog, "t4")
    ratio = step_time_s(t4) / step_time_s(a100)
    busy = sizing.busy_share_used
    t4_option = next(o for o in sizing.options if o.gpu_id == "t4")
    assert abs(t4_option.time_factor - ((1 - busy) + busy * ratio)) < 1e-9
    assert t4_option.time_factor > 1  # a T4 is slower than an A100 for the same step


def test_bf16_workload_cannot_run_where_the_gpu_has_no_bf16():
    workload = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-bf16")
    step_time_s = predicted_step_time(workload)
    assert step_time_s(resolve_gpu(load_catalog(user_file=False), "t4")) is None
