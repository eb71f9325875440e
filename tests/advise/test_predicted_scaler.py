"""With the run's workload known, step times on other GPUs come from the time predictor."""

import math

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.scaling import PREDICTED_METHOD, time_scaling
from gpuwise.workload import Workload


def test_predicted_scaling_keeps_the_measured_time_and_scales_by_the_predicted_ratio():
    catalog = load_catalog(user_file=False)
    a100, t4, l4 = (resolve_gpu(catalog, n) for n in ("a100-40gb-sxm4", "t4", "l4"))
    scaling = time_scaling("amp-bf16", Workload("torchvision:resnet18", batch_size=8, image_size=64,
                                                precision="amp-bf16"))
    step = scaling.step_time_s
    assert scaling.method == PREDICTED_METHOD
    assert scaling.ratio(a100, a100) == 1.0
    assert math.isclose(scaling.ratio(a100, l4), step(l4) / step(a100))
    assert scaling.ratio(a100, l4) > 1.0          # an L4 is slower than an A100
    assert scaling.ratio(a100, t4) is None        # amp-bf16 cannot run fast on a T4: not an option
