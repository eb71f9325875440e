"""A prefill timed elsewhere (a traced forward) and the closed form's decode steps, composed as serve_time does
(runtime.llm.generation_time): traced decoders generating (plan.generation)."""

import pytest

from gpuwise.runtime.llm import DecodeStep, generation_time
from gpuwise.runtime.model import StepTime


def prefill(count=1, bound="compute") -> StepTime:
    return StepTime(gpu="rtx-3090", count=count, step_time_s=1.6, samples_per_s=10.0, by_class_s={"matmul": 1.5},
                    bound=bound, warnings=("traced",), stack="eager", host_s=0.2, device_s=1.6)


def decode(gpu_s=0.020, host_s=0.030) -> DecodeStep:
    return DecodeStep(step_s=max(gpu_s, host_s), gpu_s=gpu_s, host_s=host_s, memory_s=gpu_s, compute_s=gpu_s / 4,
                      tp_comm_s=0.0)


def test_the_batch_is_its_prefill_and_every_decode_step():
    served = generation_time(prefill(count=2), decode(), new_tokens=512, batch=16, engine="hf", regime="generation")
    step = served.step
    assert served.ttft_s == 1.6 and served.decode_s == pytest.approx(512 * 0.030)
    assert step.step_time_s == pytest.approx(1.6 + 512 * 0.030)
    assert step.by_class_s == pytest.approx({"prefill": 1.6, "decode": 512 * 0.030})
    assert step.samples_per_s == pytest.approx(2 * 16 / step.step_time_s)    # each GPU serves its own batch
    assert served.decode_tokens_per_s == pytest.approx(16 / 0.030)
    assert step.regime == "generation" and step.count == 2 and step.stack == "eager"
    assert step.host_s == pytest.approx(0.2 + 512 * 0.030) and step.device_s == pytest.approx(1.6 + 512 * 0.020)


def test_a_host_bound_decode_says_so_and_is_launch_bound():
    step = generation_time(prefill(), decode(), new_tokens=512, batch=16, engine="hf", regime="generation").step
    assert step.bound == "launch"
    assert step.warnings[0] == "traced" and "host-bound in HF generate" in step.warnings[1]


def test_a_prefill_longer_than_the_decode_keeps_its_own_bound():
    fast = decode(gpu_s=0.001, host_s=0.0005)
    step = generation_time(prefill(bound="memory"), fast, new_tokens=4, batch=1, engine="hf", regime="generation").step
    assert step.bound == "memory" and step.warnings == ("traced",)
    slow = generation_time(prefill(), decode(gpu_s=0.05, host_s=0.01), new_tokens=512, batch=1, engine="hf",
                           regime="generation").step
    assert slow.bound == "memory"        # the decode step's own: its reads outweigh its arithmetic
