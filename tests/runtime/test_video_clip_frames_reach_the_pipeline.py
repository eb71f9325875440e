"""A video model's sample is a clip: the frames of its (N, C, T, H, W) input reach the input pipeline's costing
(was: a traced Conv3d model was costed as one JPEG a sample: "~24 CPU cores" where 16 frames a clip need ~380, and
``--cpu-workers 8`` delivering 2,162 clips/s where ~135 is right). Still images keep one frame a sample."""

from __future__ import annotations

import pytest
import torch

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.input_pipeline import decode_cost, is_decoding_warning
from gpuwise.trace import trace_workload
from gpuwise.trace.tracer import frames_per_sample
from gpuwise.workload import Workload
from gpuwise.workload.spec_builders import GUESSED_CLIP_FRAMES

SIDE_PX, BATCH, OWN_FRAMES, WORKERS = 32, 8, 6, 8
MODELS = f'''
import torch
from torch import nn


def clip_net():
    return nn.Sequential(nn.Conv3d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(8, 10))


def guessed_clip():
    return clip_net()


def own_clip(batch_size=2):
    return clip_net(), (torch.randn(batch_size, 3, {OWN_FRAMES}, {SIDE_PX}, {SIDE_PX}),)


def still(batch_size=2):
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    return net, (torch.randn(batch_size, 3, {SIDE_PX}, {SIDE_PX}),)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("video") / "video_models.py"
    path.write_text(MODELS)
    return path


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _job(models, factory: str, **kw) -> Workload:
    return Workload(model=f"{models}:{factory}", batch_size=BATCH, image_size=SIDE_PX, precision="amp-bf16", **kw)


@pytest.fixture(scope="module")
def traces(models):
    return {factory: trace_workload(_job(models, factory), use_cache=False)
            for factory in ("guessed_clip", "own_clip", "still")}


def _decoding_cores(samples_per_s: float, frames: int) -> float:
    """The cores the pipeline's own per-image cost says ``samples_per_s`` samples of ``frames`` frames take."""
    return samples_per_s * frames * decode_cost(training=True).per_image_s(SIDE_PX)


@pytest.mark.parametrize("factory, frames", [("guessed_clip", GUESSED_CLIP_FRAMES), ("own_clip", OWN_FRAMES),
                                             ("still", 1)])
def test_the_trace_records_the_frames_of_a_sample(traces, factory, frames):
    assert traces[factory].frames_per_sample == frames


@pytest.mark.parametrize("factory, frames", [("guessed_clip", GUESSED_CLIP_FRAMES), ("own_clip", OWN_FRAMES),
                                             ("still", 1)])
def test_the_decoding_warning_counts_every_frame_of_a_clip(traces, h100, factory, frames):
    step = predict_step_time(traces[factory], h100)
    warning = next(w for w in step.warnings if is_decoding_warning(w))
    assert f"~{_decoding_cores(step.samples_per_s, frames):.0f} CPU cores" in warning
    fed = "images/s" if frames == 1 else f"clips/s of {frames} frames"
    assert f"{step.samples_per_s:,.0f} {fed}" in warning


@pytest.mark.parametrize("factory, frames", [("guessed_clip", GUESSED_CLIP_FRAMES), ("own_clip", OWN_FRAMES),
                                             ("still", 1)])
def test_cpu_workers_deliver_clips_at_one_decode_per_frame(models, traces, h100, factory, frames):
    step = predict_step_time(traces[factory], h100, workload=_job(models, factory, cpu_workers=WORKERS))
    assert step.bound == "input"
    per_sample_s = decode_cost(training=True).per_image_s(SIDE_PX) * frames
    assert step.samples_per_s == pytest.approx(WORKERS / per_sample_s)


def test_a_volume_or_a_time_first_clip_is_not_charged_as_frames():
    """A CT/MRI volume (N, 1, D, H, W) is no D JPEGs, and (N, T, C, H, W) is not told from one: 1 frame each
    (was: D and C JPEGs a sample)."""
    volume, time_first = torch.empty(2, 1, 128, 96, 96), torch.empty(2, 16, 3, 64, 64)
    assert frames_per_sample((volume,), {}) == 1 and frames_per_sample((time_first,), {}) == 1
    assert frames_per_sample((), {"clip": torch.empty(2, 3, 16, 64, 64)}) == 16
