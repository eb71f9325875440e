"""A video model's sample is a clip of frames, each decoded as one JPEG: the cores that feed N clips/s and the clips
N loader workers deliver count every frame (was: a 16-frame clip costed as one image, 16x too few cores)."""

from __future__ import annotations

import pytest

from gpuwise.runtime.input_pipeline import cores_to_feed, decoding_warning, workers_rate

FRAMES, SIDE_PX, CLIPS_PER_S = 16, 112, 3758


def test_a_clip_of_frames_needs_a_core_per_frame_decoded():
    one_image = cores_to_feed(CLIPS_PER_S, SIDE_PX, training=True)
    assert cores_to_feed(CLIPS_PER_S, SIDE_PX, training=True, frames_per_sample=FRAMES) == pytest.approx(
        FRAMES * one_image)
    assert workers_rate(8, SIDE_PX, True, frames_per_sample=FRAMES) == pytest.approx(
        workers_rate(8, SIDE_PX, True) / FRAMES)


def test_the_decoding_warning_counts_the_frames_of_a_clip():
    image = decoding_warning(CLIPS_PER_S, SIDE_PX)
    clip = decoding_warning(CLIPS_PER_S, SIDE_PX, frames_per_sample=FRAMES)
    assert "3,758 images/s" in image and "3,758 clips/s of 16 frames (60,128 frames/s)" in clip
    cores = round(cores_to_feed(CLIPS_PER_S, SIDE_PX, training=True, frames_per_sample=FRAMES))
    assert f"~{cores} CPU cores" in clip and f"~{cores} CPU cores" not in image


def test_a_slow_video_model_is_warned_where_the_same_rate_of_images_is_not():
    quiet_rate = 300.0      # images/s one or two cores decode; 16 times as many frames take more than 8
    assert decoding_warning(quiet_rate, SIDE_PX) is None
    assert decoding_warning(quiet_rate, SIDE_PX, frames_per_sample=FRAMES) is not None
