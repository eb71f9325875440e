"""Gradient checkpointing of a hand-written diffusion UNet whose levels are lists of lists
(``for res, attn, down in self.downs``, as lucidrains' denoising-diffusion-pytorch writes it): the inner
lists are never called, so their elements are the blocks that must run checkpointed."""

from __future__ import annotations

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

UNET = '''
import torch
from torch import nn
import torch.nn.functional as F


class ResBlock(nn.Module):
    def __init__(self, c, tdim=32):
        super().__init__()
        self.n1 = nn.GroupNorm(4, c)
        self.c1 = nn.Conv2d(c, c, 3, padding=1)
        self.t = nn.Linear(tdim, c)
        self.n2 = nn.GroupNorm(4, c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.t(temb)[:, :, None, None]
        return x + self.c2(F.silu(self.n2(h)))


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.GroupNorm(4, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, 2, c // 2, h * w).transpose(-1, -2).unbind(1)
        return x + F.scaled_dot_product_attention(q, k, v).transpose(-1, -2).reshape(b, c, h, w)


class UNet(nn.Module):
    def __init__(self, c=16, levels=3):
        super().__init__()
        self.temb = nn.Linear(1, 32)
        self.inp = nn.Conv2d(3, c, 3, padding=1)
        self.downs = nn.ModuleList([nn.ModuleList([ResBlock(c), Attn(c), nn.Conv2d(c, c, 3, stride=2, padding=1)])
                                    for _ in range(levels)])
        self.ups = nn.ModuleList([nn.ModuleList([ResBlock(2 * c), nn.Conv2d(2 * c, c, 1)]) for _ in range(levels)])
        self.out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x, t):
        temb = self.temb(t[:, None].float())
        h = self.inp(x)
        skips = []
        for res, attn, down in self.downs:
            h = attn(res(h, temb))
            skips.append(h)
            h = down(h)
        for res, proj in self.ups:
            h = F.interpolate(h, scale_factor=2.0)
            h = proj(res(torch.cat([h, skips.pop()], dim=1), temb))
        return self.out(h)


def unet(batch_size=4, image_size=32):
    return UNet(), (torch.empty(batch_size, 3, image_size, image_size), torch.empty(batch_size, dtype=torch.long))
'''


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("unet") / "unet.py"
    path.write_text(UNET)
    return f"{path}:unet"


def _peak_live_activation_bytes(trace) -> int:
    live = peak = 0
    for event in trace.events:
        if event.category != "activations":
            continue
        live += event.size_bytes if event.kind == "alloc" else -event.size_bytes
        peak = max(peak, live)
    return peak


def test_checkpointing_a_unet_whose_levels_are_lists_of_lists_recomputes_its_blocks(spec):
    plain = trace_workload(Workload(model=spec, batch_size=4, optimizer="sgd"), use_cache=False)
    ckpt = trace_workload(Workload(model=spec, batch_size=4, optimizer="sgd", grad_checkpointing=True),
                          use_cache=False)
    # 3 levels down (res, attn, downsample) + 3 up (res, projection): each an element of an inner list
    assert "gradient checkpointing: torch.utils.checkpoint around 15 blocks" in ckpt.notes
    assert ckpt.flops > plain.flops                  # the blocks' forwards run again in backward
    assert _peak_live_activation_bytes(ckpt) < _peak_live_activation_bytes(plain)
