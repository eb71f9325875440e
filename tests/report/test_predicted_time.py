"""With the workload known, time on other GPUs comes from the time predictor (a real trace)."""

from pathlib import Path

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.report.build import build_report
from gpuwise.plan.scaling import PREDICTED_METHOD, time_scaling
from gpuwise.workload import Workload

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"


def test_known_workload_scales_busy_time_by_the_predicted_step_time_ratio():
    catalog = load_catalog(user_file=False)
    workload = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-fp16")
    scaling = time_scaling("amp-fp16", workload)
    step_time_s = scaling.step_time_s
    report = build_report(SEED, catalog, gpu_price=(15.0, "CNY"), scaling=scaling)
    sizing = report.right_sizing
    assert sizing.method == PREDICTED_METHOD
    a100, t4 = resolve_gpu(catalog, "a100-40gb-sxm4"), resolve_gpu(catalog, "t4")
    ratio = step_time_s(t4) / step_time_s(a100)
    busy = sizing.busy_share_used
    t4_option = next(o for o in sizing.options if o.gpu_id == "t4")
    assert abs(t4_option.time_factor - ((1 - busy) + busy * ratio)) < 1e-9
    assert t4_option.time_factor > 1  # a T4 is slower than an A100 for the same step


def test_bf16_workload_cannot_run_where_the_gpu_has_no_bf16():
    workload = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-bf16")
    catalog = load_catalog(user_file=False)
    scaling = time_scaling("amp-bf16", workload)
    assert scaling.ratio(resolve_gpu(catalog, "a100-40gb-sxm4"), resolve_gpu(catalog, "t4")) is None
