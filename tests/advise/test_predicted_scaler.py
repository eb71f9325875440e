"""With the run's workload known, step times on other GPUs come from the time predictor."""

import math

from gpuwise.advise.gpu_options import predicted_scaler
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan import step_time_function
from gpuwise.workload import Workload


def test_predicted_scaler_keeps_the_measured_time_and_scales_by_the_predicted_ratio():
    catalog = load_catalog(user_file=False)
    a100, t4, l4 = (resolve_gpu(catalog, n) for n in ("a100-40gb-sxm4", "t4", "l4"))
    step = step_time_function(Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-bf16"))
    scale = predicted_scaler(step)
    assert scale(a100, a100, 0.5) == 0.5
    assert math.isclose(scale(a100, l4, 0.5), 0.5 * step(l4) / step(a100))
    assert scale(a100, l4, 0.5) > 0.5           # an L4 is slower than an A100
    assert scale(a100, t4, 0.5) == math.inf     # amp-bf16 cannot run fast on a T4: not an option
