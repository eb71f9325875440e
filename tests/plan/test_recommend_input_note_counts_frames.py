"""recommend's input-pipeline note counts a video clip's frames, as each option's step does (was: "delivers 2,162
samples/s per GPU" beside every option's own 135 for 8 workers decoding 16-frame clips)."""

from __future__ import annotations

import textwrap

from gpuwise.plan import model_for
from gpuwise.plan.recommend import _input_outcome
from gpuwise.runtime.stack import Stack
from gpuwise.workload import Workload


def test_the_input_note_decodes_every_frame_of_a_clip(tmp_path):
    (tmp_path / "video.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        def video():
            return nn.Sequential(nn.Conv3d(3, 8, 3), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(8, 4))
    """))
    job = Workload(f"{tmp_path / 'video.py'}:video", batch_size=4, image_size=32, cpu_workers=8)
    model = model_for(job)
    model.trace()       # as recommend's options do before its notes
    frames = model.frames_per_sample
    assert frames == 16
    note = _input_outcome(job, [], model)
    assert Stack.from_workload(job, frames).describe_input() in note
    assert Stack.from_workload(job).describe_input() not in note
