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


def test_an_nvidia_smi_log_with_a_model_sets_its_memory_beside_the_prediction_and_flags_a_mismatch():
    """A new user passed --model for an nvidia-smi log (12.0 GiB measured) of a job estimate puts at 50+ GiB: the
    report ranked cheaper GPUs on the log without a word. The log's peak is now the measured nvidia-smi figure,
    and a prediction more than 1.5x away either way says the workload is probably not the job that ran."""
    catalog = load_catalog(user_file=False)
    far = Workload("hf:meta-llama/Llama-2-7b-hf", finetune="lora", seq_len=1024, batch_size=4)
    report = build_report(SEED, catalog, gpu_price=(15.0, "CNY"), workload=far)
    total = next(f for f in report.predicted_vs_measured.figures if f.name == "nvidia-smi total")
    assert total.measured == report.usage.needed_peak_bytes and total.predicted > 1.5 * total.measured
    assert any("describe the job that ran" in n for n in report.notes)
    near = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-fp16")
    report = build_report(SEED, catalog, gpu_price=(15.0, "CNY"), workload=near)
    assert report.predicted_vs_measured is not None        # a small job: flagged too if 1.5x away
    total = next(f for f in report.predicted_vs_measured.figures if f.name == "nvidia-smi total")
    flagged = any("describe the job that ran" in n for n in report.notes)
    assert flagged == (not 1 / 1.5 <= total.predicted / total.measured <= 1.5)
